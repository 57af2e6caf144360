"""Benchmark: an ensemble of 1,000 heavy tops with perturbed spin, cs.simulate_batch against a
Python loop of single cs.simulate calls, in the same run.

    taskset -c 0 python benchmarks/ensemble.py     # writes benchmarks/results/ensemble.md

Pinned to CPU 0 at start (os.sched_setaffinity). Every member is ``conserve.problems.HeavyTop``
with its spin about the figure axis raised by ε·ω_s, ε evenly in [−1 %, +1 %]; T = 1 s at
Δt = 1e-3 (1,000 steps), director backend, default options but
``compile="optimized"`` (``COMPILE``) on both sides.

* loop: ``cs.simulate`` of one member after another (the same assembly with the member's initial
  state, so every call reuses the one compiled chunk); wall time per call, the mean over the
  first ``LOOP`` members after a warm-up call, times the number of members.
* ensemble: ``cs.simulate_batch(assembly, T, dt, initial_states=...)``: the first call's wall
  time (with compilation) and a second call's (compiled; both include building the Solutions);
  and a compiled call with all members vmapped in one group instead of groups of
  ``members_per_group`` (``conserve.run.chunks.GROUP_BYTES`` raised for it).

By backend: the same comparison (T = 1 s, the ensemble's median of three compiled calls) with
``backend="reduced"`` on both sides.

By run length: the same comparison for T = 0.01 s and 0.1 s (10 and 100 steps; the loop's mean
over ``LOOP`` calls, the ensemble's median of three compiled calls), where the fixed cost of a
call (checks, the first node, building the Solution: ~2–3 ms for ``cs.simulate``) weighs more.

Gradient cost: ``jax.grad`` of the top's centre-of-mass x after 200 steps with respect to the
scale of its initial velocity, through ``cs.trajectory`` (an implicit-function solve per step,
each step recomputed in the backward pass), against the forward ``cs.trajectory`` alone; both
jitted, best of 5 after compilation.

Same results: the looped members against the ensemble's, max |Δq| over the first 10 steps and
over the whole run (both solve every step to the Newton tolerance, which leaves Δq open to
~1e-17 and the velocities 2Δq/h to ~2e-14, and the fast top amplifies differences ~10⁴-fold
over 200 steps; see tests/test_ensemble.py); the energy error max |E − E0|/|E0| of every member.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _peers import pin_to_core0

import conserve as cs
from conserve.problems import HeavyTop

OUT = Path(__file__).parent / "results" / "ensemble.md"
MEMBERS, LOOP, T, DT = 1000, 50, 1.0, 1e-3
SHORT = (0.01, 0.1)  # s, the shorter runs of the by-length table
#: one code generation for every run timed against another (``compile="auto"``, the default,
#: would pick by each call's length): "optimized", the one long runs get, whose Newton loops solve
#: by Gauss–Jordan in XLA operations in single runs and ensembles alike
COMPILE = "optimized"


def states(assembly, n):
    """n initial states: the top's spin about its figure axis d3 scaled by 1 + ε, ε in [−1 %, 1 %]."""
    s = assembly.initial_state
    q, v = np.asarray(s.q).reshape(-1, 3), np.asarray(s.v).reshape(-1, 3)
    omega = 0.5 * np.sum(np.cross(q[1:4], v[1:4]), axis=0)
    spin = HeavyTop().omega_s
    return [s._replace(v=jnp.asarray(np.cross(omega + eps * spin * q[3], q).ravel()))
            for eps in np.linspace(-0.01, 0.01, n)]


def energy_error(sol):
    E = sol.energy.total
    return float(np.max(np.abs(E - E[0])) / abs(E[0]))


def gradient_cost(assembly, steps=200, repeats=5):
    """(forward s, gradient s) of the centre x after ``steps`` steps against the velocity scale."""
    model, state = assembly.model, assembly.initial_state

    def centre_x(c):
        return cs.trajectory(model, state._replace(v=c * state.v), 0.0, DT, steps)[0].q[-1, 0]

    times = []
    for f in (jax.jit(centre_x), jax.jit(jax.grad(centre_x))):
        f(1.0).block_until_ready()
        best = np.inf
        for _ in range(repeats):
            tic = time.perf_counter()
            f(1.0).block_until_ready()
            best = min(best, time.perf_counter() - tic)
        times.append(best)
    return times


def short_run(assembly, members, t_end, backend="director"):
    """(mean s per cs.simulate call over LOOP members, median s of 3 compiled cs.simulate_batch calls)
    for a run to t_end."""
    cs.simulate(replace(assembly, initial_state=members[0]), t_end, DT, backend=backend, compile=COMPILE)
    walls = []
    for s in members[:LOOP]:
        tic = time.perf_counter()
        cs.simulate(replace(assembly, initial_state=s), t_end, DT, backend=backend, compile=COMPILE)
        walls.append(time.perf_counter() - tic)
    cs.simulate_batch(assembly, t_end, DT, initial_states=members, backend=backend, compile=COMPILE)
    batches = []
    for _ in range(3):
        tic = time.perf_counter()
        cs.simulate_batch(assembly, t_end, DT, initial_states=members, backend=backend, compile=COMPILE)
        batches.append(time.perf_counter() - tic)
    return float(np.mean(walls)), float(np.median(batches))


