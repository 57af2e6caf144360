"""simulate(system, t_end, dt, backend=...) -> Solution: the one entry point over the backends.

The time loop is ``jax.lax.scan`` over one jit-compiled step, run in chunks of fixed length
(steps past the end are masked, so any number of steps reuses one compiled chunk). The scan
also evaluates the diagnostics of every new node. Between chunks Python only checks for
failure; a failed step stops the run and everything computed before it is returned inside
the raised error.
"""

from __future__ import annotations

import math
from functools import partial
import time

import jax
import jax.numpy as jnp
import numpy as np

from .backends import BACKENDS
from .discrete.newton import Newton
from .errors import ConvergenceError, ModelError, SimulationError
from .model.assembled import Model, State
from .model.system import as_assembly
from .solution import Solution, layout_record, node_diagnostics

#: Steps per compiled chunk; steps past the end are masked, so every run length shares one
#: compiled chunk (a masked step costs a few µs, so short runs report a higher time per step).
CHUNK = 1024

_compiled: dict = {}


def _chunk_fn(step, newton, length):
    def run(model: Model, state: State, lam, n0, n_end, t0, h):
        def body(carry, _):
            state, lam, n, failed, failure = carry
            active = (n < n_end) & ~failed

            def do(_):
                new, new_lam, info = step(model, state, lam, t0 + n * h, h, newton)
                return new, new_lam, info, node_diagnostics(model, new)

            def skip(_):  # past the end or after a failure: nothing to compute
                shapes = jax.eval_shape(do, None)
                info, diag = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes[2:])
                return state, lam, info._replace(converged=jnp.bool_(True)), diag

            new, new_lam, info, diag = jax.lax.cond(active, do, skip, None)
            failed_now = active & ~info.converged
            keep = lambda old, upd: jnp.where(failed_now, old, upd)  # noqa: E731
            carry = (jax.tree.map(keep, state, new), keep(lam, new_lam), n + (active & info.converged),
                     failed | failed_now, jax.tree.map(lambda new, old: jnp.where(failed_now, new, old),
                                                       (info.history, info.iterations), failure))
            return carry, (new, new_lam, info.iterations, info.work, info.dissipation, diag)

        failure = (jnp.full((newton.max_iterations,), jnp.nan), jnp.int32(0))  # the failed step's Newton record
        init = (state, lam, n0, jnp.bool_(False), failure)
        return jax.lax.scan(body, init, None, length=length)

    return jax.jit(run)


def _compile(step, newton, length, args):
    """AOT-compile the chunk runner for these argument shapes once; returns (fn, seconds)."""
    leaves, treedef = jax.tree.flatten(args)
    key = (step, newton, length, treedef, tuple((np.shape(x), jnp.result_type(x)) for x in leaves))
    if key in _compiled:
        return _compiled[key], 0.0
    tic = time.perf_counter()
    fn = _chunk_fn(step, newton, length).lower(*args).compile()
    _compiled[key] = fn
    return fn, time.perf_counter() - tic


def compiled_count():
    """Number of distinct compiled chunk runners (one per model structure and step options)."""
    return len(_compiled)


