"""Benchmark: work against precision — conserve order 2, 4 and 6, fixed and adaptive steps, against
scipy DOP853 and against each other (issue 18).

    taskset -c 0 python benchmarks/work_precision.py   # ~4 min; writes benchmarks/results/work_precision.{md,png}
    python benchmarks/work_precision.py --quick        # fewer points, prints only

Pinned to CPU 0 at start (``_peers.pin_to_core0``; on this shared 2-core machine unpinned jax
timings vary 3–100×). All methods in one process, best of 3 whole-run times after compilation;
conserve compiled ``compile="optimized"`` (XLA's faster code, ``conserve.compilation``).

* **P3a spacecraft** (hybrid wheels, motor torques), T = 20 s. Error = core attitude error
  ‖R(T) − R_ref(T)‖_F against scipy DOP853 at rtol 1e-12 on the gyrostat equations (the
  reference of ``benchmarks/spacecraft.py``, whose functions are reused). Peer: DOP853 on the
  same hand-written gyrostat equations (Python right-hand side) over a sweep of tolerances.
* **P1 heavy top**, T = 2 s. Error = azimuth error of the centre of mass against the exact steady
  precession (``benchmarks/heavy_top.py``). Peer: DOP853 on Euler's equations of the top.
* **P5 crane** (hybrid winch), T = 10 s. Error = the load's position at T against conserve order 4
  at Δt = 5e-4 (which differs from Δt = 1e-3 by 3e-11 m). Peer: conserve's fixed order-2 step.
* **Eccentric orbit** (``conserve.problems.KeplerOrbit``, e = 0.9), one period. Error = the largest
  distance of the centre of mass from the exact Kepler ellipse over the nodes. Peer: the fixed step.
* conserve: ``simulate(..., order=2|4|6)`` over a sweep of Δt (the energy-momentum step and its
  compositions, :mod:`conserve.backends.compose`) and ``simulate(..., dt="adaptive")`` over a sweep
  of rtol (atol = 1e-2 rtol; ``conserve.run.adaptive``: the history error estimate for order 2, step
  doubling for order 4); energy balance reported.

The cost of each method at the study's target error is interpolated log-log between the two runs
that bracket it (not extrapolated). Targets: conserve at most as slow as DOP853 at error 1e-8
(P3a, P1); adaptive steps faster than fixed ones at 1e-4 (crane, orbit).
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
import heavy_top as ht  # noqa: E402
import spacecraft as sc  # noqa: E402
from _peers import pin_to_core0  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.problems import HeavyTop, KeplerOrbit, RotaryCrane, spacecraft  # noqa: E402

OUT = Path(__file__).parent / "results" / "work_precision"
COMPILE = "optimized"


def timed_conserve(assembly, t_end, dt, order, error, repeats, rtol=None):
    """(error, best run time s, energy-balance error relative) of one conserve setting (dt a step in
    s, or "adaptive" with ``rtol``)."""
    options = {"order": order, "compile": COMPILE}
    if dt == "adaptive":
        options.update(rtol=rtol, atol=1e-2 * rtol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cs.CoarseStepWarning)
        runs = [cs.simulate(assembly, t_end, dt, **options) for _ in range(repeats + 1)][1:]  # (the first compiles)
    best = min(runs, key=lambda s: s.stats["run_time"])
    balance = float(np.max(np.abs(best.energy_balance_error)) / abs(best.energy.total[0]))
    return error(best), best.stats["run_time"], balance


def at_target(points, target):
    """Wall time at error ``target``, log-log interpolated between the bracketing points, or None."""
    pts = sorted((e, w) for e, w, *_ in points if np.isfinite(e) and e > 0)
    for (e0, w0), (e1, w1) in zip(pts, pts[1:]):
        if e0 <= target <= e1:
            f = np.log(target / e0) / np.log(e1 / e0)
            return float(np.exp(np.log(w0) + f * np.log(w1 / w0)))
    return None


def conserve_sweeps(label, assembly, t_end, error, sweeps, quick, repeats, log, adaptive=()):
    """{"conserve order k": [(error, run time, balance, setting)]} over the step sizes of each order,
    and {"conserve order k, adaptive": …} over the tolerances of ``adaptive`` ((order, rtols), …)."""
    methods = {}
    for order, dts in sweeps:
        rows = []
        for dt in (dts[::2] if quick else dts):
            log(f"{label} conserve order {order} dt={dt:g} ...")
            rows.append((*timed_conserve(assembly, t_end, dt, order, error, repeats), f"Δt = {dt:g}"))
        methods[f"conserve order {order}"] = rows
    for order, rtols in adaptive:
        rows = []
        for rtol in (rtols[::2] if quick else rtols):
            log(f"{label} conserve order {order} adaptive rtol={rtol:g} ...")
            rows.append((*timed_conserve(assembly, t_end, "adaptive", order, error, repeats, rtol), f"rtol = {rtol:g}"))
        methods[f"conserve order {order}, adaptive"] = rows
    return methods


def spacecraft_study(quick, repeats, log):
    R_ref = sc.run_dop(True, 1e-12, 1e-14)["R"]
    assembly = spacecraft(model="hybrid", motors=True).assemble()
    error = lambda sol: sc.err(sol["core"].rotation[-1], R_ref)  # noqa: E731
    methods = conserve_sweeps("P3a", assembly, sc.T_END, error,
                              ((2, (2e-2, 1e-2, 5e-3, 2.5e-3, 1.25e-3, 6.25e-4, 3.125e-4)),
                               (4, (0.2, 0.1, 0.05, 0.025, 0.0125)), (6, (1.0, 0.5, 0.25, 0.125))),
                              quick, repeats, log, adaptive=((2, (1e-6, 1e-7, 1e-8, 1e-9, 1e-10)),
                                                             (4, (1e-7, 1e-8, 1e-9, 1e-10, 1e-11))))
    rows = []
    for rtol in (1e-4, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11):
        log(f"P3a DOP853 rtol={rtol:g} ...")
        r = sc.run_dop(True, rtol, rtol * 1e-2, repeats=repeats)
        rows.append((sc.err(r["R"], R_ref), r["wall"], r["balance"], f"rtol = {rtol:g}"))
    methods["scipy DOP853 (gyrostat equations)"] = rows
    return methods


def top_study(quick, repeats, log):
    top = HeavyTop()
    assembly = top.system().assemble()
    error = lambda sol: ht.azimuth_error(sol.t, sol["top"].position)  # noqa: E731
    methods = conserve_sweeps("P1", assembly, ht.T_ACC, error, ((2, (2e-3, 1e-3, 5e-4, 2.5e-4, 1.25e-4)),
                                                               (4, (8e-3, 4e-3, 2e-3, 1e-3, 5e-4, 2.5e-4)),
                                                               (6, (8e-3, 4e-3, 2e-3, 1e-3, 5e-4))),
                              quick, repeats, log, adaptive=((2, (1e-5, 1e-6, 1e-7, 1e-8)),
                                                             (4, (1e-6, 1e-7, 1e-8, 1e-9, 1e-10))))
    rows = []
    for rtol in (1e-6, 1e-8, 1e-10, 1e-12):
        log(f"P1 DOP853 rtol={rtol:g} ...")
        best = None
        for _ in range(repeats):
            res, wall = ht.solve_dop(rtol, ht.T_ACC)
            best = (res, wall) if best is None or wall < best[1] else best
        res, wall = best
        x = top.l * res.y[:9].reshape(3, 3, -1)[:, 2, :].T
        E = ht.energy_dop(res.y)
        rows.append((ht.azimuth_error(res.t, x), wall, ht.energy_error(E), f"rtol = {rtol:g}"))
    methods["scipy DOP853 (Euler's equations)"] = rows
    return methods


def crane_study(quick, repeats, log):
    assembly = RotaryCrane().system("hybrid").assemble()
    t_end = 10.0
    reference = cs.simulate(assembly, t_end, 5e-4, order=4, compile=COMPILE)["load"].position[-1]
    error = lambda sol: float(np.linalg.norm(sol["load"].position[-1] - reference))  # noqa: E731
    return conserve_sweeps("P5", assembly, t_end, error, ((2, (2e-2, 1e-2, 5e-3, 2.5e-3, 1.25e-3, 6.25e-4)),),
                           quick, repeats, log, adaptive=((2, (1e-4, 1e-5, 1e-6, 1e-7, 1e-8)),))


def orbit_study(quick, repeats, log):
    orbit = KeplerOrbit()
    assembly = orbit.system().assemble()
    error = lambda sol: float(np.max(np.linalg.norm(sol["satellite"].position - orbit.position(sol.t), axis=1)))  # noqa: E731
    return conserve_sweeps("orbit", assembly, orbit.period, error,
                           ((2, tuple(orbit.period / np.array([1000, 2000, 4000, 8000, 16000, 32000]))),),
                           quick, repeats, log, adaptive=((2, (1e-4, 1e-5, 1e-6, 1e-7, 1e-8)),))


def table(title, methods, error_name, target, peer_name):
    lines = [f"## {title}", "", f"| method | setting | {error_name} | whole run [ms] | energy balance (relative) |",
             "|---|---|---|---|---|"]
    for name, rows in methods.items():
        lines += [f"| {name} | {s} | {e:.2e} | {1e3 * w:.1f} | {b:.1e} |" for e, w, b, s in rows]
    lines += ["", f"Cost at error {target:g} (log-log interpolation between the bracketing runs):", ""]
    costs = {name: at_target(rows, target) for name, rows in methods.items()}
    peer = costs.get(peer_name)
    for name, c in costs.items():
        compared = c is not None and peer is not None and name != peer_name
        ratio = f", {c / peer:.2f}× {peer_name}" if compared else ""
        lines.append(f"- {name}: " + (f"{1e3 * c:.1f} ms{ratio}" if c is not None else "not bracketed by the runs"))
    return lines, costs


def plot(studies, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, (len(studies) + 1) // 2, figsize=(11, 8.4))
    for ax, (title, (methods, error_name, target, _)) in zip(np.ravel(axes), studies.items()):
        for name, rows in methods.items():
            e, w = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
            ax.loglog(1e3 * w, e, "o-", label=name)
        ax.axhline(target, color="0.6", lw=0.8, ls="--")
        ax.set_xlabel("whole run [ms] (pinned, after compilation)")
        ax.set_ylabel(error_name)
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="half the points, one repeat, print only")
    args = ap.parse_args()
    pin_to_core0()
    repeats = 1 if args.quick else 3
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    load = os.getloadavg()[0]
    tic = time.perf_counter()
    dop_p3, dop_p1 = "scipy DOP853 (gyrostat equations)", "scipy DOP853 (Euler's equations)"
    studies = {"P3a spacecraft, T = 20 s": (spacecraft_study(args.quick, repeats, log), "core attitude error",
                                            1e-8, dop_p3),
               "P1 heavy top, T = 2 s": (top_study(args.quick, repeats, log), "azimuth error [rad]", 1e-8, dop_p1),
               "P5 crane (hybrid winch), T = 10 s": (crane_study(args.quick, repeats, log), "load position error [m]",
                                                     1e-4, "conserve order 2"),
               "Eccentric orbit (e = 0.9), one period": (orbit_study(args.quick, repeats, log),
                                                         "max position error", 1e-4, "conserve order 2")}
    lines = ["# Work against precision: conserve orders 2, 4, 6 and adaptive steps vs scipy DOP853", "",
             f"One run of `python benchmarks/work_precision.py`{' --quick' if args.quick else ''}, pinned to CPU 0, "
             f"load average at start {load:.2f}, {time.perf_counter() - tic:.0f} s in all; conserve "
             f"{cs.__version__ if hasattr(cs, '__version__') else ''}. Whole-run times best of {repeats}, after "
             "compilation. Method details in the script's docstring.", ""]
    summary = []
    for title, (methods, error_name, target, peer) in studies.items():
        part, costs = table(title, methods, error_name, target, peer)
        lines += part + [""]
        summary.append((title, costs))
    if not args.quick:
        plot(studies, OUT.with_suffix(".png"))
        lines += [f"![work-precision]({OUT.with_suffix('.png').name})", ""]
        OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
