"""simulate(system, t_end, dt, backend=...) -> Solution: the one entry point over the backends.

The time loop is a ``jax.lax.while_loop`` over one jit-compiled step, run in chunks of at most
``chunk`` steps (the loop stops at the run's end or a failure, so any number of steps reuses one
compiled chunk). Between
chunks Python checks for failure and evaluates the diagnostics of the new nodes (vectorised,
:func:`conserve.solution.diagnostics`); a failed step stops the run and everything computed
before it is returned inside the raised error.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from collections import OrderedDict
from dataclasses import fields, replace

import jax
import jax.numpy as jnp
import numpy as np

from . import checkpoint as checkpoints
from .adaptive import Adaptive, save_times, simulate_adaptive
from .compilation import (KERNEL_SIZE, KERNEL_UNKNOWNS, MODES, compiler_options, loops_as_kernels, resolved_mode,
                          run_times)
from .backends import BACKENDS, Carry, Composition, ReferenceBackend, StepBackend, StepOutput, Subdividing
from .backends.base import Wrapper
from .backends.compose import check_order
from .backends.director import unknowns as director_unknowns
from .discrete.newton import MEMBERS, Newton, run_if
from .errors import CoarseStepWarning, ConstraintWarning, ModelError, SimulationError, is_count
from .failures import COARSE_TURN, convergence_error, keep_partial, part_spin_rates, refuse_non_finite_energy
from .model.assembled import Model, State
from .model.parameters import bound
from .model.system import POSITION_TOL, as_assembly, check_drives_at
from .solution import Solution, diagnostics, layout_record

#: Steps per compiled chunk (at most: its loop stops at the end of the run, so every run length
#: shares one compiled chunk).
CHUNK = 1024

#: The State fields a Solution keeps per node (q_low, the rounding carried by the compensated
#: update, lives only in the run's carry and its checkpoints).
NODE_FIELDS = ("q", "v", "s", "p", "theta")

#: Most steps in one run (the step counter is an int32).
MAX_STEPS = 2**31 - 2

#: Compiled chunk runners kept (least recently used dropped first): XLA's CPU code of one model
#: takes ~1000–3000 memory mappings, and a process may hold only ~65 000.
MAX_COMPILED = 16

_compiled: OrderedDict = OrderedDict()

#: An ensemble's members are stepped in groups whose Newton matrices take at most this many bytes
#: (:func:`members_per_group`)
GROUP_BYTES = 2**16


def members_per_group(n_unknowns: int, largest_inverse: int | None = None) -> int:
    """Members of an ensemble stepped together (vmapped; the groups one after another): the largest
    power of two whose Newton matrices fit in ``GROUP_BYTES``, at least 1 — n × m float64 each,
    m the order of the largest matrix the solver inverts (:func:`newton_sizes`; n for a dense
    matrix, a block's for a tree solver, whose blocks are ~3 n m). Measured, pinned, µs per
    member-step: 1,000 heavy tops (n = m = 21) in groups of 4–8 / 16 / 32 / 1,000: 17.5–17.9 /
    13.0 / 14.7 / 29.3; 16 8-link chains (n = 168, m = 21) in groups of 1 / 2 / 4 / 16: 443 / 409 /
    433 / 474, within the noise."""
    fit = max(1, GROUP_BYTES // (8 * max(n_unknowns, 1) * max(largest_inverse or n_unknowns, 1)))
    return 1 << (fit.bit_length() - 1)


def newton_sizes(backend: StepBackend, model) -> tuple[int, int]:
    """(n, m): a step backend's Newton unknowns n and the order m of the largest matrix its linear
    solver inverts (``linear.largest_inverse``: n for a dense matrix, a diagonal block's for a tree
    solver)."""
    linear, n = getattr(backend, "linear", None), backend.unknowns(model)
    return n, linear.largest_inverse(n) if hasattr(linear, "largest_inverse") else n


def _chunk_fn(backend: StepBackend, length, batch=None, group=None):
    """The compiled stretch of up to ``length`` steps: a ``lax.while_loop`` over ``backend.step``
    that stops at ``n_end`` or at a failure, its steps' outputs written into arrays of ``length``
    (the rest left zero), so every run length shares the code and a short run costs only its steps.
    ``batch``: None, or per leaf of the model 0 (one value per member) or None (shared), for a
    run vmapped over members (the carry, n0 and n_end with a leading member axis;
    :mod:`conserve.ensemble`): the step is vmapped, the loop runs while some member has steps
    left, and a member past its end or its failure skips its step (``run_if``: computed only while
    some member still steps). The loop itself stays outside the vmap: a while loop with a batched
    condition would select its whole carry, the outputs of the chunk, at every step. More members
    than ``group`` (:func:`members_per_group`) run in groups of ``group``, one group's chunk after
    another's."""
    @jax.jit  # traced once: its abstract evaluation below and its use in the loop share the trace
    def evaluate(model, carry, t, h):
        with bound(model.parameters):  # the laws' Parameters read the model's values
            return backend.step(model, carry, t, h)

    def start(model, carry, t0, h):  # one run's failure record before a failure: (history, iterations)
        shapes = jax.eval_shape(evaluate, model, carry, t0, h)[1]
        return jnp.full(shapes.history.shape, jnp.nan), jnp.int32(0)

    def one(model, state, n_end, t0, h):  # one run's next step; state: (carry, n, failed, failure)
        carry, n, failed, failure = state
        if batch is None:  # the loop runs only while this run has steps left
            active = jnp.bool_(True)
            new, record = evaluate(model, carry, t0 + n * h, h)
        else:  # a member past its end or its failure skips its step
            active = (n < n_end) & ~failed
            shapes = jax.eval_shape(evaluate, model, carry, t0, h)[1]
            record0 = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)._replace(converged=jnp.bool_(True))
            # (vmapped, the step is computed for every member while one steps: a skipping member's
            # with a NaN step size, whose Newton iteration stops at its first iterate and asks the
            # others for no Jacobians, instead of repeating a failed step to its iteration limit)
            skip_h = jnp.where(active, h, jnp.nan)
            new, record = run_if(active, lambda: evaluate(model, carry, t0 + n * skip_h, skip_h), (carry, record0))
        failed_now = active & ~record.converged
        keep = lambda old, upd: jnp.where(failed_now, old, upd)  # noqa: E731
        failure = jax.tree.map(lambda new, old: jnp.where(failed_now, new, old),
                               (record.history, record.iterations), failure)
        loop = (jax.tree.map(keep, carry, new), n + (active & record.converged), failed | failed_now, failure)
        return loop, StepOutput(new.state, record._replace(history=None))  # the history kept only for a failure

    def run(model: Model, carry: Carry, n0, n_end, t0, h):
        if batch is None or n0.shape[0] <= group:
            return run_members(model, carry, n0, n_end, t0, h)
        # an ensemble in groups of members, one after another (lax.map): a group's arrays stay in
        # the cache, and its loop stops when its own members are done
        m, (leaves, treedef) = n0.shape[0], jax.tree.flatten(model)
        groups = -(-m // group)
        padding = groups * group - m

        def grouped(a):  # (m, …) -> (groups, group, …), padded with copies of member 0
            a = jnp.concatenate([a, jnp.broadcast_to(a[:1], (padding, *a.shape[1:]))])
            return a.reshape(groups, group, *a.shape[1:])

        def run_group(args):
            own, carry, n0, n_end = args
            own = iter(own)  # the group's leaves with a member axis, the shared ones as they are
            model = jax.tree.unflatten(treedef, [leaf if b is None else next(own) for leaf, b in zip(leaves, batch)])
            return run_members(model, carry, n0, n_end, t0, h)

        own = [leaf for leaf, b in zip(leaves, batch) if b is not None]  # the leaves with a member axis
        n_end = jnp.concatenate([n_end, jnp.broadcast_to(n0[:1], (padding,))])  # the padding takes no steps
        result = jax.lax.map(run_group, (*jax.tree.map(grouped, (own, carry, n0)), n_end.reshape(groups, group)))
        return jax.tree.map(lambda a: a.reshape(groups * group, *a.shape[2:])[:m], result)

    def run_members(model: Model, carry: Carry, n0, n_end, t0, h):
        step, first = one, start
        if batch is not None:
            axes = model_axes(model, batch)
            step = jax.vmap(one, in_axes=(axes, 0, 0, None, None), axis_name=MEMBERS)
            first = jax.vmap(start, in_axes=(axes, 0, None, None), axis_name=MEMBERS)
        state = (carry, n0, jnp.zeros_like(n0, dtype=bool), first(model, carry, t0, h))
        shapes = jax.eval_shape(step, model, state, n_end, t0, h)[1]
        outputs = jax.tree.map(lambda a: jnp.zeros((length, *a.shape), a.dtype), shapes)

        def more(loop):
            (_, n, failed, _), k, _ = loop
            return (k < length) & jnp.any((n < n_end) & ~failed)

        def body(loop):
            state, k, outputs = loop
            state, output = step(model, state, n_end, t0, h)
            return state, k + 1, jax.tree.map(lambda a, x: jax.lax.dynamic_update_index_in_dim(a, x, k, 0), outputs,
                                              output)

        state, _, outputs = jax.lax.while_loop(more, body, (state, jnp.int32(0), outputs))
        return state, outputs if batch is None else jax.tree.map(lambda a: jnp.moveaxis(a, 0, 1), outputs)

    return jax.jit(run)


def model_axes(model, batch):
    """The model's in_axes for vmap: ``batch`` (one 0 or None per leaf) in the model's structure."""
    return jax.tree.unflatten(jax.tree.structure(model), batch)


def kernel_code(backend: StepBackend, model, mode, batch=None) -> tuple[StepBackend, str]:
    """(backend, XLA options' mode) a run's chunk is compiled with: its Newton loop one kernel
    (:meth:`~conserve.backends.base.StepBackend.as_kernels`, "Loops as kernels" in
    :mod:`conserve.compilation`) for a run whose dense Newton matrix, or whose tree solver's every
    block, has at most :data:`~conserve.compilation.KERNEL_SIZE` unknowns, compiled "optimized",
    or, one run (not an ensemble's), "quick" with the director backend and at most
    :data:`~conserve.compilation.KERNEL_UNKNOWNS` unknowns (where the one kernel compiles in
    0.1–1 s more; a reduced step's, a larger program, in 1–1.5 s more, which long runs,
    "optimized", repay; an ensemble's vmapped step in ~7 s more than with LAPACK in quick code —
    1,000 heavy tops, pinned: 7.1 → 14.7 s, 12.7 s optimized with LAPACK — for 1.3–1.8× fewer µs
    per member-step) — both with "quick"'s options, whose classic emitters alone make the loop one
    kernel; otherwise ``(backend, mode)``."""
    quick = (mode == "quick" and batch is None and backend.name == "director"
             and director_unknowns(model) <= KERNEL_UNKNOWNS)
    if (mode == "optimized" or quick) and newton_sizes(backend, model)[1] <= KERNEL_SIZE:  # a tree's block
        kernels = backend.as_kernels()  # itself when its Newton matrix is not a dense one
        if kernels is not backend and loops_as_kernels():
            return kernels, "quick"
    return backend, mode


def compile_chunks(backend, length, args, batch=None, mode="quick"):
    """AOT-compile the chunk runner for these argument shapes once, XLA's code generation by
    ``mode`` ("unoptimized", "quick" or "optimized", :mod:`conserve.compilation`; small Newton loops
    as kernels, :func:`kernel_code`); returns (fn, seconds)."""
    backend, options = kernel_code(backend, args[0], mode, batch)
    group = None if batch is None else members_per_group(*newton_sizes(backend, args[0]))
    leaves, treedef = jax.tree.flatten(args)
    # the leaves' avals (jnp.result_type would cost ~10 µs per leaf and call)
    key = (backend, length, treedef, tuple((np.shape(x), np.dtype(x.dtype) if hasattr(x, "dtype") else
                                            jnp.result_type(x), getattr(x, "weak_type", False)) for x in leaves),
           batch, group, mode)
    if key in _compiled:
        _compiled.move_to_end(key)
        return _compiled[key], 0.0
    tic = time.perf_counter()
    fn = _chunk_fn(backend, length, batch, group).lower(*args).compile(compiler_options(options))
    _compiled[key] = fn
    while len(_compiled) > MAX_COMPILED:
        _compiled.popitem(last=False)
    return fn, time.perf_counter() - tic


def compiled_count():
    """Number of compiled chunk runners held (one per model structure and step options, at most
    MAX_COMPILED)."""
    return len(_compiled)


def clear_compiled():
    """Drop every compiled runner (and jax's caches): frees their memory and code mappings."""
    _compiled.clear()
    jax.clear_caches()


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
        :mod:`conserve.adaptive`), or a :class:`conserve.Adaptive` with all the options (dt0,
        dt_min, dt_max, the error estimate)
    rtol, atol : the tolerances of dt="adaptive"
    saveat : with adaptive steps, the times (s, in [t0, t_end]) at which to keep nodes; each is
        reached exactly, and t0 and t_end are always kept (default: keep every accepted node).
        Times closer than 1e-9 of the span (:func:`conserve.adaptive.save_times`) are one node, with
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
        :class:`conserve.progress.ProgressBar`
    checkpoint : optional directory: every ``checkpoint_every`` steps the run so far is saved
        there atomically (:mod:`conserve.checkpoint`); :func:`resume` continues it bit-for-bit.
        The directory is locked while the run writes; a directory that already holds a run is
        refused unless ``overwrite=True``
    checkpoint_every : steps between checkpoints (default ``chunk``; it sets the chunk length)
    overwrite : replace a run already checkpointed in ``checkpoint`` (default: refuse)
    compile : XLA's code generation for the run (:mod:`conserve.compilation`): "auto" (default:
        "unoptimized" for a run of at most ``conserve.compilation.AUTO_WORK`` = 10⁵ unknown-steps
        — steps × composed stages × the director backend's unknowns —, else "quick"),
        "unoptimized" (35–50 % less compilation than quick, steps 2–4× slower), "quick", or
        "optimized" (1.5–2× quick's compilation, steps 0–25 % faster: runs of more than ~10⁵
        steps); the steps agree to round-off. ``sol.stats["compile"]`` names the one used

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
        if checkpoint is not None:
            raise ModelError(f"simulate: backend '{backend.name}' (a reference integrator) does not checkpoint.")
        return _simulate_reference(backend, assembly, t0, t_end, dt, progress, chunk)
    warn_coarse_steps(assembly, dt)
    check_drives_at(assembly, t0)
    work = run_work(backend, assembly.model, n_steps)
    settings = {"t0": t0, "t_end": t_end, "dt": dt, "n_steps": n_steps, "chunk": chunk, "unknown_steps": work,
                "compile": resolved_mode(check_mode(compile), work),
                **backend_settings(backend, checkpoint is not None)}
    backend = backend.prepare(assembly.model, assembly.initial_state)  # e.g. the Newton matrix's structure
    carry = backend.init(assembly.model, assembly.initial_state)
    first = first_piece(assembly.model, carry.state, t0, settings["compile"])
    refuse_non_finite_energy(assembly, first, t0)
    ckpt = None
    if checkpoint is not None:
        ckpt = checkpoints.start(checkpoint, assembly, settings, overwrite)
    try:
        if ckpt is not None:
            checkpoints.write(ckpt, 0, _carry(carry), first)
        return _run(assembly, settings, backend, carry, 0, [first], ckpt, progress)
    finally:
        checkpoints.close(ckpt)


