"""Benchmark: an ensemble of 1,000 heavy tops with perturbed spin, cs.simulate_batch against a
Python loop of single cs.simulate calls and against MuJoCo's batched rollout, on one core and on
two, in the same run.

    python benchmarks/ensemble.py     # writes benchmarks/results/ensemble.md

Pinned to CPU 0 at start (os.sched_setaffinity, and OpenBLAS to one thread); the two-core runs
below in processes of their own, and MuJoCo's two-thread rollout on CPUs 0 and 1. Run it without
``taskset -c 0``, which would confine those too. Every member is ``conserve.problems.HeavyTop``
with its spin about the figure axis raised by ε·ω_s, ε evenly in [−1 %, +1 %]; T = 1 s at
Δt = 1e-3 (1,000 steps), director backend, default options but
``compile="optimized"`` (``COMPILE``) on both sides.

* loop: ``cs.simulate`` of one member after another (the same assembly with the member's initial
  state, so every call reuses the one compiled chunk); wall time per call, the mean over the
  first ``LOOP`` members after a warm-up call, times the number of members.
* ensemble: ``cs.simulate_batch(assembly, T, dt, initial_states=..., workers=1)`` (in this
  process, on its core): the first call's wall
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

Two cores (skipped on a one-core machine): the library's own ``cs.simulate_batch(...,
workers=2)`` of all members, called with this process allowed CPUs 0 and 1 (its spawned workers
inherit that; conserve gives each one thread), three times: new workers with jax's persistent
compilation cache empty (a fresh directory: each worker traces and compiles), new workers with it
warm (each worker traces and loads the compiled programs), and the workers conserve kept from
the call before (nothing to start, import or compile); wall time of the call, process start
included, and the slower worker's own run time (its members' steps and Solutions, without start
and compilation). For comparison, one spawned process on CPUs 0
and 1 running ``cs.simulate_batch`` of all members in-process (what XLA's threads make of two
cores). The issue's target: 1,000 tops on two cores ≥ 1.8× the throughput of the loop of single
runs on one core.

MuJoCo (optional, ``pip install -e '.[bench]'``): the same 1,000 tops (the MJCF ball-joint top of
benchmarks/heavy_top.py, each member's body-frame angular velocity R0ᵀω + ε ω_s e3), RK4 at the
same Δt, ``mujoco.rollout.rollout`` of all members for 1,000 steps: with one MjData (the calling
thread, pinned to CPU 0) and with two (a pool of two threads, CPUs 0 and 1 allowed); best of
``MJ_REPEATS``; E0 of three members against conserve's. Semi-implicit Euler diverges for this
top at these steps (benchmarks/results/heavy_top.md) and is not run. MJX (JAX MuJoCo): no
``mujoco-mjx`` release matches MuJoCo 4 (the newest on the index here is 3.17.0), so it is not run.

Same results: the looped members against the ensemble's, max |Δq| over the first 10 steps and
over the whole run (both solve every step to the Newton tolerance, which leaves Δq open to
~1e-17 and the velocities 2Δq/h to ~2e-14, and the fast top amplifies differences ~10⁴-fold
over 200 steps; see tests/test_ensemble.py); the energy error max |E − E0|/|E0| of every member.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _peers import import_mujoco, mujoco_energy, mujoco_state, pin_to_core0, pin_to_cores, rollout

import conserve as cs
from conserve.problems import HeavyTop
from conserve.run.workers import shut_down

OUT = Path(__file__).parent / "results" / "ensemble.md"
MEMBERS, LOOP, T, DT = 1000, 50, 1.0, 1e-3
SHORT = (0.01, 0.1)  # s, the shorter runs of the by-length table
#: one code generation for every run timed against another (``compile="auto"``, the default,
#: would pick by each call's length): "optimized", the one long runs get, whose Newton loops solve
#: by Gauss–Jordan in XLA operations in single runs and ensembles alike
COMPILE = "optimized"
MJ_REPEATS = 3  # MuJoCo rollouts of the whole ensemble per thread count (best kept)
TWO_CORES = {0, 1}
TARGET_TWO_CORES = 1.8  # the target: two cores ≥ 1.8× a loop of single runs on one core


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
    cs.simulate_batch(assembly, t_end, DT, initial_states=members, backend=backend, compile=COMPILE, workers=1)
    batches = []
    for _ in range(3):
        tic = time.perf_counter()
        cs.simulate_batch(assembly, t_end, DT, initial_states=members, backend=backend, compile=COMPILE, workers=1)
        batches.append(time.perf_counter() - tic)
    return float(np.mean(walls)), float(np.median(batches))


def _worker(cores, lo, hi, n, barrier, results):
    """A spawned process pinned to ``cores`` before jax starts (so XLA and OpenBLAS size their
    thread pools for them): cs.simulate_batch of members lo…hi of n, compiled and warmed before the
    barrier, the timed call after it."""
    pin_to_cores(cores)
    assembly = HeavyTop().system().assemble()
    members = states(assembly, n)[lo:hi]
    cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE, workers=1)
    barrier.wait()
    tic = time.perf_counter()
    cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE, workers=1)
    results.put(time.perf_counter() - tic)


def spawned(jobs):
    """(wall s from the barrier until every job is done, [each job's own s]) of one spawned process
    per job (cores, first member, end member), all started together at a barrier."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(len(jobs) + 1), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(cores, lo, hi, MEMBERS, barrier, results)) for cores, lo, hi in jobs]
    for p in procs:
        p.start()
    barrier.wait(timeout=900)
    tic = time.perf_counter()
    walls = [results.get(timeout=900) for _ in procs]
    wall = time.perf_counter() - tic
    for p in procs:
        p.join()
    return wall, walls


def two_core_batch():
    """Wall time s of cs.simulate_batch of all members in a process pinned to both cores from its
    start (XLA's and OpenBLAS's threads on both)."""
    return spawned([(TWO_CORES, 0, MEMBERS)])[0]


def two_workers(assembly, members):
    """[(wall s, slower worker's run s, the Ensemble)] of cs.simulate_batch(workers=2), this
    process allowed both cores: new workers with the compilation cache empty (a fresh directory),
    new workers with it warm, and the workers kept from the call before."""
    cs.enable_compilation_cache(tempfile.mkdtemp(prefix="conserve-ensemble-bench-"))
    pin_to_cores(TWO_CORES)
    try:
        out = []
        for kept in (False, False, True):
            if not kept:
                shut_down()
            tic = time.perf_counter()
            ensemble = cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE, workers=2)
            out.append((time.perf_counter() - tic, max(ensemble.stats["worker_run_times"]), ensemble))
        return out
    finally:
        shut_down()
        pin_to_core0()


def mujoco_members(mj):
    """(model, (MEMBERS, nstate) initial states): the MJCF top of heavy_top.py, RK4 at DT, each
    member's body-frame angular velocity R0ᵀω + ε ω_s e3 (the spin of ``states``)."""
    import heavy_top as ht
    model, state0, _ = ht.mujoco_top(mj, DT, "RK4")
    data = mj.MjData(model)
    mj.mj_setState(model, data, state0, mj.mjtState.mjSTATE_FULLPHYSICS)
    base = data.qvel.copy()
    out = []
    for eps in np.linspace(-0.01, 0.01, MEMBERS):
        data.qvel[:] = base + eps * HeavyTop().omega_s * np.array([0.0, 0.0, 1.0])
        out.append(mujoco_state(mj, model, data))
    return model, np.array(out)


def mujoco_ensemble(mj):
    """{threads: best wall s} of the whole ensemble's rollout (1 thread pinned to CPU 0, 2 threads
    on both cores), E0 of members 0, MEMBERS//2, MEMBERS−1, and the largest energy error of those."""
    model, members = mujoco_members(mj)
    steps = round(T / DT)
    walls = {1: min(rollout(mj, model, members, steps)[0] for _ in range(MJ_REPEATS))}
    if os.cpu_count() >= 2:
        pin_to_cores(TWO_CORES)
        try:
            walls[2] = min(rollout(mj, model, members, steps, threads=2)[0] for _ in range(MJ_REPEATS))
        finally:
            pin_to_core0()
    picked = [0, MEMBERS // 2, MEMBERS - 1]
    out = rollout(mj, model, members[picked], steps)[1]
    E = [mujoco_energy(mj, model, np.concatenate([members[k][None], out[i]])) for i, k in enumerate(picked)]
    drift = max(float(np.max(np.abs(e - e[0])) / abs(e[0])) for e in E)
    return walls, dict(zip(picked, (float(e[0]) for e in E))), drift


def cores_and_mujoco(loop_total, wall, batch_two, library_two, mj, mj_walls, mj_E0, mj_drift, ensemble):
    """The section on two cores and MuJoCo: wall time, per member-step and throughput against the
    loop of cs.simulate on one core, for every way of running the 1,000 tops."""
    steps = MEMBERS * round(T / DT)
    rows = [("loop of cs.simulate (as above)", 1, loop_total), ("cs.simulate_batch, compiled (as above)", 1, wall)]
    if batch_two is not None:
        rows.append(("cs.simulate_batch in one process on CPUs 0 and 1 (XLA's threads)", 2, batch_two))
        for how, (w, run, _) in zip(("new workers, compilation cache empty", "new workers, compilation cache warm",
                                     "the workers kept from the call before"), library_two):
            rows += [(f"cs.simulate_batch(workers=2), {how}", 2, w),
                     ("(of which the slower worker's run, without process start and compilation)", 2, run)]
    for threads, w in mj_walls.items():
        rows.append((f"MuJoCo RK4, `mujoco.rollout` of all members, {threads} thread{'s' * (threads > 1)}",
                     threads, w))
    lines = ["## Two cores, and MuJoCo", "",
             "Throughput = the loop of single cs.simulate runs on one core (its wall time for all members) ÷ the "
             "wall time of the run. MuJoCo: RK4 (fourth order, not energy-conserving) at the same Δt.", "",
             "| run | cores | wall time | per member-step | throughput ÷ loop on one core |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {c} | {w:.2f} s | {w / steps * 1e6:.2f} µs | {loop_total / w:.2f}× |" for name, c, w in rows]
    lines.append("")
    if batch_two is not None:
        (cold, cold_run, parallel), (warm, warm_run, _), (kept, run, _) = library_two
        ok = loop_total / kept >= TARGET_TWO_CORES
        same = max(float(np.max(np.abs(a.q - b.q))) for a, b in zip(parallel, ensemble))
        lines += [f"The issue's target, 1,000 tops on two cores ≥ {TARGET_TWO_CORES:g}× a loop of single runs on one "
                  f"core: **{loop_total / kept:.2f}×** with the workers kept from a call before (`workers=2`, the "
                  f"whole call); {loop_total / warm:.2f}× starting new workers with a warm compilation cache, "
                  f"{loop_total / cold:.2f}× with an empty one; {loop_total / run:.2f}× counting the slower "
                  f"worker's run alone: {'met' if ok else 'not met'} (kept workers). Starting two workers (a new "
                  f"Python importing conserve and jax, tracing, compiling or loading): {warm - warm_run:.1f} s beyond "
                  f"their runs with a warm cache, {cold - cold_run:.1f} s with an empty one; a call on kept workers "
                  f"spends {kept - run:.1f} s beyond the slower worker's run (sending the members, and the "
                  f"Solutions back). Each worker loops single runs (the director backend, ≥ `LOOP_STEPS` steps), so "
                  f"its members are those single runs: max |Δq| against the one-core ensemble's {same:.1e} m"
                  + (f"; MuJoCo's rollout gained {mj_walls[1] / mj_walls[2]:.2f}× from its second thread"
                     if 2 in mj_walls else "") + ".", ""]
    if mj is None:
        return lines + ["MuJoCo not installed (pip install -e '.[bench]').", ""]
    E0 = {k: float(ensemble[k].energy.total[0]) for k in mj_E0}
    dE0 = max(abs(mj_E0[k] - E0[k]) / abs(E0[k]) for k in mj_E0)
    lines += [f"conserve's ensemble per member-step ÷ MuJoCo RK4's, one core: **{wall / mj_walls[1]:.2f}×**"
              + (f"; conserve's workers=2 (kept workers) ÷ MuJoCo RK4 on two threads: "
                 f"**{library_two[2][0] / mj_walls[2]:.2f}×**" if 2 in mj_walls and batch_two else "")
              + f". Same members: E0 of members {', '.join(map(str, mj_E0))} differ by at most {dE0:.1e} relative "
              f"between the codes; MuJoCo RK4's energy error over the run of those members ≤ {mj_drift:.1e} "
              "(conserve's: above).", ""]
    return lines


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
    compile_time = cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE,
                                     workers=1).stats["compile_time"]
    first = time.perf_counter() - tic
    tic = time.perf_counter()
    ensemble = cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE, workers=1)
    wall = time.perf_counter() - tic

    simulate_module = sys.modules["conserve.run.chunks"]  # where members_per_group reads GROUP_BYTES
    group = simulate_module.members_per_group(cs.backends.director.unknowns(assembly.model))
    default_bytes, simulate_module.GROUP_BYTES = simulate_module.GROUP_BYTES, 10**12  # all members in one group
    cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE, workers=1)
    tic = time.perf_counter()
    cs.simulate_batch(assembly, T, DT, initial_states=members, compile=COMPILE, workers=1)
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
    two = os.cpu_count() >= 2
    batch_two = two_core_batch() if two else None
    library_two = two_workers(assembly, members) if two else None
    mj = import_mujoco()
    mj_walls, mj_E0, mj_drift = mujoco_ensemble(mj) if mj is not None else ({}, {}, None)
    lines = [
        "# Ensemble: 1,000 heavy tops, cs.simulate_batch vs a loop of cs.simulate and MuJoCo's rollout", "",
        f"Same machine, same run, pinned to CPU {sorted(os.sched_getaffinity(0))} (os.sched_setaffinity; "
        "run with `python benchmarks/ensemble.py`; the two-core runs on CPUs 0 and 1), "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}, load average at start "
        f"{load:.2f}; conserve {cs.__version__}, jax {jax.__version__}, "
        f"MuJoCo {mj.__version__ if mj else 'not installed'}. {MEMBERS} members, T = {T:g} s, "
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
    lines += cores_and_mujoco(loop_total, wall, batch_two, library_two, mj, mj_walls, mj_E0, mj_drift, ensemble)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
