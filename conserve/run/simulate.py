"""``simulate(system, t_end, dt, backend=...) -> Solution``: the one entry point over the backends,
and ``resume`` of a checkpointed run.

This module checks the arguments and dispatches: a fixed step to the compiled time loop
(:mod:`conserve.run.grid` for the time grid, :mod:`conserve.run.options` for the backend and the
code generation, :mod:`conserve.run.chunks` for the loop, :mod:`conserve.run.pieces` for the
Solution it assembles), adaptive steps to :mod:`conserve.run.adaptive`, and the reference
integrator ("ode") to its own run. A failed step stops the run, and everything computed before
it is returned inside the raised error.
"""

from __future__ import annotations

import math

import numpy as np

from ..backends import BACKENDS, ReferenceBackend
from ..backends.sampled import with_controllers
from ..compilation.modes import resolved_mode
from ..discrete.newton import Newton
from ..errors import ModelError, SimulationError, is_count
from ..model.system import as_assembly, check_drives_at
from ..results.solution import Solution, diagnostics, layout_record
from . import checkpoint as checkpoints
from .adaptive import Adaptive, save_times, simulate_adaptive
from .checkpoint import carry_arrays, restored_carry
from .chunks import CHUNK, kernel_when_optimized, run_chunks
from .failures import keep_partial, refuse_non_finite_energy
from .grid import seconds, time_grid
from .options import backend_settings, check_mode, check_progress, resolve_backend, run_work, warn_coarse_steps
from .pieces import first_piece