def adaptive_controller(dt, rtol=None, atol=None):
    """The :class:`~conserve.adaptive.Adaptive` options of ``dt`` ("adaptive" with ``rtol`` and
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
    """:func:`simulate` with adaptive steps (:mod:`conserve.adaptive`)."""
    t0, t_end = _number("t0", t0), _number("t_end", t_end)
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
    backend = backend.prepare(assembly.model, assembly.initial_state)
    carry = backend.init(assembly.model, assembly.initial_state)
    first = first_piece(assembly.model, carry.state, t0)
    refuse_non_finite_energy(assembly, first, t0)
    solution, error = simulate_adaptive(assembly, settings, backend, carry, controller, saves, first,
                                        settings["compile"], progress)
    if error is not None:
        raise error
    return solution


def check_mode(mode, who="simulate"):
    """``mode`` if it is a code generation of :data:`conserve.compilation.MODES`, else a ModelError."""
    if mode not in MODES:
        raise ModelError(f"{who}: compile must be one of {list(MODES)}, got {mode!r}.")
    return mode


def run_work(backend: StepBackend, model: Model, steps: int) -> int:
    """A run's unknown-steps, which ``compile="auto"`` compiles by (:func:`conserve.compilation.resolved_mode`):
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


def time_grid(t0, t_end, dt, chunk, who="simulate"):
    """(t0, t_end, dt, number of steps) as checked floats and int: dt > 0, t_end > t0, a whole
    number of steps (t_end rounded up to one, up to round-off), at most ``MAX_STEPS``, dt above the
    times' round-off (64 units in the last place of the larger of |t0|, |t_end|: the nodes' times
    must differ); ``chunk`` an integer ≥ 1. A ModelError says which is wrong."""
    dt, t0, t_end = _number("dt", dt, who), _number("t0", t0, who), _number("t_end", t_end, who)
    if not (dt > 0 and math.isfinite(dt)):
        raise ModelError(f"{who}: dt must be positive and finite, got {dt}.")
    if not (t_end > t0 and math.isfinite(t_end)):
        raise ModelError(f"{who}: t_end must be finite and > t0 = {t0}, got {t_end}.")
    if not (is_count(chunk) and chunk >= 1):
        raise ModelError(f"{who}: chunk must be an integer ≥ 1, got {chunk!r}.")
    ratio = (t_end - t0) / dt
    if ratio < 1.0 - 1e-9:
        warnings.warn(f"{who}: dt = {dt:g} s is longer than the span t_end − t0 = {t_end - t0:g} s: the run is one "
                      f"step, to t = {t0 + dt:g} s (the arguments are (system, t_end, dt): were t_end and dt "
                      "swapped?).", UserWarning, stacklevel=3)
    if not ratio <= MAX_STEPS:
        raise ModelError(f"{who}: (t_end − t0)/dt = {ratio:.3g} steps; a run takes at most {MAX_STEPS} steps (its "
                         "step counter is a 32-bit integer): use a larger dt or a shorter span, or continue in parts "
                         "(simulate(..., t0=...) from the last state).")
    ulp = np.spacing(max(abs(t0), abs(t_end)))  # the times' round-off
    if dt <= 64 * ulp:
        raise ModelError(f"{who}: dt = {dt:.3g} s is round-off of the times (floats near t = "
                         f"{max(abs(t0), abs(t_end)):.6g} s are {ulp:.3g} s apart), so the nodes t0 + n dt could not be "
                         "told apart; measure time from a nearer origin (t0 = 0) or take a larger dt.")
    return t0, t_end, dt, max(1, math.ceil(ratio * (1.0 - 1e-12) - 1e-9))  # whole steps up to round-off


