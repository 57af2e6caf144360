"""Benchmark: accuracy per cost on smooth chains — the 4- and 32-link spherical chains of
benchmarks/chain_scaling.py over T = 1 s, the whole-run time each method needs for a given tip
accuracy: conserve at orders 2, 4 and 6 (fixed steps) and with adaptive steps (orders 2 and 4)
against MuJoCo's RK4, in the same run.

    taskset -c 0 python benchmarks/chain_accuracy.py [--sizes 4 32] [--target 1e-6] [--repeats 3] [--quick]

Writes benchmarks/results/chain_accuracy.md and chain_accuracy.png (``--quick``: every other
setting, one repeat, prints only). Pinned to CPU 0 at start (``_peers.pin_to_core0``).

* The chains: ``chain_scaling.chain(n)`` (bars of 0.5 m and 1 kg on spherical joints, hung tilted
  by 0.3 rad and spinning at 1 rad/s about the vertical, gravity), in MuJoCo the MJCF of
  ``chain_scaling.mjcf_chain`` (nested bodies on ball joints, E0 equal to conserve's to round-off,
  benchmarks/results/chain_scaling.md).
* Error: ‖x_tip(T) − x_tip,ref(T)‖ in m, the far end of the last bar at T = 1 s. Reference:
  conserve at order 6 with Δt = ``REF_DT`` (5e-3), checked against MuJoCo RK4 at Δt = 5e-5 (their
  distance is reported; both are far below the target).
* conserve: ``simulate(..., order=2|4|6, compile="optimized")`` over a sweep of Δt, and
  ``simulate(..., dt="adaptive", order=2|4, rtol=…, atol=1e-2 rtol)`` over a sweep of rtol. Cost
  = ``sol.stats["run_time"]`` (the compiled run; compilation by a first call per setting is not
  counted, nor the call's fixed cost of checks and building the Solution, ~1–2 ms).
* MuJoCo RK4 (optional, ``pip install -e '.[bench]'``) over a sweep of Δt: cost = the wall time of
  one ``mujoco.rollout.rollout`` call of the whole run on the calling thread (setup, MJCF
  compilation, not counted). A run whose energy grows past 100 % is marked unstable.
* Every setting is run once per round in ``--repeats`` (3) rounds over all settings of one chain,
  best kept (a noisy minute of a shared machine then slows all alike). The cost at the target
  error is interpolated log-log between the two runs that bracket it, as benchmarks/work_precision.py
  does (not extrapolated: "not bracketed" otherwise).

The issue's target: at equal tip accuracy the best conserve method ≤ 1.0× MuJoCo RK4's whole-run
time on both chains. Energy errors (max |E − E0|/|E0| over the run) are reported beside: conserve's
stay at round-off for every step size, RK4's follow its step.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import chain_scaling as chains  # noqa: E402
from _peers import cpu_name, import_mujoco, mujoco_energy, mujoco_positions, pin_to_core0, rollout  # noqa: E402
from work_precision import at_target  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.errors import ConvergenceError  # noqa: E402

OUT = Path(__file__).parent / "results" / "chain_accuracy"
T = 1.0
COMPILE = "optimized"
REF_DT, MJ_CHECK_DT = 5e-3, 5e-5
#: sweeps: fixed Δt per order, rtol per adaptive order, Δt for MuJoCo RK4 (chosen to bracket 1e-6 m on both chains)
FIXED = {2: (4e-3, 2e-3, 1e-3, 5e-4), 4: (0.2, 0.1, 0.05, 0.02, 0.01), 6: (0.2, 0.1, 0.05)}
ADAPTIVE = {2: (1e-5, 1e-6, 1e-7, 1e-8), 4: (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)}
MJ_DTS = (0.05, 0.02, 0.01, 0.005)
TARGET_RATIO = 1.0  # the target: best conserve ≤ 1.0× MuJoCo RK4 at equal tip accuracy


def tip(sol, n):
    return chains.conserve_tip(sol, n)[-1]


def energy_error(E):
    E = np.asarray(E)
    return float(np.max(np.abs(E - E[0])) / abs(E[0]))


class ConserveRun:
    """One conserve setting: ``dt`` a step in s (order 2, 4, 6) or "adaptive" with ``rtol``."""

    def __init__(self, assembly, n, order, dt, rtol=None):
        self.assembly, self.n, self.order, self.dt, self.rtol = assembly, n, order, dt, rtol
        self.method = f"conserve order {order}" + (", adaptive" if dt == "adaptive" else "")
        self.setting = f"rtol = {rtol:g}" if dt == "adaptive" else f"Δt = {dt:g}"
        self.best, self.result = np.inf, None

    def run(self):
        options = {"order": self.order, "compile": COMPILE}
        if self.dt == "adaptive":
            options.update(rtol=self.rtol, atol=1e-2 * self.rtol)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cs.CoarseStepWarning)
            try:
                sol = cs.simulate(self.assembly, T, self.dt, **options)
            except ConvergenceError as e:
                self.result = {"failed": str(e).split(". Kept")[0]}
                return
        self.best = min(self.best, sol.stats["run_time"])
        if self.result is None:
            self.result = {"tip": tip(sol, self.n), "steps": sol.stats["steps"],
                           "drift": energy_error(sol.energy.total)}


class MujocoRun:
    """MuJoCo RK4 at step ``dt``."""

    def __init__(self, mj, n, dt):
        self.mj, self.n, self.dt = mj, n, dt
        self.method, self.setting = "MuJoCo RK4", f"Δt = {dt:g}"
        self.model, self.state0, _ = chains.mujoco_chain(mj, n, dt, "RK4")
        self.best, self.result = np.inf, None

    def run(self):
        steps = round(T / self.dt)
        wall, states = rollout(self.mj, self.model, self.state0, steps)
        self.best = min(self.best, wall)
        if self.result is None:
            nodes = np.concatenate([self.state0[None], states[0]])
            E = mujoco_energy(self.mj, self.model, nodes)
            self.result = {"tip": mujoco_positions(self.mj, self.model, nodes[-1:], ("site", "tip"))[0],
                           "steps": steps, "drift": energy_error(E) if np.all(np.isfinite(E)) else np.inf}


def study(n, args, mj, log):
    """Rows (method, setting, error m, best whole-run s, steps, energy error) of the n-link chain, the
    reference's check against MuJoCo and the reference's own cost."""
    assembly = chains.chain(n).assemble()
    take = (lambda xs: xs[::2]) if args.quick else (lambda xs: xs)
    runs = [ConserveRun(assembly, n, k, dt) for k, dts in FIXED.items() for dt in take(dts)]
    runs += [ConserveRun(assembly, n, k, "adaptive", rtol) for k, rtols in ADAPTIVE.items() for rtol in take(rtols)]
    runs += [MujocoRun(mj, n, dt) for dt in take(MJ_DTS)] if mj is not None else []
    log(f"N = {n}: reference (order 6, Δt = {REF_DT:g}) ...")
    reference = ConserveRun(assembly, n, 6, REF_DT)
    reference.run()
    reference.run()
    ref = reference.result["tip"]
    check = None
    if mj is not None:
        model, state0, _ = chains.mujoco_chain(mj, n, MJ_CHECK_DT, "RK4")
        states = rollout(mj, model, state0, round(T / MJ_CHECK_DT))[1]
        check = float(np.linalg.norm(mujoco_positions(mj, model, states[0, -1:], ("site", "tip"))[0] - ref))
    for r in runs:  # the first call of each setting compiles (conserve) or warms up; not timed
        log(f"N = {n}: {r.method} {r.setting} ...")
        r.run()
        r.best = np.inf
    for _ in range(args.repeats):
        for r in runs:
            if "failed" not in r.result:
                r.run()
    rows = []
    for r in runs:
        if "failed" in r.result:
            rows.append((r.method, r.setting, np.nan, np.nan, None, np.nan, r.result["failed"]))
            continue
        err = float(np.linalg.norm(r.result["tip"] - ref))
        note = "unstable (energy error > 100 %)" if r.result["drift"] > 1 else ""
        rows.append((r.method, r.setting, err, r.best, r.result["steps"], r.result["drift"], note))
    return rows, check, reference.best


def cost_lines(n, rows, target):
    """Costs at the target per method, and the ratio best conserve ÷ MuJoCo RK4."""
    methods = {}
    for method, _, err, wall, *_ in rows:
        if np.isfinite(err):
            methods.setdefault(method, []).append((err, wall))
    costs = {m: at_target(points, target) for m, points in methods.items()}
    lines = [f"Whole-run time at tip error {target:g} m (log-log interpolation between the bracketing runs):", ""]
    lines += [f"- {m}: " + (f"{1e3 * c:.2f} ms" if c is not None else "not bracketed by the runs")
              for m, c in costs.items()]
    conserve = {m: c for m, c in costs.items() if m.startswith("conserve") and c is not None}
    peer = costs.get("MuJoCo RK4")
    ratio = None
    if conserve and peer is not None:
        best = min(conserve, key=conserve.get)
        ratio = conserve[best] / peer
        lines += ["", f"Best conserve ({best}, {1e3 * conserve[best]:.2f} ms) ÷ MuJoCo RK4 ({1e3 * peer:.2f} ms): "
                  f"**{ratio:.2f}×** (the issue's target ≤ {TARGET_RATIO:g}: "
                  f"{'met' if ratio <= TARGET_RATIO else 'not met'})."]
    return lines + [""], ratio


def plot(results, target, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(5.6 * len(results), 4.4), squeeze=False)
    for ax, (n, rows) in zip(axes[0], results.items()):
        methods = {}
        for method, _, err, wall, *_ in rows:
            if np.isfinite(err) and err < 1:
                methods.setdefault(method, []).append((1e3 * wall, err))
        for method, pts in methods.items():
            ax.loglog(*zip(*sorted(pts)), "o-" if method.startswith("conserve") else "s--", label=method)
        ax.axhline(target, color="0.6", lw=0.8, ls="--")
        ax.set_xlabel("whole run T = 1 s [ms] (pinned, after compilation)")
        ax.set_ylabel("tip error at T [m]")
        ax.set_title(f"{n}-link chain")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 32])
    ap.add_argument("--target", type=float, default=1e-6, help="tip error at T, m")
    ap.add_argument("--repeats", type=int, default=3, help="rounds over all settings (best kept)")
    ap.add_argument("--quick", action="store_true", help="every other setting, one round, print only")
    args = ap.parse_args()
    if args.quick:
        args.repeats = 1
    pin_to_core0()
    mj = import_mujoco()
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    import jax
    lines = ["# Accuracy per cost on smooth chains: conserve orders 2, 4, 6 and adaptive steps vs MuJoCo RK4", "",
             f"`taskset -c 0 python benchmarks/chain_accuracy.py --sizes {' '.join(map(str, args.sizes))}"
             f"{' --quick' if args.quick else ''}`, pinned to CPU {sorted(os.sched_getaffinity(0))}. "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}, {cpu_name()}, "
             f"{os.cpu_count()} cores, load average at start "
             f"{os.getloadavg()[0]:.2f} (1 min); conserve {cs.__version__}, jax {jax.__version__}, "
             f"MuJoCo {mj.__version__ if mj else 'not installed'}. T = {T:g} s; error = ‖x_tip(T) − x_tip,ref(T)‖ "
             f"against conserve order 6 at Δt = {REF_DT:g}; cost = whole run after compilation (conserve: "
             "`sol.stats['run_time']`; MuJoCo: one `mujoco.rollout` call on the calling thread), best of "
             f"{args.repeats} rounds over all settings. Method details in the script's docstring.", ""]
    tic = time.perf_counter()
    results, ratios = {}, {}
    for n in args.sizes:
        rows, check, ref_cost = study(n, args, mj, log)
        results[n] = rows
        lines += [f"## {n}-link chain", "",
                  f"Reference: conserve order 6 at Δt = {REF_DT:g} ({1e3 * ref_cost:.0f} ms)"
                  + (f"; MuJoCo RK4 at Δt = {MJ_CHECK_DT:g} differs from it by {check:.1e} m at T." if check is not None
                     else "."), "",
                  "| method | setting | steps | tip error [m] | whole run [ms] | energy error | note |",
                  "|---|---|---|---|---|---|---|"]
        for method, setting, err, wall, steps, drift, note in rows:
            if not np.isfinite(err):
                lines.append(f"| {method} | {setting} | — | — | — | — | failed: {note} |")
                continue
            lines.append(f"| {method} | {setting} | {steps} | {err:.2e} | {1e3 * wall:.2f} | {drift:.1e} | {note} |")
        part, ratios[n] = cost_lines(n, rows, args.target)
        lines += [""] + part
    summary = ", ".join(f"{n} links: " + (f"**{q:.2f}×**" if q is not None else "not bracketed")
                        for n, q in ratios.items())
    lines += ["## Summary", "", f"Best conserve ÷ MuJoCo RK4, whole-run time at tip error {args.target:g} m: {summary} "
              f"(the issue's target ≤ {TARGET_RATIO:g}×).", ""]
    if not args.quick:
        plot(results, args.target, OUT.with_suffix(".png"))
        lines += [f"![accuracy per cost]({OUT.with_suffix('.png').name})", ""]
    lines += [f"Benchmark wall time: {time.perf_counter() - tic:.0f} s; load average at the end "
              f"{os.getloadavg()[0]:.2f} (1 min).", ""]
    if not args.quick:
        OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
