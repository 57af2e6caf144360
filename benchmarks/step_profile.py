"""Benchmark: where the microseconds of one compiled director step go, for small systems — the heavy
top (``conserve.problems.HeavyTop().system()``, Δt = 2e-3, 21 unknowns, dense Newton matrix) and the
4-link spherical chain of benchmarks/chain_scaling.py (``chain(4)``, Δt = 1e-3, its tree solver).

    taskset -c 0 python benchmarks/step_profile.py [--steps 2000] [--calls 2000] [--repeats 7]

Writes benchmarks/results/step_profile.md. The script pins itself to CPU 0 (every thread, OpenBLAS
to one thread) and runs without the persistent compilation cache (benchmarks/_peers.py).

Per system, on the model's assembled arrays (``assembly.model``, the carry of ``Director.init`` after
``Director.prepare``), with the code a run compiles (``conserve.run.chunks.kernel_code`` for
``compile="optimized"``: the Newton loop as one kernel, the linear solver's ``kernel`` variant, XLA's
"quick" options), each measured as its own jitted function:

1. the step as a run uses it: ``cs.simulate(assembly, steps·Δt, Δt, compile="optimized")``,
   ``sol.stats['run_time'] / steps`` (best of the repeats; includes the chunk loop's bookkeeping and
   the nodes' diagnostics between chunks), Newton iterations per step (``sol.newton_iterations``:
   residual evaluations) and Jacobians per step (counted in a separate run of the same steps whose
   solver's ``jacobian`` calls a host callback; the step's results are the same); also the bare
   ``backend.step`` in a compiled loop (no outputs, no diagnostics);
2. one residual evaluation ``_residual(model, state, t, h, x)`` at the initial guess;
3. one Jacobian, the solver's ``linear.jacobian(residual, x)`` (jacfwd for the dense LU, coloured
   probes and block gathering for the tree);
4. one factorisation ``linear.factorise(J)``; 5. one solve ``linear.solve(factors, r)``;
6. the predictor ``initial_guess(model, state, λ, h, trend)``.

A jitted call from Python costs several µs of dispatch, more than most of these parts, so each part
is timed inside a compiled ``fori_loop`` of ``--calls`` evaluations, each evaluating it at its input
plus a scalar carried from the previous evaluation (1e-300 × the sum of its outputs: no hoisting, no
dead code), minus the same loop around nothing; per call = loop time / calls, median of
``--repeats``. The dispatch-inclusive time of one call from Python (median of many,
``block_until_ready``) is listed beside it. The implied rest = step − (iterations × (residual +
solve) + Jacobians × (Jacobian + factorisation) + guess): the compiled Newton loop's control flow and
bookkeeping (convergence tests, weights, the chord rates, ``run_if``, the turn of carried factors, the
advance to the new state, the trend). XLA's per-iteration loop overhead: a bare
``jax.lax.while_loop`` of N trivial iterations (a scalar multiply-add), per iteration.
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import replace
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from _peers import pin_to_core0, write_report

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import conserve as cs  # noqa: E402
from functools import partial  # noqa: E402

from conserve.backends.director import Director, _residual, initial_guess, weights  # noqa: E402
from conserve.discrete.newton import newton_solve  # noqa: E402
from conserve.discrete.turning import turn  # noqa: E402
from conserve.compilation.modes import compiler_options  # noqa: E402
from conserve.model.parameters import bound  # noqa: E402
from conserve.problems import HeavyTop  # noqa: E402
from conserve.run.chunks import kernel_code  # noqa: E402

from chain_scaling import chain  # noqa: E402

OUT = Path(__file__).parent / "results" / "step_profile.md"
SYSTEMS = {"heavy top": (lambda: HeavyTop().system(), 2e-3), "4-link chain": (lambda: chain(4), 1e-3)}
COMPILE = "optimized"  # simulate's code generation, as in chain_scaling.py (heavy_top.py takes the faster)


def compiled(fn, args, mode):
    return jax.jit(fn).lower(*args).compile(compiler_options(mode))


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        tic = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - tic)
    return float(np.median(times))


def loop_of(part, calls):
    """A function (args, s0) -> s running ``part(args, s)`` ``calls`` times in a fori_loop, s the
    scalar carried from each evaluation to the next (the part adds it to one of its inputs)."""
    def run(args, s0):
        def body(i, s):
            out = part(args, s)
            # finite entries only: a Newton history is NaN after its last iterate (a NaN carried back
            # would stop the next solve at its first iterate)
            total = sum(jnp.sum(jnp.where(jnp.isfinite(a), a, 0.0)) for a in
                        (jnp.asarray(leaf, jnp.float64) for leaf in jax.tree.leaves(out)))
            return s + 1e-300 * total
        return jax.lax.fori_loop(0, calls, body, s0)
    return run


def time_loop(part, args, calls, repeats, mode):
    fn = compiled(loop_of(part, calls), (args, np.float64(0.0)), mode)
    fn(args, np.float64(0.0)).block_until_ready()
    return median_time(lambda: fn(args, np.float64(0.0)), repeats) / calls


def time_call(part, args, repeats, mode, calls=2000):
    fn = compiled(part, (args, np.float64(0.0)), mode)
    jax.block_until_ready(fn(args, np.float64(0.0)))
    return median_time(lambda: [jax.block_until_ready(fn(args, np.float64(0.0))) for _ in range(calls)],
                       repeats) / calls


def bare_loop(iterations, repeats, mode):
    """Seconds per iteration of a ``lax.while_loop`` of ``iterations`` trivial iterations."""
    def run(s0):
        return jax.lax.while_loop(lambda c: c[0] < iterations, lambda c: (c[0] + 1, c[1] * 1.0000001 + 1e-300),
                                  (jnp.int32(0), s0))[1]
    fn = compiled(run, (np.float64(1.0),), mode)
    fn(np.float64(1.0)).block_until_ready()
    return median_time(lambda: fn(np.float64(1.0)), repeats) / iterations


def counting(linear, counter):
    """``linear`` (a copy) whose ``jacobian`` also counts its evaluations in ``counter`` (a list)."""
    cls = type(linear)

    def jacobian(self, residual, x):
        jax.debug.callback(lambda: counter.append(1))
        return cls.jacobian(self, residual, x)

    new = copy.copy(linear)
    object.__setattr__(new, "__class__", type(f"Counting{cls.__name__}", (cls,), {"jacobian": jacobian}))
    return new


def profile(name, build, dt, args):
    assembly = build().assemble()
    model, state0 = assembly.model, assembly.initial_state
    steps = args.steps
    # 1. the step as a run uses it
    cs.simulate(assembly, dt, dt, compile=COMPILE)  # compiles
    runs = [cs.simulate(assembly, steps * dt, dt, compile=COMPILE) for _ in range(args.repeats)]
    best = min(runs, key=lambda s: s.stats["run_time"])
    run_step = best.stats["run_time"] / best.stats["steps"]
    run_median = float(np.median([r.stats["run_time"] for r in runs])) / best.stats["steps"]
    iterations = float(np.mean(best.newton_iterations))

    backend = Director().prepare(model, state0)
    kernels, mode = kernel_code(backend, model, COMPILE)
    linear = kernels._linear
    carry0 = kernels.init(model, state0)

    # Jacobians per step: the same steps with a counting solver (a host callback per Jacobian)
    counter = []
    counting_backend = replace(kernels, linear=counting(linear, counter))

    def scan_steps(model, carry):
        def body(c, n):
            c, record = counting_backend.step(model, c, n * dt, dt)
            return c, record.iterations
        with bound(model.parameters):
            return jax.lax.scan(body, carry, jnp.arange(steps, dtype=jnp.float64))
    carry_end, its = jax.jit(scan_steps)(model, carry0)
    jax.block_until_ready(its)
    jax.effects_barrier()
    jacobians = len(counter) / steps
    counted_iterations = float(np.mean(np.asarray(its)))

    # the bare step in a compiled loop (the carry advanced each call: the real motion)
    def step_loop(model, carry):
        def body(i, c):
            with bound(model.parameters):
                return kernels.step(model, c, i * dt, dt)[0]
        return jax.lax.fori_loop(0, steps, body, carry)
    fn = compiled(step_loop, (model, carry0), mode)
    jax.block_until_ready(fn(model, carry0))
    bare_step = median_time(lambda: fn(model, carry0), args.repeats) / steps

    # the parts, at a state after 10 steps (carried factors, a trend of real steps)
    def ten_steps(model, carry):
        with bound(model.parameters):
            return jax.lax.fori_loop(0, 10, lambda i, c: kernels.step(model, c, i * dt, dt)[0], carry)
    carry = jax.jit(ten_steps)(model, carry0)
    state, lam, trend = carry.state, carry.multipliers, carry.trend
    t, h = 10 * dt, dt
    x0 = jax.jit(_guess)(model, state, lam, h, trend)

    def res(x, m, s):
        with bound(m.parameters):
            return _residual(m, s, t, h, x)

    J = jax.jit(lambda x, m, s: linear.jacobian(lambda y: res(y, m, s), x))(x0, model, state)
    factors = jax.jit(linear.factorise)(J)
    r = jax.jit(res)(x0, model, state)

    def bump(tree, s):  # every float leaf + s (1e-300: the same values, no hoisting)
        return jax.tree.map(lambda a: a + s if jnp.issubdtype(jnp.asarray(a).dtype, jnp.floating) else a, tree)

    parts = {
        "residual": (lambda a, s: res(a[0] + s, a[1], a[2]), (x0, model, state)),
        "jacobian": (lambda a, s: linear.jacobian(lambda y: res(y, a[1], a[2]), a[0] + s), (x0, model, state)),
        "factorise": (lambda a, s: linear.factorise(jax.tree.map(lambda b: b + s, a)), J),
        "solve": (lambda a, s: linear.solve(a[0], a[1] + s), (factors, r)),
        "guess": (lambda a, s: _guess(*bump(a, s)[:3], h, bump(a, s)[3]), (model, state, lam, trend)),
    }
    # the step and its newton_solve alone at this one state (the step's own call, copied from
    # conserve.backends.director.step): step − newton_solve = the work outside the Newton loop
    def solve_args(model, carry):
        state = carry.state
        nq, nr = state.q.shape[0], state.p.shape[0]
        with bound(model.parameters):
            x0 = initial_guess(model, state, carry.multipliers, h, carry.trend)
            size = [jnp.zeros(nq), model.constraint_magnitudes(state.q, state.theta, state.s, t + h)]
            size = jnp.concatenate(size + ([jnp.zeros(nr), jnp.zeros(nr)] if nr else []))
        return x0, size

    def newton_only(a, s, solver=linear):  # with the turn of carried factors (static triples: made in here)
        model, carry, x0, size = bump(a, s)
        state, memory = carry.state, carry.memory
        with bound(model.parameters):
            q_turn = None if memory is None or memory.reference is None else turn(model, state.q, memory.reference)
            return newton_solve(lambda x: _residual(model, state, t, h, x), x0, kernels.newton,
                                partial(weights, state), size, solver, carry.memory, turn=q_turn)

    def step_only(a, s):
        model, carry = bump(a, s)
        with bound(model.parameters):
            return kernels.step(model, carry, t, h)

    fixed_args = (model, carry, *jax.jit(solve_args)(model, carry))
    fixed_counter = []
    out = jax.jit(partial(newton_only, solver=counting(linear, fixed_counter)))(fixed_args, 0.0)
    jax.block_until_ready(out)
    jax.effects_barrier()
    fixed = {"iterations": int(out[1]), "jacobians": len(fixed_counter), "converged": bool(out[2])}
    def weights_only(a, s):  # the scale of the unknowns: twice per iteration (chord and its test)
        state, x = bump(a, s)
        return weights(state, x)

    def turn_only(a, s):  # a chord with carried factors: Q made and applied both ways
        model, carry, r = bump(a, s)
        if carry.memory is None or carry.memory.reference is None:
            return r
        with bound(model.parameters):
            Q = turn(model, carry.state.q, carry.memory.reference)
            return Q.forward(Q.backward(r))

    parts["weights"] = (weights_only, (state, x0))
    parts["turn"] = (turn_only, (model, carry, r))
    parts["newton_solve"] = (newton_only, fixed_args)
    parts["step at this state"] = (step_only, (model, carry))
    harness = time_loop(lambda a, s: s, (), args.calls, args.repeats, mode)  # the timing loop around nothing
    loop, call = {}, {}
    for key, (part, part_args) in parts.items():  # (in this order: the table reads them by name)
        loop[key] = max(time_loop(part, part_args, args.calls, args.repeats, mode) - harness, 0.0)
        call[key] = time_call(part, part_args, args.repeats, mode, calls=min(args.calls, 1000))
    return {"name": name, "dt": dt, "unknowns": int(x0.shape[0]), "linear": getattr(linear, "name", type(linear)),
            "kernel": getattr(linear, "kernel", None), "mode": mode, "run_step": run_step, "bare_step": bare_step,
            "iterations": iterations, "counted_iterations": counted_iterations, "jacobians": jacobians,
            "loop": loop, "call": call, "fixed": fixed, "run_median": run_median, "harness": harness, "steps": steps,
            "carry_ok": bool(np.all(np.isfinite(np.asarray(carry_end.state.q))))}


def _guess(model, state, lam, h, trend):
    with bound(model.parameters):
        return initial_guess(model, state, lam, h, trend)


def table(p):
    us = 1e6
    step = p["run_step"]
    L = p["loop"]
    it, jac = p["iterations"], p["jacobians"]
    accounted = it * (L["residual"] + L["solve"]) + jac * (L["jacobian"] + L["factorise"]) + L["guess"]
    rest = step - accounted
    rows = [("step (simulate run time / steps)", 1.0, step, None),
            ("residual evaluations", it, it * L["residual"], p["call"]["residual"]),
            ("solves (chords and Newton corrections)", it, it * L["solve"], p["call"]["solve"]),
            ("Jacobians", jac, jac * L["jacobian"], p["call"]["jacobian"]),
            ("factorisations", jac, jac * L["factorise"], p["call"]["factorise"]),
            ("predictor (initial_guess)", 1.0, L["guess"], p["call"]["guess"]),
            ("rest: Newton loop control flow, bookkeeping, advance", None, rest, None)]
    lines = [f"### {p['name']} (Δt = {p['dt']:g}, {p['unknowns']} unknowns, solver `{p['linear']}`"
             f"{' kernel' if p['kernel'] else ''}, XLA options \"{p['mode']}\")", "",
             f"Newton iterations (residual evaluations) per step {it:.3f}, Jacobians per step {jac:.3f} "
             f"(counted run: {p['counted_iterations']:.3f} iterations per step); {p['steps']} steps.", "",
             "| part | per step | µs each (in loop) | µs per step | % of step | µs per call from Python |",
             "|---|---|---|---|---|---|"]
    for label, count, total, per_call in rows:
        each = "" if count is None or count == 0 else f"{us * total / count:.3f}"
        cnt = "" if count is None else f"{count:.3f}"
        pc = "" if per_call is None else f"{us * per_call:.2f}"
        lines.append(f"| {label} | {cnt} | {each} | {us * total:.3f} | {100 * total / step:.1f} % | {pc} |")
    lines += ["", f"Bare `backend.step` in a compiled loop (no outputs, no diagnostics): {us * p['bare_step']:.3f} µs "
              f"per step ({100 * p['bare_step'] / step:.0f} % of the run's); the rest against it: "
              f"{us * (p['bare_step'] - accounted):.3f} µs "
              f"({100 * (p['bare_step'] - accounted) / p['bare_step']:.0f} %). "
              f"Timing loop around nothing: {us * p['harness']:.4f} µs per call (subtracted). "
              f"Run time per step: best {us * step:.3f} µs, median {us * p['run_median']:.3f} µs of the repeats.", ""]
    f = p["fixed"]
    inner = f["iterations"] * (L["residual"] + L["solve"]) + f["jacobians"] * (L["jacobian"] + L["factorise"])
    step_f, newton_f = L["step at this state"], L["newton_solve"]
    lines += [f"At one state (after 10 steps; its Newton solve takes {f['iterations']} iterations and "
              f"{f['jacobians']} Jacobians, converged {f['converged']}), each timed in the loop as the parts:", "",
              "| at this state | µs | % of its step |", "|---|---|---|",
              f"| `backend.step` | {us * step_f:.3f} | 100 % |",
              f"| its `newton_solve` (with the turn of carried factors) | {us * newton_f:.3f} | "
              f"{100 * newton_f / step_f:.0f} % |",
              f"| · parts inside it: iterations × (residual + solve) + Jacobians × (Jacobian + factorise) | "
              f"{us * inner:.3f} | {100 * inner / step_f:.0f} % |",
              f"| · the Newton loop's own control flow and bookkeeping (newton_solve − parts) | "
              f"{us * (newton_f - inner):.3f} | {100 * (newton_f - inner) / step_f:.0f} % |",
              f"| ·· of which, if each iteration did them once: weights (one evaluation) × iterations | "
              f"{us * f['iterations'] * L['weights']:.3f} | {100 * f['iterations'] * L['weights'] / step_f:.0f} % |",
              f"| ·· and the turn of carried factors (made, applied both ways) × iterations | "
              f"{us * f['iterations'] * L['turn']:.3f} | {100 * f['iterations'] * L['turn'] / step_f:.0f} % |",
              f"| outside the Newton loop: guess, sizes, advance, trend (step − newton_solve) | "
              f"{us * (step_f - newton_f):.3f} | {100 * (step_f - newton_f) / step_f:.0f} % |", ""]
    return lines, rest, accounted


def machine():
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "?"
    return cpu, commit


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    t_start = time.perf_counter()
    pin_to_core0()
    jax.config.update("jax_enable_x64", True)

    loops = {}
    for mode in ("quick", "optimized"):
        loops[mode] = {n: bare_loop(n, args.repeats, mode) for n in (1000, 100000)}
    results = [profile(name, build, dt, args) for name, (build, dt) in SYSTEMS.items()]

    cpu, commit = machine()
    lines = ["# Step profile: where the microseconds of one compiled step go", "",
             f"Machine: {cpu}, pinned to CPU 0; {platform.python_version()}, jax {jax.__version__}, "
             f"conserve {getattr(cs, '__version__', '?')} (commit {commit}); {time.strftime('%Y-%m-%d')}. "
             "`taskset -c 0 python benchmarks/step_profile.py` (defaults: "
             f"--steps {args.steps} --calls {args.calls} --repeats {args.repeats}).", "",
             "Each part timed inside a compiled loop of many evaluations (minus the loop around nothing), "
             "on the model's assembled arrays, with the code a `compile=\"optimized\"` run compiles (the "
             "solver's kernel variant, XLA's \"quick\" options); \"µs per call from Python\" is the same part "
             "as one jitted call (dispatch included). Rest = step − (iterations × (residual + solve) + "
             "Jacobians × (Jacobian + factorise) + guess).", ""]
    summary = []
    for p in results:
        part, rest, accounted = table(p)
        lines += part
        summary.append((p, rest, accounted))
    lines += ["## XLA loop overhead", "",
              "| XLA options | µs per iteration, N = 1000 | µs per iteration, N = 100000 |", "|---|---|---|"]
    for mode, per in loops.items():
        lines.append(f"| {mode} | {1e6 * per[1000]:.4f} | {1e6 * per[100000]:.4f} |")
    lines += ["", "A bare `jax.lax.while_loop` (int counter, one scalar multiply-add per iteration), compiled with "
              "each option set; per iteration = call time / N (the N = 1000 row includes the call's dispatch "
              "/ N).", ""]
    lines += ["## What dominates", "", dominates(summary, loops), ""]
    write_report(OUT, lines, t_start)


def dominates(summary, loops):
    parts = []
    for p, rest, accounted in summary:
        step, L, f = p["run_step"], p["loop"], p["fixed"]
        shares = {"residuals": p["iterations"] * L["residual"], "solves": p["iterations"] * L["solve"],
                  "Jacobians + factorisations": p["jacobians"] * (L["jacobian"] + L["factorise"]),
                  "predictor": L["guess"], "the rest": rest}
        top = sorted(shares.items(), key=lambda kv: -kv[1])
        inner = f["iterations"] * (L["residual"] + L["solve"]) + f["jacobians"] * (L["jacobian"] + L["factorise"])
        own = L["newton_solve"] - inner
        parts.append(f"{p['name']}: {1e6 * step:.2f} µs per step, of which "
                     + ", ".join(f"{k} {100 * v / step:.0f} %" for k, v in top)
                     + f" ({p['iterations']:.2f} iterations, {p['jacobians']:.2f} Jacobians per step); at one "
                     f"state its Newton loop spends {1e6 * own:.2f} µs ({1e6 * own / max(f['iterations'], 1):.2f} µs "
                     f"per iteration) outside the timed parts, the turn of carried factors "
                     f"{1e6 * L['turn']:.2f} µs and the weights {1e6 * L['weights']:.3f} µs of it per iteration")
    per_iter = 1e6 * loops["quick"][100000]
    return ("; ".join(parts) + f". XLA's bare loop costs {per_iter:.4f} µs per iteration, three orders of "
            "magnitude below that per-iteration rest: the rest is not loop overhead but the work the compiled "
            "Newton loop does around the parts — convergence tests and weights, the chord-rate bookkeeping, "
            "the conditionals (`lax.cond` of the chord, `run_if` of the Newton correction) and the carry they "
            "pass through (the factors, the history, x and its backups), the turn of carried factors — plus "
            "the advance to the new state and the trend outside it and what the run adds per step (outputs, "
            "diagnostics between chunks: run minus bare step). Parts timed alone may also run faster than "
            "inside the one-kernel Newton loop; the split at one state bounds that.")


if __name__ == "__main__":
    main()