def resolve_backend(backend="director", newton=None, ode=None, on_failure="raise", max_subdivisions=6, order=2):
    """The backend object of :func:`simulate`'s options: a name of :data:`conserve.backends.BACKENDS`
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


def resume(path, system=None, *, progress=None, trust_laws=False) -> Solution:
    """Continue the run checkpointed in the directory ``path`` to its end (bit-for-bit the
    trajectory of an uninterrupted run with the same settings) and go on checkpointing there.

    system : the System or Assembly the run was started with. A checkpoint stores no code, so
        the system is given again; it is checked against the stored fingerprint (structure,
        parameters, initial state and the code and constants of its laws, :mod:`conserve.fingerprint`)
    trust_laws : skip the check of the laws (for laws whose code moved but computes the same, or
        that hold objects whose state cannot be fingerprinted)

    Every stored piece is verified (checksum, run id, node range; :mod:`conserve.checkpoint`)
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
        backend = backend.prepare(assembly.model, assembly.initial_state)  # the structure of the first run
        return _run(assembly, settings, backend, _restored(backend, assembly, stored), n, pieces, ckpt, progress)
    finally:
        checkpoints.close(ckpt)


def warn_coarse_steps(assembly, dt):
    """Warn when full-body parts turn more than :data:`COARSE_TURN` rad per step at the start:
    the midpoint rule turns a free spin ω by 2 atan(|ω|Δt/2) instead of |ω|Δt per step (a 20 %
    lag at |ω|Δt = 1.5), so precession and nutation are far from converged (though conserving)."""
    message = coarse_step_message(assembly.layout, assembly.initial_state.q, assembly.initial_state.v, dt)
    if message:
        warnings.warn(message, CoarseStepWarning, stacklevel=3)