def simulate(system, t_end, dt, *, backend="director", newton=None, order=2, t0=0.0, chunk=CHUNK, progress=None,
             ode=None, on_failure="raise", max_subdivisions=6, checkpoint=None, checkpoint_every=None,
             overwrite=False, compile="auto", rtol=None, atol=None, saveat=None) -> Solution:
    """Integrate ``system`` from t0 to t_end with the constant step dt, or with adaptive steps.

    Parameters
    ----------
    system : System or Assembly (assemble once with ``system.assemble()`` to reuse it)
    t_end : float, s — with a fixed dt rounded up to a whole number of steps: the last node is
        t0 + N dt
    dt : float, s; or "adaptive" (steps chosen for the tolerances ``rtol`` and ``atol`` of the local
        error of the configuration, default 1e-6 and 1e-9; every accepted node conserves exactly,
        :mod:`conserve.run.adaptive`), or a :class:`conserve.Adaptive` with all the options (dt0,
        dt_min, dt_max, the error estimate)
    rtol, atol : the tolerances of dt="adaptive"
    saveat : with adaptive steps, the times (s, in [t0, t_end]) at which to keep nodes; each is
        reached exactly, and t0 and t_end are always kept (default: keep every accepted node).
        Times closer than 1e-9 of the span (:func:`conserve.run.adaptive.save_times`) are one node, with
        a warning if they differ: a step between them would be round-off
    backend : "director" (energy-momentum midpoint DAE in director coordinates; Gonzalez 1996,
        Betsch and Steinmann 2001) or
        "reduced" (the same discrete equations in the kinematic tree's minimal coordinates,
        Thompson's null-space form with Führer–Wallrapp loop coordinates; Thompson §III,
        Betsch and Leyendecker 2006) or
        "ode" (Thompson's reduced ODE by scipy's solve_ivp, not conserving: a reference, nodes
        every dt; loops, ropes and other non-tree constraints by multipliers at the acceleration
        level, :mod:`conserve.backends.ode`), or a backend object: any
        :class:`~conserve.backends.base.StepBackend` (the built-in ones with their options, e.g.
        ``Director(Newton(tol=1e-13))``, or one of your own: ``docs/guide/extending.rst``)
    ode : options of the "ode" backend: {"method": any solve_ivp method (default "DOP853"),
        "rtol": 1e-10, "atol": 1e-12}
    newton : :class:`conserve.Newton` options (tolerance, iteration limit)
    order : 2 (default: the energy-momentum step), 4 or 6: each step of dt is a symmetric
        composition of 10 (order 4) or 18 (order 6) energy-momentum steps, some backwards in time
        (:mod:`conserve.backends.compose`); energy, momentum and constraints stay exact at every
        node, the error falls as dt⁴ or dt⁶
    on_failure : "raise" (default: a step whose Newton iteration fails stops the run with a
        :class:`ConvergenceError`) or "subdivide" (retry it as 2, 4, … conserving sub-steps, down
        to dt / 2^max_subdivisions, :mod:`conserve.backends.subdivide`; ``sol.substeps`` records
        them; a step that fails even then raises)
    max_subdivisions : int ≥ 1, halvings tried by "subdivide"
    chunk : steps per compiled scan chunk (≥ 1)
    progress : optional callable ``progress(steps_done, n_steps)``, called after every chunk (with
        adaptive steps ``progress(seconds_done, span)``, simulated time in s); a text bar:
        :class:`conserve.run.progress.ProgressBar`
    checkpoint : optional directory: every ``checkpoint_every`` steps the run so far is saved
        there atomically (:mod:`conserve.run.checkpoint`); :func:`resume` continues it bit-for-bit.
        The directory is locked while the run writes; a directory that already holds a run is
        refused unless ``overwrite=True``
    checkpoint_every : steps between checkpoints (default ``chunk``; it sets the chunk length)
    overwrite : replace a run already checkpointed in ``checkpoint`` (default: refuse)
    compile : XLA's code generation for the run (:mod:`conserve.compilation`): "auto" (default:
        "unoptimized" for a run of at most ``conserve.compilation.modes.AUTO_WORK`` = 10⁵ unknown-steps
        — steps × composed stages × the director backend's unknowns —, "optimized" from
        ``OPTIMIZED_WORK`` = 10⁷ where its Newton loop then becomes one kernel, else "quick"),
        "unoptimized" (35–50 % less compilation than quick, steps 2–4× slower), "quick", or
        "optimized" (small Newton matrices: the loop one kernel, 0.5–5 s more compilation, steps up
        to 2.6× faster; else XLA's defaults, 1.5–2× quick's compilation, steps −12 to +8 %); the
        steps agree to round-off. ``sol.stats["compile"]`` names the one used

    Returns
    -------
    Solution with N + 1 nodes.

    Raises
    ------
    ConvergenceError
        A step did not converge (or gave NaN: the laws not finite there are named).
        ``err.partial_solution`` holds every step up to the last converged one; ``err.step``,
        ``err.time``, ``err.residual_history`` say where.
    KeyboardInterrupt
        Ctrl-C stopped the run between chunks (an error of the ``progress`` callback alike): the
        exception, re-raised, carries the finished chunks' steps in ``err.partial_solution``.
    """
    assembly = as_assembly(system, "simulate")
    check_progress(progress)
    controller = adaptive_controller(dt, rtol, atol)
    if controller is not None:
        return _simulate_adaptive(assembly, t0, t_end, controller, saveat, backend, newton, order, chunk, progress,
                                  ode, on_failure, checkpoint, compile)
    if saveat is not None:
        raise ModelError("simulate: saveat is for adaptive steps (dt='adaptive'); with a fixed dt every node is kept.")
    t0, t_end, dt, n_steps = time_grid(t0, t_end, dt, chunk)
    chunk = int(chunk)
    if checkpoint_every is not None:
        if checkpoint is None:
            raise ModelError("simulate: checkpoint_every needs checkpoint=<directory>.")
        if not (is_count(checkpoint_every) and checkpoint_every >= 1):
            raise ModelError(f"simulate: checkpoint_every must be an integer ≥ 1 (steps), got {checkpoint_every!r}.")
        chunk = int(checkpoint_every)
    backend = resolve_backend(backend, newton, ode, on_failure, max_subdivisions, order)
    if isinstance(backend, ReferenceBackend):  # a reference integrator of the whole run, not a scheme
        if assembly.model.controllers:
            raise ModelError(f"simulate: backend '{backend.name}' (a reference integrator) does not run controllers; "
                             "use the director or reduced backend (its steps are cut at the sample instants).")
        if checkpoint is not None:
            raise ModelError(f"simulate: backend '{backend.name}' (a reference integrator) does not checkpoint.")
        return simulate_reference(backend, assembly, t0, t_end, dt, progress, chunk)
    warn_coarse_steps(assembly, dt)
    check_drives_at(assembly, t0)
    work, mode = run_work(backend, assembly.model, n_steps), check_mode(compile)
    given = backend_settings(backend, checkpoint is not None)  # the options as given, before prepare
    backend = backend.prepare(assembly.model, assembly.initial_state)  # e.g. the Newton matrix's structure
    backend = with_controllers(backend, assembly.model)  # sampled controllers (conserve.backends.sampled)
    settings = {"t0": t0, "t_end": t_end, "dt": dt, "n_steps": n_steps, "chunk": chunk, "unknown_steps": work,
                "compile": resolved_mode(mode, work, kernel_when_optimized(backend, assembly.model)), **given}
    carry = backend.init(assembly.model, assembly.initial_state)
    first = first_piece(assembly.model, carry.state, t0, settings["compile"], carry.control)
    refuse_non_finite_energy(assembly, first, t0)
    ckpt = None
    if checkpoint is not None:
        ckpt = checkpoints.start(checkpoint, assembly, settings, overwrite)
    try:
        if ckpt is not None:
            checkpoints.write(ckpt, 0, carry_arrays(carry), first)
        return run_chunks(assembly, settings, backend, carry, 0, [first], ckpt, progress)
    finally:
        checkpoints.close(ckpt)


