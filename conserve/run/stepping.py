"""One energy-momentum step as a pure jax function: ``cs.step(model, state, t, h)``.

The building block under :func:`conserve.simulate` (which scans it), exposed for users who drive
the time loop themselves — ensembles by ``jax.vmap``, sensitivities by ``jax.grad`` — e.g.::

    assembly = system.assemble()
    model, state = assembly.model, cs.initial_state(assembly)
    step = jax.jit(lambda state: cs.step(model, state, 0.0, 1e-3))
    new, record = step(state)                       # record.converged says whether to trust it

    states = jax.vmap(lambda v: state._replace(v=v))(velocities)   # 8 initial velocities
    news, records = jax.vmap(step)(states)                          # 8 steps, one compilation

    def energy_after_step(scale):   # d/dscale of the energy after one step
        new, _ = cs.step(model, state._replace(v=scale * state.v), 0.0, 1e-3)
        return cs.energy(model, new).total
    jax.grad(energy_after_step)(1.0)

Derivatives of a step are taken by the implicit-function theorem at its converged Newton root
(:class:`conserve.Newton` ``implicit=True``, on by default here): one linear solve with the step's
Jacobian, not a differentiation of the iterations. They are the derivatives of the discrete
flow; they are exact only where Newton converged (``record.converged``), and NaN where it did
not (:class:`conserve.Newton` ``unconverged="keep"`` takes the rule at the last iterate instead).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import BACKENDS, Carry, StepBackend
from ..backends.sampled import Sampled
from ..compilation.modes import jit_quick
from ..discrete.newton import Newton
from ..discrete.scheme import StepRecord
from ..errors import ModelError, is_count
from ..model.assembled import Energy, Model, State
from ..model.parameters import bound
from ..model.system import Assembly, as_assembly

__all__ = ["energy", "initial_state", "step", "trajectory"]


def initial_state(system) -> State:
    """The validated initial :class:`~conserve.model.assembled.State` of a System or Assembly
    (positions on the constraints, velocities tangent to them; checked at assembly)."""
    return as_assembly(system, "initial_state").initial_state


def step(model, state: State, t, h, *, backend="director", newton: Newton = Newton(implicit=True),
         multipliers=None) -> tuple[State, StepRecord]:
    """One energy-momentum step t -> t + h: a pure jax function (jit, vmap, grad).

    Parameters
    ----------
    model : the assembled ``Model`` (``assembly.model``; an Assembly is accepted
        outside jit). A pytree: its arrays may be traced, so derivatives with respect to masses,
        inertias and stiffnesses work too.
    state : :class:`~conserve.model.assembled.State` at t (e.g. :func:`initial_state`)
    t, h : float, s (scalars, may be traced; h ≠ 0, a negative h steps back in time — the midpoint
        rule is symmetric; a concrete zero or non-finite value is refused with a ModelError)
    backend : "director" or "reduced" (the same discrete trajectory, see
        :mod:`conserve.backends`) or a :class:`~conserve.backends.base.StepBackend` object (its own
        Newton options then apply; ``newton`` is ignored)
    newton : :class:`conserve.Newton` options (default: ``implicit=True``, so ``jax.grad`` works)
    multipliers : (n_c,) the last step's ``record.multipliers``, Newton's initial guess for the
        scaled multipliers λ̃ = (h²/2) λ (default zeros); any guess gives the same converged step

    Returns
    -------
    state : State at t + h (when ``record.converged`` is False: the last Newton iterate)
    record : :class:`~conserve.discrete.scheme.StepRecord`: Newton iterations, convergence,
        residual history, work and dissipation in J, the step's multipliers (rows the reduced
        backend eliminates are 0; :meth:`~conserve.backends.base.StepBackend.recover_multipliers`)
    """
    model, backend = _model(model, "step"), _stepper(backend, newton, "step")
    if any(c.rate is not None for c in model.controllers):
        raise ModelError(f"step: the model has sampled controllers ({', '.join(c.name for c in model.controllers)}), "
                         "whose samples and held commands a single step does not carry; run them with "
                         "cs.trajectory or cs.simulate (or set the held commands yourself: model.parameters "
                         "'<controller>.u[i]').")
    _check_state(model, state, "step")
    _check_times(t, h, "step")
    lam = jnp.zeros(model.n_constraints, state.q.dtype) if multipliers is None else multipliers
    return _step(model, state, lam, t, h, backend)


@jit_quick(static_argnames="backend")
def _step(model, state, lam, t, h, backend):
    """:func:`step`, compiled as a whole also when called outside jit (``jax.grad`` of it, say)."""
    dtype = state.q.dtype
    with bound(model.parameters):  # the laws' Parameters read the model's (possibly traced) values
        carry, record = backend.step(model, Carry(state, jnp.asarray(lam, dtype)), jnp.asarray(t, dtype),
                                     jnp.asarray(h, dtype))
    return carry.state, record


def trajectory(model, state: State, t0, h, n_steps: int, *, backend="director",
               newton: Newton = Newton(implicit=True)) -> tuple[State, StepRecord]:
    """``n_steps`` steps of :func:`step` from ``state`` at t0: a pure jax function (jit, vmap,
    grad) of the model's arrays, the state, t0 and h — ``jax.lax.scan`` over the step, each
    step's multipliers the next one's Newton guess.

    Derivatives (``jax.grad``, ``jax.jacrev``, ``jax.jvp``) are those of the discrete flow, by the
    implicit-function theorem at every step's converged root (one linear solve with the step's
    Newton matrix per step and derivative direction); reverse mode recomputes each step in the
    backward pass (``jax.checkpoint``), so its memory is O(n_steps × state), not O(n_steps ×
    Newton matrix). Exact only where every step converged (``records.converged``).

    A model's controllers (:class:`conserve.Controller`) are sampled at the start of each step at
    or after their sample instants, and the steps are not cut there: give h dividing their sample
    periods (``simulate`` cuts its steps at the instants).

    Parameters
    ----------
    model, state, backend, newton : as in :func:`step`
    t0, h : float, s (may be traced; h ≠ 0, as in :func:`step`)
    n_steps : int ≥ 1 (static: one compilation per length)

    Returns
    -------
    states : State whose arrays have a leading axis of n_steps + 1 nodes (the first is ``state``)
    records : :class:`~conserve.discrete.scheme.StepRecord` with a leading axis of n_steps
    """
    model, backend = _model(model, "trajectory"), _stepper(backend, newton, "trajectory")
    if not (is_count(n_steps) and n_steps >= 1):
        raise ModelError(f"trajectory: n_steps must be an integer ≥ 1, got {n_steps!r}.")
    n_steps = int(n_steps)
    _check_state(model, state, "trajectory")
    _check_times(t0, h, "trajectory")
    return _trajectory(model, state, t0, h, n_steps, backend)


@jit_quick(static_argnames=("n_steps", "backend"))
def _trajectory(model, state, t0, h, n_steps, backend):
    """:func:`trajectory`, compiled as a whole also when called outside jit."""
    dtype = state.q.dtype
    t0, h = jnp.asarray(t0, dtype), jnp.asarray(h, dtype)
    carry = Carry(state, jnp.zeros(model.n_constraints, dtype))
    if model.controllers:  # sampled at the step starts at or after their instants, no cuts
        backend = Sampled(backend, cuts=False)
        carry = carry._replace(control=backend.init(model, state).control)

    @jax.checkpoint
    def advance(carry, k):
        with bound(model.parameters):
            new, record = backend.step(model, carry, t0 + k * h, h)
        return new, (new.state, record)

    _, (states, records) = jax.lax.scan(advance, carry, jnp.arange(n_steps, dtype=dtype))
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), state, states), records


def _model(model, who) -> Model:
    if isinstance(model, Assembly):
        model = model.model
    if not isinstance(model, Model):
        raise ModelError(f"{who}: expected a Model (assembly.model), got {type(model).__name__}.")
    return model


def _check_state(model: Model, state, who):
    """Refuse a state whose arrays do not have the model's shapes (another model's state, a
    batched state outside vmap), naming the field and the shapes."""
    if not isinstance(state, State):
        raise ModelError(f"{who}: state must be a State (cs.initial_state(assembly), or a Solution's node), got "
                         f"{type(state).__name__}.")
    n_q, n_r = model.n_coordinates, model.n_rotors
    n_s = sum(sl.stop - sl.start for *_, sl in model.coordinate_groups())
    expected = {"q": (n_q,), "v": (n_q,), "s": (n_s,), "p": (n_r,), "theta": (n_r,)}
    wrong = {k: np.shape(getattr(state, k)) for k in expected if np.shape(getattr(state, k)) != expected[k]}
    if wrong:
        raise ModelError(f"{who}: the state does not fit the model: " + ", ".join(
            f"{k} has shape {shape}, the model's {expected[k]}" for k, shape in wrong.items())
            + " (a state of another model, or a batch of states: vmap the step over them).")


def _check_times(t, h, who):
    """Refuse a concrete time or step size that is not a finite number, and a zero step (its
    velocities 2Δq/h are undefined: Newton would only report no convergence); traced values
    (inside jit, vmap, grad) are the caller's to check. A negative h is a step backwards in time
    (the midpoint rule is symmetric)."""
    for name, value in (("t" if who == "step" else "t0", t), ("h", h)):
        if isinstance(value, jax.core.Tracer):
            continue
        try:
            number = None if isinstance(value, (str, bytes)) else np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            number = None
        if number is None or number.shape != () or not np.isfinite(number):
            raise ModelError(f"{who}: {name} must be one finite number (s), got {value!r}.")
        if name == "h" and number == 0.0:
            raise ModelError(f"{who}: h = 0 is no step (its velocities 2Δq/h are undefined); give a step size "
                             "h ≠ 0 in s (negative steps back in time).")


def _stepper(backend, newton, who) -> StepBackend:
    """The StepBackend of a name (built with ``newton``) or the object itself."""
    if isinstance(backend, str):
        cls = BACKENDS.get(backend)
        if cls is None or not issubclass(cls, StepBackend):
            steppers = sorted(k for k, c in BACKENDS.items() if issubclass(c, StepBackend))
            raise ModelError(f"{who}: backend must be one of {steppers} or a StepBackend, got {backend!r}.")
        return cls(newton)
    if not isinstance(backend, StepBackend):
        raise ModelError(f"{who}: backend must be a name or a StepBackend object, got {backend!r}.")
    return backend


def energy(model, state: State) -> Energy:
    """Kinetic, potential and total energy of one state, in J (pure; :class:`Energy` of scalars)."""
    return _energy(model.model if isinstance(model, Assembly) else model, state)


@jit_quick
def _energy(model, state: State) -> Energy:
    kinetic = model.kinetic_energy(state.v, state.p)
    with bound(model.parameters):
        potential = model.potential_energy(state.q, state.s)
    return Energy(kinetic, potential, kinetic + potential)