def coarse_step_message(layout, q, v, dt):
    """What :func:`warn_coarse_steps` says of the full-body parts at q, v (n_q,) that turn more than
    :data:`COARSE_TURN` rad per step dt, or None when none does."""
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


def _number(name, x, who="simulate"):
    """x as a float64 number of seconds; a float32 (or float16) input is read as the decimal it
    prints as (np.float32(0.3) is 0.3, not 0.30000001192…, which would add a step)."""
    try:
        a = np.asarray(x)
        if a.shape != () or a.dtype.kind not in "iuf":
            raise TypeError
        if a.dtype.kind == "f" and a.dtype.itemsize < 8:
            return float(np.format_float_positional(a[()], unique=True, trim="0"))
        return float(a)
    except (TypeError, ValueError):
        raise ModelError(f"{who}: {name} must be a number (s), got {x!r}.") from None


def _carry(carry: Carry):
    """The carry as plain arrays for a checkpoint (the multipliers under "lam", the leaves of the
    Newton memory under "memory0", "memory1", …, those of the trend under "trend0", …)."""
    extra = {f"{name}{i}": np.asarray(a) for name in ("memory", "trend")
             for i, a in enumerate(jax.tree.leaves(getattr(carry, name)))}
    return {**{k: np.asarray(a) for k, a in carry.state._asdict().items()}, "lam": np.asarray(carry.multipliers),
            **extra}