def adaptive_controller(dt, rtol=None, atol=None):
    """The :class:`~conserve.run.adaptive.Adaptive` options of ``dt`` ("adaptive" with ``rtol`` and
    ``atol``, or an Adaptive object), or None for a fixed dt (then rtol and atol must be None)."""
    if isinstance(dt, Adaptive):
        if rtol is not None or atol is not None:
            raise ModelError("simulate: give rtol and atol in the Adaptive object, not beside it.")
        return dt
    if isinstance(dt, str):
        if dt != "adaptive":
            raise ModelError(f"simulate: dt must be a number (s), 'adaptive' or a cs.Adaptive, got {dt!r}.")
        return Adaptive(**{k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
    if rtol is not None or atol is not None:
        raise ModelError("simulate: rtol and atol are the tolerances of adaptive steps (dt='adaptive'); a fixed dt "
                         "has none.")
    return None


def _simulate_adaptive(assembly, t0, t_end, controller, saveat, backend, newton, order, chunk, progress, ode,
                       on_failure, checkpoint, compile):
    """:func:`simulate` with adaptive steps (:mod:`conserve.run.adaptive`)."""
    t0, t_end = seconds("t0", t0), seconds("t_end", t_end)
    if not (math.isfinite(t0) and math.isfinite(t_end) and t_end > t0):
        raise ModelError(f"simulate: t_end must be finite and > t0 = {t0}, got {t_end}.")
    if not (is_count(chunk) and chunk >= 1):
        raise ModelError(f"simulate: chunk must be an integer ≥ 1, got {chunk!r}.")
    chunk = int(chunk)
    if checkpoint is not None:
        raise ModelError("simulate: checkpoints are written for a fixed dt; adaptive runs do not checkpoint.")
    if on_failure != "raise":
        raise ModelError("simulate: adaptive steps retry a failed step smaller themselves; on_failure applies to a "
                         "fixed dt.")
    saves = save_times(saveat, t0, t_end)  # those closer than round-off merged, with a warning
    backend = resolve_backend(backend, newton, ode, "raise", 6, order)
    if isinstance(backend, ReferenceBackend):
        raise ModelError(f"simulate: backend '{backend.name}' (a reference integrator) has its own step control; "
                         "dt='adaptive' adapts the energy-momentum step.")
    check_drives_at(assembly, t0)
    settings = {"t0": t0, "t_end": t_end, "dt": "adaptive", "chunk": chunk,
                "compile": resolved_mode(check_mode(compile)),  # "auto": quick (the length is not known)
                "saveat": saveat is not None, **backend_settings(backend, False)}
    backend = with_controllers(backend.prepare(assembly.model, assembly.initial_state), assembly.model)
    carry = backend.init(assembly.model, assembly.initial_state)
    first = first_piece(assembly.model, carry.state, t0, control=carry.control)
    refuse_non_finite_energy(assembly, first, t0)
    solution, error = simulate_adaptive(assembly, settings, backend, carry, controller, saves, first,
                                        settings["compile"], progress)
    if error is not None:
        raise error
    return solution


def resume(path, system=None, *, progress=None, trust_laws=False) -> Solution:
    """Continue the run checkpointed in the directory ``path`` to its end (bit-for-bit the
    trajectory of an uninterrupted run with the same settings) and go on checkpointing there.

    system : the System or Assembly the run was started with. A checkpoint stores no code, so
        the system is given again; it is checked against the stored fingerprint (structure,
        parameters, initial state and the code and constants of its laws, :mod:`conserve.run.fingerprint`)
    trust_laws : skip the check of the laws (for laws whose code moved but computes the same, or
        that hold objects whose state cannot be fingerprinted)

    Every stored piece is verified (checksum, run id, node range; :mod:`conserve.run.checkpoint`)
    before a step is taken; the directory is locked while the run goes on."""
    check_progress(progress, "resume")
    assembly, settings, n, stored, pieces, ckpt = checkpoints.read(path, system, trust_laws)
    settings.setdefault("compile", "optimized")  # checkpoints written before the option: XLA's defaults
    try:
        backend = settings["backend"]
        if backend == "director":
            backend = BACKENDS[backend](Newton(*settings["newton"]), linear=settings.get("linear", "auto"),
                                        reuse=settings.get("reuse", "auto"))
        backend = resolve_backend(backend, Newton(*settings["newton"]), None, settings["on_failure"],
                                  settings["max_subdivisions"], settings.get("order", 2))
        backend = with_controllers(backend.prepare(assembly.model, assembly.initial_state), assembly.model)
        carry = restored_carry(backend, assembly, stored)
        return run_chunks(assembly, settings, backend, carry, n, pieces, ckpt, progress)
    finally:
        checkpoints.close(ckpt)


def simulate_reference(backend: ReferenceBackend, assembly, t0, t_end, dt, progress=None, chunk=CHUNK):
    """The Solution of a reference integrator (the "ode" backend): nodes every dt, no multipliers
    (NaN), no Newton; ``progress`` after every ``chunk`` nodes. If it fails, a SimulationError
    carries the nodes it reached; stopped by ``progress`` (or Ctrl-C), its exception does."""
    nodes, dissipation, work, stats, failure = backend.integrate(assembly, t0, t_end, dt, progress, chunk)
    n = len(nodes.q) - 1
    solution = Solution(t=t0 + dt * np.arange(n + 1), q=nodes.q, v=nodes.v, s=nodes.s, p=nodes.p,
                        theta=nodes.theta, multipliers=np.full((n, len(assembly.layout.constraint_rows)), np.nan),
                        newton_iterations=np.zeros(n, np.int32), work=work, dissipation=dissipation,
                        substeps=np.ones(n, np.int32),
                        layout=layout_record(assembly.layout),
                        diagnostics=diagnostics(assembly.model, nodes, t0 + dt * np.arange(n + 1)),
                        stats={"backend": backend.name, "steps": n, "compile": None, **stats}, assembly=assembly)
    if isinstance(failure, BaseException):  # a stop request of progress, Ctrl-C
        keep_partial(failure, lambda: solution, n, t0 + n * dt)
        raise failure
    if failure:
        raise SimulationError(f"backend '{backend.name}' failed after t = {t0 + n * dt:.6g} s: {failure}. Kept the "
                              f"{n + 1} "
                              "nodes reached in err.partial_solution; try another method or tolerances "
                              "(simulate(..., ode={'method': 'Radau'})).",
                              partial_solution=solution, step=n, time=t0 + n * dt)
    return solution
