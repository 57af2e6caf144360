"""A run's options resolved before it starts: the backend object of simulate's arguments (composed
to a higher order, wrapped for recovery), its settings as plain data (for a checkpoint), the code
generation by the run's work (:mod:`conserve.compilation`), and the checks and warnings of the
arguments (a progress callback, steps too coarse for the parts' spin)."""

from __future__ import annotations

import numbers
import warnings
from dataclasses import fields, replace

from ..backends import BACKENDS, Composition, ReferenceBackend, StepBackend, Subdividing
from ..backends.base import Wrapper
from ..backends.compose import check_order
from ..backends.director import unknowns as director_unknowns
from ..compilation.modes import MODES
from ..discrete.newton import Newton
from ..errors import CoarseStepWarning, ModelError, is_count
from ..model.assembled import Model
from .failures import COARSE_TURN, part_spin_rates
from .grid import time_grid


def check_mode(mode, who="simulate"):
    """``mode`` if it is a code generation of :data:`conserve.compilation.modes.MODES`, else a ModelError."""
    if mode not in MODES:
        raise ModelError(f"{who}: compile must be one of {list(MODES)}, got {mode!r}.")
    return mode


def run_work(backend: StepBackend, model: Model, steps: int) -> int:
    """A run's unknown-steps, which ``compile="auto"`` compiles by (:func:`conserve.compilation.modes.resolved_mode`):
    steps × sub-steps per step (a composition's stages) × the director backend's unknowns, whichever
    backend runs (the reduced backend's steps cost about as much as the director's)."""
    stages = 1
    while isinstance(backend, Wrapper):  # compositions (their stages), subdivision
        stages *= len(backend.fractions) if isinstance(backend, Composition) else 1
        backend = backend.inner
    return steps * stages * director_unknowns(model)


def planned_work(model: Model, t_end, dt, backend="director", newton=None, order=2, t0=0.0, who="simulate"):
    """The unknown-steps (:func:`run_work`) of a run of ``model`` from t0 to t_end by the fixed step
    dt with these options, before it runs (studies and sweeps resolve ``compile="auto"`` for all
    their runs with it); None for adaptive steps."""
    if not isinstance(dt, numbers.Real):
        return None
    return run_work(resolve_backend(backend, newton, order=order), model, time_grid(t0, t_end, dt, 1, who)[3])


def resolve_backend(backend="director", newton=None, ode=None, on_failure="raise", max_subdivisions=6, order=2):
    """The backend object of :func:`conserve.simulate`'s options: a name of ``conserve.backends.BACKENDS``
    (built with ``newton``, or for "ode" with the ``ode`` options) or a backend object (its
    Newton options replaced by ``newton`` if given), composed to ``order`` 4 or 6
    (:class:`~conserve.backends.compose.Composition`) and wrapped in
    :class:`~conserve.backends.subdivide.Subdividing` for ``on_failure="subdivide"``."""
    if newton is not None and not isinstance(newton, Newton):
        raise ModelError(f"simulate: newton must be a cs.Newton(tol=..., max_iterations=...), got {newton!r}.")
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ModelError(f"simulate: unknown backend {backend!r}; choose one of {sorted(BACKENDS)}.")
        cls = BACKENDS[backend]
        if ode is not None and not issubclass(cls, ReferenceBackend):
            raise ModelError(f"simulate: ode options {ode!r} apply to backend='ode', not '{backend}'; leave them out "
                             "or choose backend='ode'.")
        if issubclass(cls, ReferenceBackend):
            try:
                backend = cls(**(ode or {}))
            except TypeError:
                raise ModelError(f"simulate: ode options must be among {sorted(f.name for f in fields(cls))}, "
                                 f"got {sorted(ode)}.") from None
        else:
            backend = cls(newton or Newton())
    elif isinstance(backend, (StepBackend, ReferenceBackend)):
        if ode is not None:
            raise ModelError(f"simulate: ode options apply to backend='ode' by name; the backend object "
                             f"{type(backend).__name__} holds its own options.")
        if newton is not None and "newton" in {f.name for f in fields(backend)}:
            backend = replace(backend, newton=newton)
    else:
        raise ModelError(f"simulate: backend must be one of {sorted(BACKENDS)} or a backend object "
                         f"(conserve.backends), got {backend!r}.")
    if on_failure not in ("raise", "subdivide"):
        raise ModelError(f"simulate: on_failure must be 'raise' or 'subdivide', got {on_failure!r}.")
    if not (is_count(max_subdivisions) and 1 <= max_subdivisions <= 30):
        raise ModelError(f"simulate: max_subdivisions must be an integer in 1…30, got {max_subdivisions!r}.")
    try:
        order = check_order(order)
    except ValueError as err:
        raise ModelError(f"simulate: {err}") from None
    if order != 2:
        if isinstance(backend, ReferenceBackend):
            raise ModelError(f"simulate: backend '{backend.name}' (a reference integrator) has its own order; "
                             "order=4 or 6 composes the energy-momentum step.")
        backend = Composition(backend, order)
    if on_failure == "subdivide":
        if isinstance(backend, ReferenceBackend):
            raise ModelError(f"simulate: backend '{backend.name}' (a reference integrator) cannot subdivide steps.")
        backend = Subdividing(backend, int(max_subdivisions))
    return backend