def _restored(backend: StepBackend, assembly, stored) -> Carry:
    """The carry of a checkpoint: state and multipliers, and the Newton memory and the trend in
    the structure the backend's init gives (as init makes them if the checkpoint holds none)."""
    state = State(*(jnp.asarray(stored[k]) for k in State._fields))
    template = backend.init(assembly.model, state)

    def restored(name):
        leaves, treedef = jax.tree.flatten(getattr(template, name))
        if all(f"{name}{i}" in stored for i in range(len(leaves))):
            leaves = [jnp.asarray(stored[f"{name}{i}"], a.dtype) for i, a in enumerate(leaves)]
        return jax.tree.unflatten(treedef, leaves)

    return Carry(state, jnp.asarray(stored["lam"]), restored("memory"), restored("trend"))


def _run(assembly, settings, backend: StepBackend, carry: Carry, n, pieces, ckpt, progress) -> Solution:
    """The time loop from step n (``carry`` at t_n) to the end; ``pieces`` hold what was computed
    before (dicts of node_*, step_*, diag_* arrays, the checkpoint layout). What the loop compiles
    on first use (the nodes' diagnostics) counts as compilation, not run time
    (:func:`~conserve.compilation.compiling`)."""
    model = assembly.model
    t0, dt, n_steps = settings["t0"], settings["dt"], settings["n_steps"]
    # numpy scalars, not jax ones: each jax scalar made in Python is a dispatch of its own (~50 µs)
    args = (model, carry, np.int32(0), np.int32(n_steps), np.float64(t0), np.float64(dt))
    run, compile_time = compile_chunks(backend, settings["chunk"], args, mode=settings["compile"])

    failed, failure = False, None
    with run_times(compile_time) as times:  # what the loop compiles on first use (diagnostics) is compilation
        try:
            while n < n_steps and not failed:
                (carry, n_new, failed, failure), out = run(model, carry, np.int32(n), *args[3:])
                out = jax.tree.map(np.asarray, out)
                taken = max(int(n_new) - n, 1)  # the new nodes' diagnostics (at least one: a block's shape)
                diag = diagnostics(model, jax.tree.map(lambda a: a[:taken], out.node),
                                   t0 + dt * np.arange(n + 1, n + 1 + taken), settings["compile"])
                pieces.append(piece(out, int(n_new) - n, diag))
                done, n, failed = int(n_new) - n, int(n_new), bool(failed)
                if ckpt is not None and done:
                    checkpoints.write(ckpt, n, _carry(carry), pieces[-1])
                if progress is not None:
                    progress(n, n_steps)
        except BaseException as err:  # a progress callback's error, Ctrl-C: the finished chunks' steps are kept
            keep_partial(err, lambda: assemble_solution(assembly, settings, backend, pieces, n, False, None,
                                                        *times())[0], n, t0 + n * dt)
            raise
        solution, error = assemble_solution(assembly, settings, backend, pieces, n, failed, failure, *times())
    if error is not None:
        raise error
    return solution


