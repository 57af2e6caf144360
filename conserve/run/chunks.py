"""The compiled time loop: a ``jax.lax.while_loop`` over one jit-compiled step, compiled once per
model structure and run in chunks of at most ``chunk`` steps (the loop stops at the run's end or a
failure, so every run length shares one compiled chunk), and the Python loop over the chunks that
checks for failure, evaluates the new nodes' diagnostics (:mod:`conserve.results.solution`),
writes checkpoints and reports progress between them."""

from __future__ import annotations

import time
from collections import OrderedDict

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import Carry, StepBackend, StepOutput
from ..backends.director import unknowns as director_unknowns
from ..compilation.modes import KERNEL_BLOCK, KERNEL_SIZE, KERNEL_UNKNOWNS, compiler_options, loops_as_kernels
from ..compilation.timing import run_times
from ..control.controller import reported
from ..discrete.newton import MEMBERS, run_if
from ..model.assembled import Model
from ..model.parameters import bound
from ..results.solution import Solution, diagnostics
from . import checkpoint as checkpoints
from .checkpoint import carry_arrays
from .failures import keep_partial
from .pieces import assemble_solution, piece

#: Steps per compiled chunk (at most: its loop stops at the end of the run, so every run length
#: shares one compiled chunk).
CHUNK = 1024


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
    matrix, a block's for a tree solver, whose blocks are ~3 n m). Groups whose matrices stay in the
    cache step small models fastest and make no difference to larger ones (measurements:
    benchmarks/results/defaults.md, section ``members_per_group``)."""
    fit = max(1, GROUP_BYTES // (8 * max(n_unknowns, 1) * max(largest_inverse or n_unknowns, 1)))
    return 1 << (fit.bit_length() - 1)


def newton_sizes(backend: StepBackend, model) -> tuple[int, int]:
    """(n, m): a step backend's Newton unknowns n and the order m of the largest matrix its linear
    solver inverts (``linear.largest_inverse``: n for a dense matrix, a diagonal block's for a tree
    solver)."""
    linear, n = getattr(backend, "linear", None), backend.unknowns(model)
    return n, linear.largest_inverse(n) if hasattr(linear, "largest_inverse") else n


def chunk_runner(backend: StepBackend, length, batch=None, group=None):
    """The compiled stretch of up to ``length`` steps: a ``lax.while_loop`` over ``backend.step``
    that stops at ``n_end`` or at a failure, its steps' outputs written into arrays of ``length``
    (the rest left zero), so every run length shares the code and a short run costs only its steps.
    ``batch``: None, or per leaf of the model 0 (one value per member) or None (shared), for a
    run vmapped over members (the carry, n0 and n_end with a leading member axis;
    :mod:`conserve.run.ensemble`): the step is vmapped, the loop runs while some member has steps
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
        # the history kept only for a failure
        return loop, StepOutput(new.state, record._replace(history=None), reported(new.control))

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
    :mod:`conserve.compilation`) for a run whose dense Newton matrix has at most
    :data:`~conserve.compilation.modes.KERNEL_SIZE` unknowns, or whose tree solver's every block at
    most :data:`~conserve.compilation.modes.KERNEL_BLOCK`, compiled "optimized",
    or, one run (not an ensemble's), "quick" with the director backend and at most
    :data:`~conserve.compilation.modes.KERNEL_UNKNOWNS` unknowns (where the one kernel costs
    little compilation; a reduced step's, a larger program, and an ensemble's vmapped step cost
    seconds more, which only long runs, "optimized", repay; measurements:
    benchmarks/results/defaults.md, section ``KERNEL_UNKNOWNS``) — both with "quick"'s options,
    whose classic emitters alone make the loop one kernel; otherwise ``(backend, mode)``."""
    quick = (mode == "quick" and batch is None and backend.name == "director"
             and director_unknowns(model) <= KERNEL_UNKNOWNS)
    n, largest = newton_sizes(backend, model)
    bound = KERNEL_SIZE if largest == n else KERNEL_BLOCK  # a dense matrix, or a structured solver's blocks
    if (mode == "optimized" or quick) and largest <= bound:
        kernels = backend.as_kernels()  # itself when its Newton matrix is not a dense one
        if kernels is not backend and loops_as_kernels():
            return kernels, "quick"
    return backend, mode


def kernel_when_optimized(backend: StepBackend, model) -> bool:
    """Whether a single run's Newton loop is one kernel compiled "optimized" but not "quick"
    (:func:`kernel_code`): the code ``compile="auto"`` takes for long runs
    (:func:`~conserve.compilation.modes.resolved_mode`)."""
    return (kernel_code(backend, model, "optimized")[0] is not backend
            and kernel_code(backend, model, "quick")[0] is backend)


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
    fn = chunk_runner(backend, length, batch, group).lower(*args).compile(compiler_options(options))
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


def run_chunks(assembly, settings, backend: StepBackend, carry: Carry, n, pieces, ckpt, progress) -> Solution:
    """The time loop from step n (``carry`` at t_n) to the end; ``pieces`` hold what was computed
    before (dicts of node_*, step_*, diag_* arrays, the checkpoint layout). What the loop compiles
    on first use (the nodes' diagnostics) counts as compilation, not run time
    (:func:`~conserve.compilation.timing.compiling`)."""
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
                pieces.append(piece(out, int(n_new) - n, diag, model))
                done, n, failed = int(n_new) - n, int(n_new), bool(failed)
                if ckpt is not None and done:
                    checkpoints.write(ckpt, n, carry_arrays(carry), pieces[-1])
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
