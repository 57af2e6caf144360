"""simulate(system, t_end, dt, backend=...) -> Solution: the one entry point over the backends.

The time loop is ``jax.lax.scan`` over one jit-compiled step, run in chunks of fixed length
(steps past the end are masked, so any number of steps reuses one compiled chunk). Between
chunks Python only checks for failure; a failed step stops the run and everything computed
before it is returned inside the raised error.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from .backends import BACKENDS
from .discrete.newton import Newton
from .errors import ConvergenceError, ModelError
from .model.assembled import Model, State
from .model.system import Assembly, System
from .solution import Solution, diagnostics

#: Steps per compiled chunk; steps past the end are masked, so every run length shares one
#: compiled chunk (a masked step costs ~1 µs).
CHUNK = 1024

_compiled: dict = {}


def _chunk_fn(step, newton, length):
    def run(model: Model, state: State, lam, n0, n_end, t0, h):
        def body(carry, _):
            state, lam, n, failed = carry
            active = (n < n_end) & ~failed

            def do(_):
                s, l, it, ok, _hist = step(model, state, lam, t0 + n * h, h, newton)
                return s, l, it, ok

            def skip(_):
                return state, lam, jnp.int32(0), jnp.bool_(True)

            new, new_lam, iters, ok = jax.lax.cond(active, do, skip, None)
            failed_now = active & ~ok
            keep = lambda old, upd: jnp.where(failed_now, old, upd)  # noqa: E731
            carry = (jax.tree.map(keep, state, new), keep(lam, new_lam), n + (active & ok), failed | failed_now)
            return carry, (new.q, new.v, new_lam, iters, active & ok)

        init = (state, lam, n0, jnp.bool_(False))
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


def simulate(system, t_end, dt, *, backend="director", newton=None, t0=0.0, chunk=CHUNK) -> Solution:
    """Integrate ``system`` from t0 to t_end with the constant step dt.

    Parameters
    ----------
    system : System or Assembly (assemble once with ``system.assemble()`` to reuse it)
    t_end : float, s — rounded up to a whole number of steps: the last node is t0 + N dt
    dt : float, s
    backend : "director" (energy-momentum midpoint DAE, DESIGN §6)
    newton : :class:`conserve.Newton` options (tolerance, iteration limit)
    chunk : steps per compiled scan chunk

    Returns
    -------
    Solution with N + 1 nodes.

    Raises
    ------
    ConvergenceError
        A step did not converge (or gave NaN). ``err.partial_solution`` holds every step up to
        the last converged one; ``err.step``, ``err.time``, ``err.residual_history`` say where.
    """
    assembly = system.assemble() if isinstance(system, System) else system
    if not isinstance(assembly, Assembly):
        raise ModelError(f"simulate: expected a cs.System, got {type(system).__name__}.")
    if backend not in BACKENDS:
        raise ModelError(f"simulate: unknown backend {backend!r}; choose one of {sorted(BACKENDS)}.")
    dt, t0, t_end = float(dt), float(t0), float(t_end)
    if not (dt > 0 and math.isfinite(dt)):
        raise ModelError(f"simulate: dt must be positive and finite, got {dt}.")
    if not (t_end > t0 and math.isfinite(t_end)):
        raise ModelError(f"simulate: t_end must be finite and > t0 = {t0}, got {t_end}.")
    newton = newton or Newton()
    step = BACKENDS[backend]
    model, layout, state = assembly.model, assembly.layout, assembly.initial_state
    n_steps = max(1, math.ceil((t_end - t0) / dt - 1e-9))
    length = int(chunk)
    lam = jnp.zeros(model.n_constraints)
    args = (model, state, lam, jnp.int32(0), jnp.int32(n_steps), jnp.float64(t0), jnp.float64(dt))
    run, compile_time = _compile(step, newton, length, args)

    qs, vs, lams, iters = [np.asarray(state.q)[None]], [np.asarray(state.v)[None]], [], []
    n, failed = 0, False
    tic = time.perf_counter()
    while n < n_steps and not failed:
        (state, lam, n_new, failed), out = run(model, state, lam, jnp.int32(n), jnp.int32(n_steps),
                                                jnp.float64(t0), jnp.float64(dt))
        done = int(n_new) - n
        q, v, l, it, _ok = (np.asarray(a)[:done] for a in out)
        qs.append(q), vs.append(v), lams.append(l), iters.append(it)
        n, failed = int(n_new), bool(failed)
    run_time = time.perf_counter() - tic

    q, v = np.concatenate(qs), np.concatenate(vs)
    multipliers = np.concatenate(lams) * (2.0 / dt**2) if lams else np.zeros((0, model.n_constraints))
    t = t0 + dt * np.arange(q.shape[0])
    stats = {"backend": backend, "steps": n, "compile_time": compile_time, "run_time": run_time,
             "time_per_step": run_time / max(n, 1), "newton_tol": newton.tol}
    solution = Solution(t=t, q=q, v=v, multipliers=multipliers,
                        newton_iterations=np.concatenate(iters) if iters else np.zeros(0, int),
                        parts=layout.describe(), constraint_rows=list(layout.constraint_rows),
                        diagnostics=diagnostics(model, q, v), stats=stats)
    if failed:
        raise _failure(step, model, layout, State(jnp.asarray(q[-1]), jnp.asarray(v[-1])), lam,
                       n, t0 + n * dt, dt, newton, solution)
    return solution


def _failure(step, model, layout, state, lam, n, t, h, newton, solution):
    new, _, iterations, _, history = jax.jit(step, static_argnums=5)(model, state, lam, t, h, newton)
    history = np.asarray(history)[: int(iterations)]
    bad = not np.all(np.isfinite(np.asarray(new.q))) or not np.all(np.isfinite(history))
    what = "produced NaN/inf" if bad else f"did not converge in {newton.max_iterations} iterations"
    hist = ", ".join(f"{r:.2e}" for r in history)
    return ConvergenceError(
        f"step {n} (t = {t:.6g} s -> {t + h:.6g} s): Newton {what}; residual history [{hist}]. "
        f"Kept {n} converged steps in err.partial_solution. Try a smaller dt, a larger "
        "Newton(max_iterations=...), or check the model for unbounded forces.",
        partial_solution=solution, step=n, time=t, residual_history=history,
    )