def check_progress(progress, who="simulate"):
    """A clear error for a ``progress`` that is neither None nor callable."""
    if progress is not None and not callable(progress):
        raise ModelError(f"{who}: progress must be a callable progress(done, total), called after every chunk, or "
                         f"None; got {progress!r} (a text bar: conserve.progress.ProgressBar('label')).")


def first_piece(model: Model, state: State, t0, mode="unoptimized"):
    """The node at t0 as a piece: its node_* and diag_* arrays (leading axis 1), the diagnostics
    evaluated as those of a run compiled ``mode`` (:func:`conserve.solution.diagnostics`)."""
    node = jax.tree.map(lambda a: np.asarray(a)[None], state)
    return {**{f"node_{k}": getattr(node, k) for k in NODE_FIELDS},
            **{f"diag_{k}": a for k, a in diagnostics(model, node, [t0], mode).items()}}


def piece(out: StepOutput, done, diag):
    """The first ``done`` steps of a chunk's output and of its nodes' diagnostics ``diag``
    (:func:`conserve.solution.diagnostics` of every node of the chunk) as a dict of node_*, diag_*
    and step_* arrays."""
    out = jax.tree.map(lambda a: np.asarray(a)[:done], out)
    record = out.record
    return {**{f"node_{k}": getattr(out.node, k) for k in NODE_FIELDS},
            **{f"diag_{k}": np.asarray(a)[:done] for k, a in diag.items()},
            "step_lam": record.multipliers, "step_iterations": record.iterations, "step_work": record.work,
            "step_dissipation": record.dissipation, "step_substeps": record.substeps}