def simulate(system, t_end, dt, *, backend="director", newton=None, t0=0.0, chunk=CHUNK, progress=None,
             ode=None) -> Solution:
    """Integrate ``system`` from t0 to t_end with the constant step dt.

    Parameters
    ----------
    system : System or Assembly (assemble once with ``system.assemble()`` to reuse it)
    t_end : float, s — rounded up to a whole number of steps: the last node is t0 + N dt
    dt : float, s
    backend : "director" (energy-momentum midpoint DAE in director coordinates, DESIGN §6) or
        "reduced" (the same discrete equations in the kinematic tree's minimal coordinates,
        Thompson's null-space form, DESIGN §8; loops and other constraints keep multipliers) or
        "ode" (Thompson's reduced ODE by scipy's solve_ivp, not conserving: a reference, nodes
        every dt; tree systems without motors or loads, :mod:`conserve.backends.ode`)
    ode : options of the "ode" backend: {"method": any solve_ivp method (default "DOP853"),
        "rtol": 1e-10, "atol": 1e-12}
    newton : :class:`conserve.Newton` options (tolerance, iteration limit)
    chunk : steps per compiled scan chunk (≥ 1)
    progress : optional callable ``progress(steps_done, n_steps)``, called after every chunk

    Returns
    -------
    Solution with N + 1 nodes.

    Raises
    ------
    ConvergenceError
        A step did not converge (or gave NaN). ``err.partial_solution`` holds every step up to
        the last converged one; ``err.step``, ``err.time``, ``err.residual_history`` say where.
    """
    assembly = as_assembly(system, "simulate")
    if backend not in BACKENDS:
        raise ModelError(f"simulate: unknown backend {backend!r}; choose one of {sorted(BACKENDS)}.")
    dt, t0, t_end = float(dt), float(t0), float(t_end)
    if not (dt > 0 and math.isfinite(dt)):
        raise ModelError(f"simulate: dt must be positive and finite, got {dt}.")
    if not (t_end > t0 and math.isfinite(t_end)):
        raise ModelError(f"simulate: t_end must be finite and > t0 = {t0}, got {t_end}.")
    if not (isinstance(chunk, int) and chunk >= 1):
        raise ModelError(f"simulate: chunk must be an integer ≥ 1, got {chunk!r}.")
    newton = newton or Newton()
    model, layout, state = assembly.model, assembly.layout, assembly.initial_state
    if backend == "ode":
        return _simulate_ode(assembly, t0, t_end, dt, ode or {})
    step = BACKENDS[backend].step
    n_steps = max(1, math.ceil((t_end - t0) / dt - 1e-9))
    lam = jnp.zeros(model.n_constraints)
    args = (model, state, lam, jnp.int32(0), jnp.int32(n_steps), jnp.float64(t0), jnp.float64(dt))
    run, compile_time = _compile(step, newton, chunk, args)

    first = jax.tree.map(lambda a: np.asarray(a)[None], (state, _node_diagnostics(model, state)))
    nodes, diags, per_step = [first[0]], [first[1]], []
    n, failed = 0, False
    tic = time.perf_counter()
    while n < n_steps and not failed:
        (state, lam, n_new, failed, failure), out = run(
            model, state, lam, jnp.int32(n), jnp.int32(n_steps), jnp.float64(t0), jnp.float64(dt))
        done = int(n_new) - n
        out = jax.tree.map(lambda a: np.asarray(a)[:done], out)
        nodes.append(out[0])
        per_step.append(out[1:5])
        diags.append(out[5])
        n, failed = int(n_new), bool(failed)
        if progress is not None:
            progress(n, n_steps)
    run_time = time.perf_counter() - tic

    q, v, s, p, theta = (np.concatenate(x) for x in zip(*nodes))
    lams, iters, work, dissipation = (np.concatenate(x) for x in zip(*per_step))
    diagnostics = {k: np.concatenate([d[k] for d in diags]) for k in diags[0]}
    stats = {"backend": backend, "steps": n, "compile_time": compile_time, "run_time": run_time,
             "time_per_step": run_time / max(n, 1), "newton_tol": newton.tol,
             "unknowns": BACKENDS[backend].unknowns(model)}
    recover = getattr(BACKENDS[backend], "multipliers", None)  # backends that eliminate multipliers
    if recover is not None and n:
        lams = recover(model, State(q, v, s, p, theta), lams, t0, dt)
    multipliers = np.zeros((n, len(layout.constraint_rows)))
    multipliers[:, list(model.constraint_keep)] = lams * (2.0 / dt**2)
    solution = Solution(t=t0 + dt * np.arange(n + 1), q=q, v=v, s=s, p=p, theta=theta, multipliers=multipliers,
                        newton_iterations=iters, work=work, dissipation=dissipation,
                        layout=layout_record(layout), diagnostics=diagnostics, stats=stats)
    if failed:
        history = np.asarray(failure[0])[: int(failure[1])]
        raise _failure(n, t0 + n * dt, dt, newton, history, solution)
    return solution


_node_diagnostics = jax.jit(node_diagnostics)


def _simulate_ode(assembly, t0, t_end, dt, options):
    """The "ode" backend's Solution: nodes every dt, no multipliers (NaN), no Newton. If
    solve_ivp fails, a SimulationError carries the nodes it reached."""
    nodes, dissipation, stats, failure = BACKENDS["ode"].integrate(assembly, t0, t_end, dt, **options)
    n = len(nodes.q) - 1
    diagnostics = jax.tree.map(np.asarray, jax.vmap(partial(_node_diagnostics, assembly.model))(
        jax.tree.map(jnp.asarray, nodes)))
    solution = Solution(t=t0 + dt * np.arange(n + 1), q=nodes.q, v=nodes.v, s=nodes.s, p=nodes.p,
                        theta=nodes.theta, multipliers=np.full((n, len(assembly.layout.constraint_rows)), np.nan),
                        newton_iterations=np.zeros(n, np.int32), work=np.zeros((n, 0)), dissipation=dissipation,
                        layout=layout_record(assembly.layout), diagnostics=diagnostics,
                        stats={"backend": "ode", "steps": n, **stats})
    if failure:
        raise SimulationError(f"backend 'ode' failed after t = {t0 + n * dt:.6g} s: {failure}. Kept the {n + 1} "
                              "nodes reached in err.partial_solution; try another method or tolerances "
                              "(simulate(..., ode={'method': 'Radau'})).",
                              partial_solution=solution, step=n, time=t0 + n * dt)
    return solution


def _failure(n, t, h, newton, history, solution):
    finite = bool(np.all(np.isfinite(history))) and history.size == newton.max_iterations
    what = f"did not converge in {newton.max_iterations} iterations" if finite else "produced NaN/inf"
    if finite and np.min(history) <= 1e-12 * max(history[0], 1.0):
        what += (" although the residual reached round-off: the Newton matrix is (nearly) singular, e.g. a "
                 "kinematic singularity (a mechanism at a change point, aligned axes) or constraints that "
                 "became dependent")
    hist = ", ".join(f"{r:.2e}" for r in history)
    return ConvergenceError(
        f"step {n} (t = {t:.6g} s -> {t + h:.6g} s): Newton {what}; residual history [{hist}]. "
        f"Kept {n} converged steps in err.partial_solution. Try a smaller dt, a larger "
        "Newton(max_iterations=...), or check the model for unbounded forces.",
        partial_solution=solution, step=n, time=t, residual_history=history,
    )
