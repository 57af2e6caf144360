"""Benchmark: a free ring of N bars (a cycle of bodies that no ground closes) for N = 4 … 64, its
Newton matrix eliminated along the bordered tree against the coloured dense LU: time per step
against N, its log–log slope, energy error.

    taskset -c 0 python benchmarks/free_ring.py [--sizes 4 8 16 32 64] [--repeats 3] [--dt 2e-3] [--no-spatial]

Writes benchmarks/results/free_ring.md. The script pins itself to CPU 0 at start
(os.sched_setaffinity, every thread of the process), so every timing is single-core.

The model: N uniform slender bars (1 m, 1 kg, 1 cm radius) joined in a regular N-gon in the x–y
plane by revolute joints about e3, floating (no ground, no gravity), turning at first rigidly at
ω = (0.3, −0.2, 1.0) rad/s about the origin (the ring then flexes: its joints are free). In 3-D a
planar loop makes 3 of its closing joint's 5 rows redundant (dropped at assembly): 12N
coordinates, 11N − 3 multipliers (6N of the directors' own).

The spatial ring (second table; ``--no-spatial`` skips it): the same bars and start, each
joint's axis tilted, (0.4 cos 3k, 0.4 sin 3k, 1) for joint k, so no row is redundant for N ≥ 7
(for N = 4 2 rows are, dropped) and every joint's 2 axis rows, bilinear in the two bodies'
directors, couple them directly: the cycle is closed by a direct coupling.

* bordered tree: ``Director(linear="auto")``, which finds no tree of nodes (the node graph is a
  cycle) and sets the closing joint's 2 remaining rows aside as the border of a chain of N nodes
  (``conserve.discrete.linear.BorderedTree``: block elimination along the chain, then the 2 × 2
  Schur complement; O(N) per step); for the spatial ring one body with the rows that touch it
  (12 + 6 + 2·5 = 28 unknowns), a chain of N − 1 nodes and a 28 × 28 Schur complement.
* coloured dense LU: what "auto" chose for such a ring before (``Coloured``: the Jacobian from
  coloured directional derivatives, dense LU of all 23N − 3 unknowns; O(N³) per step), given as
  ``Director(linear=...)``.

Both ``compile="optimized"``. Time per step = ``sol.stats['time_per_step']`` of a run of
``steps(N)`` = clip(2000/N, 10, 200) steps of ``--dt`` after a one-step call that compiles; per N
both methods run once per round in ``--repeats`` rounds, best round kept. Energy error = max
|E − E0|/E0 over the timed run (E is kinetic only). The log–log slope of µs/step against N is a
least-squares fit over N = 8 … 64.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import conserve as cs
from conserve.backends.director import Director, linear_solver
from conserve.problems import _bar

from _peers import loglog_slope, pin_to_core0, write_report

OUT = Path(__file__).parent / "results" / "free_ring.md"
SPIN = (0.3, -0.2, 1.0)
COMPILE = "optimized"
SLOPE_RANGE = (8, 64)
KEYS = ("bordered tree", "coloured dense LU")


def free_ring(n, spatial=False):
    """The ring of n bars (see the module docstring; ``spatial``: the tilted axes)."""
    angles = 2 * np.pi * np.arange(n) / n
    corners = (0.5 / np.sin(np.pi / n)) * np.stack([np.cos(angles), np.sin(angles), np.zeros(n)], axis=1)
    bars = [_bar(f"bar{k}", corners[k], corners[(k + 1) % n], omega=SPIN, pivot=np.zeros(3)) for k in range(n)]
    tilt = 0.4 if spatial else 0.0
    joints = [cs.Revolute(bars[k], bars[(k + 1) % n], at=corners[(k + 1) % n],
                          axis=(tilt * np.cos(3 * k), tilt * np.sin(3 * k), 1.0), name=f"joint{k}") for k in range(n)]
    return cs.System([*bars, *joints])


def steps(n):
    return int(np.clip(2000 // n, 10, 200))


def backends(assembly):
    """{method: the prepared Director} of one ring."""
    model, state = assembly.model, assembly.initial_state
    auto = Director().prepare(model, state)
    dense = Director(linear=linear_solver(Director(), model, state))  # without the bordered tree
    return {"bordered tree": auto, "coloured dense LU": dense}


def run(assembly, backend, n_steps, dt):
    sol = cs.simulate(assembly, n_steps * dt, dt, backend=backend, compile=COMPILE)
    E = sol.energy.total
    return {"per_step": sol.stats["time_per_step"], "unknowns": sol.stats["unknowns"],
            "matrix": sol.stats["newton_matrix"], "drift": float(np.max(np.abs(E - E[0])) / abs(E[0])),
            "newton": float(np.mean(sol.newton_iterations))}


def measure(n, args, spatial=False):
    assembly = free_ring(n, spatial).assemble()
    methods = backends(assembly)
    compiled = {}
    for key, backend in methods.items():
        t0 = time.perf_counter()
        cs.simulate(assembly, args.dt, args.dt, backend=backend, compile=COMPILE)
        compiled[key] = time.perf_counter() - t0
    best = {}
    for _ in range(args.repeats):
        for key, backend in methods.items():
            result = run(assembly, backend, steps(n), args.dt)
            if key not in best or result["per_step"] < best[key]["per_step"]:
                best[key] = result
    for key in best:
        best[key]["first_call"] = compiled[key]
    border = methods["bordered tree"].linear
    row = {"N": n, **best, "border": getattr(border, "n_border", None), "width": getattr(border, "width", None)}
    times = {k: f"{best[k]['per_step'] * 1e6:.0f} µs ({best[k]['matrix']})" for k in best}
    print(n, "spatial" if spatial else "planar", times, flush=True)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over both methods per N (best kept)")
    parser.add_argument("--dt", type=float, default=2e-3)
    parser.add_argument("--no-spatial", action="store_true", help="skip the spatial ring")
    args = parser.parse_args(argv)
    pin_to_core0()
    t_start = time.perf_counter()
    tables = {"planar": [measure(n, args) for n in args.sizes]}
    if not args.no_spatial:
        tables["spatial"] = [measure(n, args, spatial=True) for n in args.sizes]
    lines = ["# Free ring of N bars: bordered tree against the coloured dense LU", "",
             f"Generated by `benchmarks/free_ring.py` (sizes {args.sizes}, Δt = {args.dt:g} s, best of "
             f"{args.repeats} rounds, compile=\"{COMPILE}\", pinned to CPU 0). Ring: N bars in a regular N-gon, "
             "revolute joints, floating, spinning at ω = (0.3, −0.2, 1.0) rad/s; see the script's docstring.", ""]
    titles = {"planar": "Planar ring (axes along e3): the closing joint's 2 rows are the border",
              "spatial": "Spatial ring (tilted axes): a body and the rows touching it are the border"}
    for name, rows in tables.items():
        lines += [f"## {titles[name]}", "",
                  "| N | unknowns | border k | node width | bordered tree µs/step | coloured dense LU µs/step | ratio "
                  "| Newton iterations (bordered, dense) | energy error (bordered, dense) "
                  "| first call s (bordered, dense) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            b, d = r["bordered tree"], r["coloured dense LU"]
            lines.append(f"| {r['N']} | {b['unknowns']} | {r['border']} | {r['width']} | {b['per_step'] * 1e6:.0f} "
                         f"| {d['per_step'] * 1e6:.0f} | {d['per_step'] / b['per_step']:.1f} "
                         f"| {b['newton']:.2f}, {d['newton']:.2f} | {b['drift']:.1e}, {d['drift']:.1e} "
                         f"| {b['first_call']:.1f}, {d['first_call']:.1f} |")
        lines.append("")
        for key in KEYS:
            slope = loglog_slope(rows, key, SLOPE_RANGE)
            lines.append(f"- {key}: log–log slope of µs/step against N over N = {SLOPE_RANGE[0]} … {SLOPE_RANGE[1]}: "
                         + (f"{slope:.2f}" if slope is not None else "n/a"))
        matrices = sorted({r[k]["matrix"] for r in rows for k in KEYS})
        lines += [f"- Newton matrices reported by the runs: {', '.join(matrices)}", ""]
    write_report(OUT, lines, t_start)


if __name__ == "__main__":
    main()