def assemble_solution(assembly, settings, backend, pieces, n, failed, failure, compile_time, run_time, warn=True):
    """(Solution of the n steps in ``pieces``, the ConvergenceError of a failed run or None);
    ``warn``: the ConstraintWarning of rows left that were dropped as redundant (an ensemble
    gives one for all its members)."""
    model, layout = assembly.model, assembly.layout
    t0, dt = settings["t0"], settings["dt"]
    join = lambda key: np.concatenate([p[key] for p in pieces if key in p])  # noqa: E731
    q, v, s, p, theta = (join(f"node_{k}") for k in NODE_FIELDS)
    lams, iters, work, dissipation, substeps = (join(f"step_{k}") for k in
                                                ("lam", "iterations", "work", "dissipation", "substeps"))
    diag = {k[5:]: join(k) for k in pieces[0] if k.startswith("diag_")}
    if dt == "adaptive":  # the nodes' times and each step's size (conserve.adaptive)
        t = np.concatenate([[t0], *(p["node_t"] for p in pieces if "node_t" in p)])
        h = np.concatenate([np.zeros(0), *(p["step_h"] for p in pieces if "step_h" in p)])
    else:
        t, h = t0 + dt * np.arange(n + 1), dt
    stats = {"backend": backend.name, "steps": n, "compile": settings["compile"],
             "unknown_steps": settings.get("unknown_steps"), "compile_time": compile_time, "run_time": run_time,
             "time_per_step": run_time / max(n, 1), "newton_tol": settings["newton"][0],
             "unknowns": backend.unknowns(model), "subdivided_steps": int(np.sum(substeps > 1)),
             "newton_matrix": getattr(getattr(backend, "linear", None), "name", None)}  # "dense", "coloured", "tree"

    def multipliers():  # on first access (Solution.deferred)
        scaled = lams
        if n and not settings.get("saveat"):  # those a backend eliminated (the reduced backend's tree rows)
            scaled = backend.recover_multipliers(model, State(q, v, s, p, theta, np.zeros_like(q)), lams, t[:-1], h)
        full = np.zeros((n, len(layout.constraint_rows)))
        full[:, list(model.constraint_keep)] = scaled * (2.0 / np.reshape(h, (-1, 1))**2)
        return full

    solution = Solution.deferred(multipliers, t=t, q=q, v=v, s=s, p=p, theta=theta, newton_iterations=iters,
                                 work=work, dissipation=dissipation, substeps=substeps,
                                 layout=layout_record(layout), diagnostics=diag, stats=stats, assembly=assembly)
    if warn:
        warn_violated_redundant_rows(layout, diag.get("constraint_residual"), t)
    if failed:
        history = np.asarray(failure[0])[: int(failure[1])]
        return solution, convergence_error(n, t0 + n * dt, dt, Newton(*settings["newton"]), history, solution, settings)
    return solution, None