def backend_settings(backend, checkpointed):
    """The backend as plain data (for a checkpoint, a built-in one: resume rebuilds it from this)."""
    inner = backend.inner if isinstance(backend, Subdividing) else backend
    order = inner.order
    inner = inner.inner if isinstance(inner, Composition) else inner
    if checkpointed and BACKENDS.get(inner.name) is not type(inner):
        raise ModelError(f"simulate: checkpoints need a built-in backend ({sorted(BACKENDS)}), got {backend!r}.")
    newton = getattr(inner, "newton", Newton())
    linear = getattr(inner, "linear", "auto")
    return {"backend": inner.name, "newton": [newton.tol, newton.max_iterations],
            "linear": linear if isinstance(linear, str) else linear.name, "reuse": getattr(inner, "reuse", "auto"),
            "on_failure": "subdivide" if isinstance(backend, Subdividing) else "raise",
            "max_subdivisions": backend.max_subdivisions if isinstance(backend, Subdividing) else 6, "order": order}


def check_progress(progress, who="simulate"):
    """A clear error for a ``progress`` that is neither None nor callable."""
    if progress is not None and not callable(progress):
        raise ModelError(f"{who}: progress must be a callable progress(done, total), called after every chunk, or "
                         f"None; got {progress!r} (a text bar: conserve.run.progress.ProgressBar('label')).")


def warn_coarse_steps(assembly, dt):
    """Warn when full-body parts turn more than :data:`~conserve.run.failures.COARSE_TURN` rad per step
    at the start: the midpoint rule turns a free spin ω by 2 atan(``|ω|`` Δt/2) instead of ``|ω|`` Δt
    per step (a 20 % lag at ``|ω|`` Δt = 1.5), so precession and nutation are far from converged (though conserving)."""
    message = coarse_step_message(assembly.layout, assembly.initial_state.q, assembly.initial_state.v, dt)
    if message:
        warnings.warn(message, CoarseStepWarning, stacklevel=3)


def coarse_step_message(layout, q, v, dt):
    """What :func:`warn_coarse_steps` says of the full-body parts at q, v (n_q,) that turn more than
    :data:`~conserve.run.failures.COARSE_TURN` rad per step dt, or None when none does."""
    fast = {name: float(rate) for name, rate in part_spin_rates(layout, q, v).items() if rate * dt > COARSE_TURN}
    if not fast:
        return None
    turns = ", ".join(f"'{name}' {rate * dt:.3g} rad (|ω| = {rate:.4g} rad/s)" for name, rate in fast.items())
    rotors = sorted(set(fast) & {r.name for r in layout.body_rotors})
    return (f"simulate: at t0 these parts turn more than {COARSE_TURN:g} rad per step: {turns}. The midpoint rule "
            "turns a spin ω by 2 atan(|ω|Δt/2) per step, so their motion is far from converged (energy and momentum "
            f"stay exact); use dt ≤ {COARSE_TURN / max(fast.values()):.3g} s"
            + (f", or model {', '.join(rotors)} as Rotor(..., model='hybrid'), whose spin angle is exact at any step"
               if rotors else "") + ".")
