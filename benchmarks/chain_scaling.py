"""Benchmark: an N-link spatial pendulum chain (N = 2, 4, 8, 16, 32) with the director, reduced and
ode backends in the same run: time per step and compile time against N.

    python benchmarks/chain_scaling.py [--sizes 2 4 8 16 32] [--steps 200]

Writes benchmarks/results/chain_scaling.md and chain_scaling.png. The chain: N slender bars of
length 0.5 m and 1 kg joined by spherical joints, the first to the ground at the origin, hanging
tilted and spinning about the vertical (a fully spatial motion), gravity; Δt = 1e-3 s. The ode
backend (DOP853, rtol 1e-10) is timed per output interval of Δt, so the per-step numbers compare
work for the same nodes, not the same accuracy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.problems import _bar  # noqa: E402

OUT = Path(__file__).parent / "results"
BACKENDS = ("director", "reduced", "ode")


def chain(n, length=0.5, tilt=0.3, spin=1.0):
    """N bars from the origin along a tilted line, rotating rigidly about e3 at ``spin`` rad/s."""
    direction = np.array([np.sin(tilt), 0.0, -np.cos(tilt)])
    w = np.array([0.0, 0.0, spin])
    points = [k * length * direction for k in range(n + 1)]
    bars = [_bar(f"bar{k}", points[k], points[k + 1], omega=w, pivot=np.zeros(3)) for k in range(n)]
    joints = [cs.Spherical(cs.ground, bars[0], at=points[0], name="joint0")]
    joints += [cs.Spherical(bars[k - 1], bars[k], at=points[k], name=f"joint{k}") for k in range(1, n)]
    return cs.System([*bars, *joints, cs.Gravity()])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    dt = 1e-3
    rows = []
    for n in args.sizes:
        assembly = chain(n).assemble()
        row = {"N": n, "dof": assembly.degrees_of_freedom}
        for b in BACKENDS:
            first = cs.simulate(assembly, dt, dt, backend=b)  # compiles (reported separately)
            sol = cs.simulate(assembly, args.steps * dt, dt, backend=b)
            row[b] = (sol.stats["time_per_step"] * 1e6, first.stats["compile_time"], sol.stats["unknowns"])
            E = sol.energy.total
            row[f"{b} energy"] = float(np.max(np.abs(E - E[0])) / abs(E[0]))
            print(f"N = {n:2d} {b:8s}: {row[b][0]:9.0f} µs/step, compile {row[b][1]:5.1f} s, "
                  f"{row[b][2]} unknowns, energy {row[f'{b} energy']:.1e}", flush=True)
        rows.append(row)

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for b, style in zip(BACKENDS, ("o-", "s-", "^--")):
        ax.loglog([r["N"] for r in rows], [r[b][0] for r in rows], style, label=b)
    ax.set_xlabel("links N")
    ax.set_ylabel("µs per step (Δt = 1e-3 s)")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    ax.set_title("Spatial pendulum chain: time per step against N")
    fig.tight_layout()
    fig.savefig(OUT / "chain_scaling.png", dpi=110)
    lines = ["# Chain scaling: director vs reduced vs ode", "",
             f"`python benchmarks/chain_scaling.py` — {args.steps} steps of Δt = {dt:g} s, best of one run after "
             "compilation, same process. ode = solve_ivp(DOP853, rtol 1e-10) with output every Δt.", "",
             "| N | DOF | director µs/step | reduced µs/step | ode µs/step | reduced / director | unknowns director / reduced / ode state "
             "| compile director / reduced / ode [s] | energy error director / reduced / ode |", "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['N']} | {r['dof']} | {r['director'][0]:.0f} | {r['reduced'][0]:.0f} | {r['ode'][0]:.0f} | "
                     f"{r['reduced'][0] / r['director'][0]:.2f} | {r['director'][2]} / {r['reduced'][2]} / {r['ode'][2]} | "
                     f"{r['director'][1]:.1f} / {r['reduced'][1]:.1f} / {r['ode'][1]:.1f} | "
                     f"{r['director energy']:.0e} / {r['reduced energy']:.0e} / {r['ode energy']:.0e} |")
    lines += ["", "![chain scaling](chain_scaling.png)"]
    (OUT / "chain_scaling.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT / 'chain_scaling.md'}, {OUT / 'chain_scaling.png'}")


if __name__ == "__main__":
    main()
