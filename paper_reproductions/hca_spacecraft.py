"""P4: the spacecraft reaction-wheel study of the hybrid-coordinate paper (Becker, Betsch, Franke,
Siebert), with the data of shared/problems.md (the paper's own values were not available).

    python paper_reproductions/hca_spacecraft.py [--out DIR] [--quick]

Writes into DIR (default out/hca_spacecraft): path.png (the core's x–y path at coarse Δt for both
wheel models against the reference), convergence.png (ε_rel vs Δt and vs run time),
conservation.png (energy balance and angular momentum), convergence.csv and report.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import conserve as cs
from conserve import studies
from conserve.problems import P4_CENTRE, p4_spacecraft
from conserve.results.animation import save_frame

sys.path.insert(0, str(Path(__file__).parent))  # the scripts' shared helpers
from _study import command_line, gap_summary, model_gap, reduced_summary, with_reduced, write_report  # noqa: E402

# "asymptotic": the largest Δt of the order fit. The full-body wheels (500 rpm) are in their
# asymptotic range only for ωh ≲ 0.5, Δt ≲ 0.01; the hybrid model is for every Δt here.
# "gap_dts": the steps at which both models run for their difference (≤ 1e-6 at the last; the
# full-body model needs Δt ≈ 2e-4 for that, 5·10⁵ steps, most of the full run's time).
FULL = {"t_end": 100.0, "dts": (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.0025), "reference": 5e-4,
        "path_dt": 0.5, "asymptotic": 0.01, "gap_dts": (0.0025, 0.0002)}
QUICK = {"t_end": 20.0, "dts": (0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005), "reference": 1e-3, "path_dt": 0.5,
         "asymptotic": 0.01, "gap_dts": (0.01, 0.005)}
MODELS = ("hybrid", "body")


def run(out: Path, quick: bool = False) -> dict:
    """The study; returns the numbers the report states (for tests)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = QUICK if quick else FULL
    out.mkdir(parents=True, exist_ok=True)
    assemblies = {m: p4_spacecraft(m).assemble() for m in MODELS}
    models, backends = with_reduced(assemblies)
    table = studies.convergence(models, cfg["dts"], cfg["t_end"], error=studies.relative_error(["core"]),
                                reference=cfg["reference"], backend=backends, progress=True)
    table.to_csv(out / "convergence.csv")
    table.plot(out / "convergence.png", title="P4 spacecraft: ε_rel of the core (φ, d_i) at T",
               max_dt=cfg["asymptotic"])

    ref = table.extra["reference"]
    coarse = {}
    for m in MODELS:
        try:
            coarse[m] = cs.simulate(assemblies[m], cfg["t_end"], cfg["path_dt"], compile=table.extra["compile"])
        except cs.ConvergenceError as err:
            coarse[m] = err.partial_solution
    fig, ax = plt.subplots(figsize=(6, 5))
    x = ref["core"].position - P4_CENTRE
    ax.plot(x[:, 0], x[:, 1], "k-", lw=2.5, alpha=0.4, label=f"reference (hybrid, Δt = {cfg['reference']:g})")
    for m, style in zip(MODELS, ("o-", "s--")):
        x = coarse[m]["core"].position - P4_CENTRE
        ax.plot(x[:, 0], x[:, 1], style, ms=3, label=f"{m} wheels, Δt = {cfg['path_dt']:g}")
    ax.set_xlabel("x − x_c [m]  (x_c: fixed system centre of mass)")
    ax.set_ylabel("y − y_c [m]")
    ax.set_aspect("equal", "datalim")
    ax.legend(fontsize=8)
    ax.set_title("P4: path of the core's centre of mass")
    fig.tight_layout()
    fig.savefig(out / "path.png", dpi=110)

    fine = {m: cs.simulate(assemblies[m], cfg["t_end"], cfg["dts"][-1], compile=table.extra["compile"]) for m in MODELS}
    fine["hybrid"].animate(out / "animation.gif", frames=80)  # body frames, rotors with spin markers, trails
    save_frame(fine["hybrid"], out / "frame.png", time=0.5 * cfg["t_end"])
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for m, sol in fine.items():
        E0 = abs(sol.energy.total[0])
        J = sol.angular_momentum
        a1.plot(sol.t, sol.energy_balance_error / E0, label=m)
        a2.plot(sol.t, np.linalg.norm(J - J[0], axis=1) / np.linalg.norm(J[0]), label=m)
    a1.set_ylabel("(E − E₀ − W)/|E₀|")
    a2.set_ylabel("|J − J₀|/|J₀|")
    a2.set_xlabel("t [s]")
    for a in (a1, a2):
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    fig.suptitle(f"P4: conservation at Δt = {cfg['dts'][-1]:g}")
    fig.tight_layout()
    fig.savefig(out / "conservation.png", dpi=110)

    gap = model_gap(assemblies, cfg["gap_dts"], cfg["t_end"], ["core"], table.extra["compile"])
    reduced_line = reduced_summary(table)
    numbers = {
        "order": {m: table.fitted_order(m, cfg["asymptotic"]) for m in MODELS},
        "errors": {m: table.errors[m].tolist() for m in MODELS},
        "dts": table.dts.tolist(),
        "unknowns": table.unknowns,
        "time_per_step": {m: float(np.nanmedian(table.time_per_step[m])) for m in MODELS},
        "model_gap": gap,
        "energy_balance": {m: float(np.max(np.abs(s.energy_balance_error)) / abs(s.energy.total[0])) for m, s in fine.items()},
        "momentum": {m: studies.momentum_error(s) for m, s in fine.items()},
        "failures": table.extra["failures"],
        "reduced": reduced_line[1],
    }
    ratio = np.asarray(numbers["errors"]["body"]) / np.asarray(numbers["errors"]["hybrid"])
    report = [f"# P4 spacecraft reaction-wheel study ({'quick' if quick else 'full'} run, T = {cfg['t_end']:g} s)", "",
              "Hybrid rotors (one spin angle per wheel) against full-body wheels (director body + revolute joint), "
              "ε_rel on the core's φ and directors at T.", "", table.to_markdown(cfg["asymptotic"]), "",
              "| Δt | body / hybrid error |", "|---|---|"]
    report += [f"| {h:g} | {r:.3g}× |" if np.isfinite(r) else f"| {h:g} | body failed |" for h, r in zip(table.dts, ratio)]
    report += ["", f"- orders are fitted over Δt ≤ {cfg['asymptotic']:g}, where ωh ≤ 0.52 for the fastest wheel",
               "- " + gap_summary(gap),
               "- " + reduced_line[0],
               f"- energy balance (Δt = {cfg['dts'][-1]:g}): " + ", ".join(f"{m} {v:.1e}" for m, v in numbers["energy_balance"].items()),
               "- angular momentum drift: " + ", ".join(f"{m} {v:.1e}" for m, v in numbers["momentum"].items()),
               "", "![path](path.png)", "![convergence](convergence.png)", "![conservation](conservation.png)", "![animation](animation.gif)"]
    write_report(out, report, ["path.png", "convergence.png", "conservation.png", "convergence.csv",
                               "animation.gif", "frame.png"])
    return numbers



def main(argv=None):
    command_line(run, __doc__, "out/hca_spacecraft", argv, quick_help="T = 20 s and four step sizes (about a minute)")


if __name__ == "__main__":
    main()