#: |g| beyond which a run's constraint residual means a row it does not solve was left (the rows
#: solved hold to round-off, ~1e-15 of their terms)
LEFT_CONSTRAINT = 1e3 * POSITION_TOL


def warn_violated_redundant_rows(layout, residual, t):
    """Warn (:class:`~conserve.errors.ConstraintWarning`) when the constraints of a run whose
    assembly dropped rows as redundant are violated (:func:`left_redundant_rows`)."""
    message = left_redundant_rows(layout, residual, t)
    if message:
        warnings.warn(f"simulate: {message}", ConstraintWarning, stacklevel=4)


def left_redundant_rows(layout, residual, t):
    """What a run whose assembly dropped rows as redundant did to them, or None: rows dependent on
    the others only at the initial configuration (a singular pose) are left by the motion, since
    the step does not solve them. ``residual`` (N+1,) max |g| of every row at the nodes' times ``t``."""
    if not layout.dropped_rows or residual is None or not len(residual):
        return None
    worst = int(np.nanargmax(residual)) if np.any(np.isfinite(residual)) else 0
    if not residual[worst] > LEFT_CONSTRAINT:
        return None
    rows = ", ".join(f"'{layout.constraint_rows[i][0]}' ({layout.constraint_rows[i][1]})" for i in layout.dropped_rows)
    return (f"the constraints are violated by up to {residual[worst]:.3g} (max |g|, at t = {t[worst]:.6g} s), "
            f"which the rows dropped at assembly as redundant explain: {rows}. They depended on the others only at "
            "the initial configuration (a singular pose: a mechanism at a dead centre, constraints aligned), so the "
            "step does not solve them and the motion left them. Start from a configuration where the constraints are "
            "independent, or remove the constraint that is redundant there (assemble(redundant='raise') lists them).")


def _simulate_reference(backend: ReferenceBackend, assembly, t0, t_end, dt, progress=None, chunk=CHUNK):
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
