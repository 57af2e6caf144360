"""P1: the Betsch-group heavy-top study with the director EM scheme: conservation of energy and
of J·e3, constraints at every step, and second-order convergence to the exact steady precession.

    python paper_reproductions/heavy_top.py [--out DIR] [--quick]

Writes into DIR (default out/heavy_top): conservation.png, convergence.png, convergence.csv, report.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import conserve as cs
from conserve import studies
from conserve.problems import HeavyTop
from conserve.results.plotting import plot_conservation

sys.path.insert(0, str(Path(__file__).parent))  # the scripts' shared helpers
from _study import command_line, write_report  # noqa: E402


def run(out: Path, quick: bool = False) -> dict:
    top = HeavyTop()
    out.mkdir(parents=True, exist_ok=True)
    t_long = 2.0 if quick else 20.0
    sol = cs.simulate(top.system(), t_end=t_long, dt=2e-3)
    plot_conservation(sol, out / "conservation.png", title=f"P1 heavy top, Δt = 2e-3, {len(sol) - 1} steps",
                      momentum_components=(2,))

    def height_error(s, ref=None):
        return float(np.max(np.abs(s["top"].position[:, 2] - top.height())))

    height_error.__name__ = "height error max(abs(z_c − l cos α0)) [m]"
    dts = 2e-3 * 2.0 ** -np.arange(3 if quick else 5)
    table = studies.convergence(top.system(), dts, 2.0, error=height_error, reference=sol)
    table.reference = "exact steady precession (no reference run)"
    table.to_csv(out / "convergence.csv")
    table.plot(out / "convergence.png", title="P1 heavy top: centre-of-mass height error vs Δt")
    E, J3 = sol.energy.total, sol.angular_momentum[:, 2]
    numbers = {"energy": float(np.max(np.abs(E - E[0])) / abs(E[0])),
               "J3": float(np.max(np.abs(J3 - J3[0])) / abs(J3[0])),
               "constraints": float(np.max(sol.constraint_residual)), "order": table.fitted_order("model")}
    report = [f"# P1 heavy top ({'quick' if quick else 'full'} run)", "",
              f"{len(sol) - 1} steps of 2e-3 s: energy drift {numbers['energy']:.1e}, J·e3 drift {numbers['J3']:.1e}, "
              f"max constraint residual {numbers['constraints']:.1e}.", "", table.to_markdown(), "",
              "![conservation](conservation.png)", "![convergence](convergence.png)"]
    write_report(out, report, ["conservation.png", "convergence.png", "convergence.csv"])
    return numbers


def main(argv=None):
    command_line(run, __doc__, "out/heavy_top", argv)


if __name__ == "__main__":
    main()