def main():
    pin_to_core0()
    load = os.getloadavg()[0]
    assembly = HeavyTop().system().assemble()
    members = states(assembly, MEMBERS)

    tic = time.perf_counter()
    cs.simulate(replace(assembly, initial_state=members[0]), T, DT, compile=COMPILE)
    loop_first = time.perf_counter() - tic
    loop, walls = [], []
    for s in members[:LOOP]:
        tic = time.perf_counter()
        loop.append(cs.simulate(replace(assembly, initial_state=s), T, DT, compile=COMPILE))
        walls.append(time.perf_counter() - tic)
    per_call = float(np.mean(walls))

    tic = time.perf_counter()
    compile_time = cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE).stats["compile_time"]
    first = time.perf_counter() - tic
    tic = time.perf_counter()
    ensemble = cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE)
    wall = time.perf_counter() - tic

    simulate_module = sys.modules["conserve.simulate"]
    group = simulate_module.members_per_group(cs.backends.director.unknowns(assembly.model))
    default_bytes, simulate_module.GROUP_BYTES = simulate_module.GROUP_BYTES, 10**12  # all members in one group
    cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE)
    tic = time.perf_counter()
    cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE)
    one_group = time.perf_counter() - tic
    simulate_module.GROUP_BYTES = default_bytes

    forward, gradient = gradient_cost(assembly)
    by_length = [(t, *short_run(assembly, members, t)) for t in SHORT]
    reduced_call, reduced_batch = short_run(assembly, members, T, "reduced")
    early = max(float(np.max(np.abs(a.q[:11] - b.q[:11]))) for a, b in zip(loop, ensemble))
    whole = max(float(np.max(np.abs(a.q - b.q))) for a, b in zip(loop, ensemble))
    energy = max(energy_error(sol) for sol in ensemble)
    steps = MEMBERS * round(T / DT)
    loop_total = per_call * MEMBERS
    lines = [
        "# Ensemble: 1,000 heavy tops, cs.simulate_batch vs a loop of cs.simulate", "",
        f"Same machine, same run, pinned to CPU {sorted(os.sched_getaffinity(0))} (os.sched_setaffinity; "
        "run with `taskset -c 0 python benchmarks/ensemble.py`), load average at start "
        f"{load:.2f}; conserve {cs.__version__}, jax {jax.__version__}. {MEMBERS} members, T = {T:g} s, "
        f"Δt = {DT:g} ({round(T / DT)} steps each), director backend, compile=\"{COMPILE}\" on both sides. "
        "Details in the docstring of "
        "benchmarks/ensemble.py.", "",
        "| run | wall time | per member | per member-step |",
        "|---|---|---|---|",
        f"| loop of cs.simulate (mean of {LOOP} calls × {MEMBERS}) | {loop_total:.1f} s | {per_call * 1e3:.1f} ms | "
        f"{per_call / round(T / DT) * 1e6:.1f} µs |",
        f"| cs.simulate_batch, first call (with compilation, {compile_time:.1f} s) | {first:.1f} s "
        f"| {first / MEMBERS * 1e3:.1f} ms | {first / steps * 1e6:.1f} µs |",
        f"| cs.simulate_batch, compiled | {wall:.1f} s | {wall / MEMBERS * 1e3:.1f} ms | {wall / steps * 1e6:.1f} µs |",
        f"| (of which the vmapped run) | {ensemble.stats['run_time']:.1f} s | "
        f"{ensemble.stats['run_time'] / MEMBERS * 1e3:.1f} ms | {ensemble.stats['run_time'] / steps * 1e6:.1f} µs |",
        f"| cs.simulate_batch, compiled, all members in one group (not {group}) | {one_group:.1f} s | "
        f"{one_group / MEMBERS * 1e3:.1f} ms | {one_group / steps * 1e6:.1f} µs |",
        "",
        f"Throughput ensemble ÷ loop: **{loop_total / wall:.1f}×** compiled, {(loop_total + loop_first) / first:.1f}× "
        "counting each side's first call (compilation). Target ≥ 20×: "
        f"{'met' if loop_total / wall >= 20 else 'NOT met'}.", "",
        f"Same results: looped members vs the ensemble's, max |Δq| over the first 10 steps {early:.1e} m, over "
        f"the whole run {whole:.1e} m; energy error of every member ≤ {energy:.1e}; "
        f"{len(ensemble.failures)} failed members.", "",
        "Throughput by run length (compiled; the ensemble's chunk is fitted to the run: the power of two ≥ its "
        "steps):", "",
        "| T | steps | loop of cs.simulate, per call | cs.simulate_batch, whole ensemble | throughput ensemble ÷ loop |",
        "|---|---|---|---|---|",
        *[f"| {t:g} s | {round(t / DT)} | {call * 1e3:.2f} ms | {batch:.2f} s | {call * MEMBERS / batch:.1f}× |"
          for t, call, batch in by_length],
        f"| {T:g} s | {round(T / DT)} | {per_call * 1e3:.2f} ms | {wall:.2f} s | {loop_total / wall:.1f}× |", "",
        f"With the reduced backend (3 unknowns per step instead of 21; T = {T:g} s, compiled): a loop of "
        f"cs.simulate {reduced_call / round(T / DT) * 1e6:.1f} µs per step, cs.simulate_batch "
        f"{reduced_batch / steps * 1e6:.1f} µs per member-step: **{reduced_call * MEMBERS / reduced_batch:.1f}×**.", "",
        f"Gradient through 200 steps (cs.trajectory, jax.grad): {gradient * 1e3:.1f} ms against "
        f"{forward * 1e3:.1f} ms forward, **{gradient / forward:.1f}×** (target ≤ 5×: "
        f"{'met' if gradient / forward <= 5 else 'NOT met'}).", ""]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
