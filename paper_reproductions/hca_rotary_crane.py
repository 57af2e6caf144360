"""P5: the rotary-crane study of the hybrid-coordinate paper (Becker, Betsch, Franke, Siebert),
with the data of shared/problems.md (the paper's own values were not available): a slewing tower
with a fixed boom, a winch drum modelled as a hybrid rotor or as a full body on a revolute joint,
and a rope whose free length the drum pays out.

    python paper_reproductions/hca_rotary_crane.py [--out DIR] [--quick]

Writes into DIR (default out/hca_rotary_crane): load_height.png (the load's z(t) at coarse Δt for
both winch models against the reference), convergence.png (ε_rel vs Δt and vs run time),
conservation.png (energy balance and the angular momentum about e3 once the motors stop),
stress.png (the fast-winch variant against its closed-form drop), convergence.csv and report.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import conserve as cs
from conserve import studies
from conserve.problems import RotaryCrane
from conserve.results.animation import save_frame

sys.path.insert(0, str(Path(__file__).parent))  # the scripts' shared helpers
from _study import command_line, gap_summary, model_gap, reduced_summary, with_reduced, write_report  # noqa: E402

FULL = {"t_end": 10.0, "dts": (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001), "reference": 1e-4,
        "asymptotic": 0.01, "coarse": (0.1, 0.05), "stress_dts": (0.01, 0.001), "gap_dts": (0.001, 0.00025)}
QUICK = {"t_end": 4.0, "dts": (0.1, 0.05, 0.02, 0.01), "reference": 1e-3,
         "asymptotic": 0.02, "coarse": (0.1, 0.05), "stress_dts": (0.01, 0.001), "gap_dts": (0.02, 0.01)}
MODELS = ("hybrid", "body")
#: the motors stop at t = 2 s (problems.md, P5)
MOTORS_OFF = 2.0


def _run(assembly, t_end, dt, code):
    try:
        return cs.simulate(assembly, t_end, dt, compile=code)
    except cs.ConvergenceError as err:
        return err.partial_solution


def run(out: Path, quick: bool = False) -> dict:
    """The study; returns the numbers the report states (for tests)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = QUICK if quick else FULL
    out.mkdir(parents=True, exist_ok=True)
    crane = RotaryCrane()
    assemblies = {m: crane.system(m).assemble() for m in MODELS}
    models, backends = with_reduced(assemblies)
    table = studies.convergence(models, cfg["dts"], cfg["t_end"], error=studies.relative_error(["tower", "load"]),
                                reference=cfg["reference"], backend=backends, progress=True)
    table.to_csv(out / "convergence.csv")
    table.plot(out / "convergence.png", title="P5 rotary crane: ε_rel of tower (φ, d_i) and load at T",
               max_dt=cfg["asymptotic"])

    # the load's height at coarse steps against the reference
    ref = table.extra["reference"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ref.t, ref["load"].position[:, 2], "k-", lw=3, alpha=0.35, label=f"reference (hybrid, Δt = {cfg['reference']:g})")
    for h, style in zip(cfg["coarse"], ("-", "--")):
        for m, marker in zip(MODELS, ("o", "s")):
            sol = _run(assemblies[m], cfg["t_end"], h, table.extra["compile"])
            ax.plot(sol.t, sol["load"].position[:, 2], style, marker=marker, ms=2, markevery=max(1, len(sol) // 40),
                    label=f"{m} drum, Δt = {h:g}")
    ax.axvline(MOTORS_OFF, color="0.6", lw=0.8)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("load height z [m]")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title("P5: the load hoisted by the winch pulse while the crane slews")
    fig.tight_layout()
    fig.savefig(out / "load_height.png", dpi=110)

    # conservation once the motors stop (the holding torque's work τ Δα is in the balance)
    fine = {m: cs.simulate(assemblies[m], cfg["t_end"], cfg["dts"][-1], compile=table.extra["compile"]) for m in MODELS}
    fine["hybrid"].animate(out / "animation.gif", frames=80)  # body frames, rotors with spin markers, trails
    save_frame(fine["hybrid"], out / "frame.png", time=0.5 * cfg["t_end"])
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    conservation = {}
    for m, sol in fine.items():
        E = sol.energy.total
        J3 = sol.angular_momentum[:, 2]
        after = sol.t >= MOTORS_OFF
        conservation[m] = {"energy_balance": float(np.max(np.abs(sol.energy_balance_error)) / np.max(np.abs(E))),
                           "J3_after": float(np.ptp(J3[after]) / np.max(np.abs(J3))),
                           "constraints": float(np.max(sol.constraint_residual))}
        a1.plot(sol.t, sol.energy_balance_error / np.max(np.abs(E)), label=m)
        a2.plot(sol.t[after], (J3[after] - J3[after][0]) / np.max(np.abs(J3)), label=m)
    a1.set_ylabel("(E − E₀ − W)/max|E|")
    a2.set_ylabel("(J₃ − J₃(2 s))/max|J₃|")
    a2.set_xlabel("t [s]")
    for a in (a1, a2):
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    fig.suptitle(f"P5: conservation at Δt = {cfg['dts'][-1]:g} (motors off after t = {MOTORS_OFF:g} s)")
    fig.tight_layout()
    fig.savefig(out / "conservation.png", dpi=110)

    gap = model_gap(assemblies, cfg["gap_dts"], cfg["t_end"], ["tower", "load"], table.extra["compile"])

    # stress variant: no motors, the load drops and spins the drum up
    stress = RotaryCrane(stress=True)
    a_exact = stress.drop_acceleration()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    drops = {}
    t_ = np.linspace(0.0, 1.0, 200)
    a2.plot(t_, a_exact * t_ / stress.radius, "k-", lw=3, alpha=0.35, label="a t / r")
    for m in MODELS:
        system = stress.system(m).assemble()
        for h in cfg["stress_dts"]:
            sol = cs.simulate(system, 1.0, h)
            z = sol["load"].position[:, 2] - sol["load"].position[0, 2]
            drops[(m, h)] = float(-2.0 * z[-1])  # effective acceleration over T = 1 s, m/s²
            a1.semilogy(sol.t[1:], np.abs(z + 0.5 * a_exact * sol.t**2)[1:] + 1e-17, "-", label=f"{m}, Δt = {h:g}")
            a2.plot(sol.t, sol.rotor("drum").rate, "--", label=f"{m}, Δt = {h:g}")
    a1.set_ylabel("|z − (z₀ − ½ a t²)| [m]")
    a2.set_ylabel("drum spin rate [rad/s]")
    for a in (a1, a2):
        a.set_xlabel("t [s]")
        a.legend(fontsize=7)
        a.grid(alpha=0.3)
    fig.suptitle(f"P5 stress variant: the load falls at a = {a_exact:.4f} m/s²")
    fig.tight_layout()
    fig.savefig(out / "stress.png", dpi=110)

    reduced_line = reduced_summary(table)
    numbers = {
        "order": {m: table.fitted_order(m, cfg["asymptotic"]) for m in MODELS},
        "errors": {m: table.errors[m].tolist() for m in MODELS},
        "dts": table.dts.tolist(),
        "unknowns": table.unknowns,
        "time_per_step": {m: float(np.nanmedian(table.time_per_step[m])) for m in MODELS},
        "model_gap": gap,
        "conservation": conservation,
        "drop_acceleration": {f"{m} {h:g}": v for (m, h), v in drops.items()},
        "drop_exact": a_exact,
        "failures": table.extra["failures"],
        "reduced": reduced_line[1],
    }
    ratio = np.asarray(numbers["errors"]["body"]) / np.asarray(numbers["errors"]["hybrid"])
    report = [f"# P5 rotary crane ({'quick' if quick else 'full'} run, T = {cfg['t_end']:g} s)", "",
              "Winch drum as a hybrid rotor (one spin angle) against a full body on a revolute joint; "
              "ε_rel on the tower's φ and directors and the load's position at T.", "", table.to_markdown(cfg["asymptotic"]),
              "",
              "| Δt | body / hybrid error |", "|---|---|"]
    report += [f"| {h:g} | {r:.3g}× |" if np.isfinite(r) else f"| {h:g} | body failed |" for h, r in zip(table.dts, ratio)]
    summary = gap_summary(gap)
    report += ["", summary[0].upper() + summary[1:] + ".", "", reduced_line[0][0].upper() + reduced_line[0][1:] + ".", "",
               "Conservation at Δt = " + f"{cfg['dts'][-1]:g}:"]
    report += [f"- {m}: energy balance {c['energy_balance']:.1e}, J₃ after the motors stop {c['J3_after']:.1e}, "
               f"constraints {c['constraints']:.1e}" for m, c in conservation.items()]
    report += ["", f"Stress variant (no motors, T = 1 s): a = g m/(m + J_a/r²) = {a_exact:.6f} m/s²; measured "
               + ", ".join(f"{k}: {v:.6f}" for k, v in numbers["drop_acceleration"].items())
               + ". The hybrid drum is exact at any Δt (its spin angle is a coordinate); the full-body drum's "
               "error shrinks as Δt² (ω ≈ 78 rad/s at the end: ωh = 0.78 at Δt = 0.01).", "",
               "![load height](load_height.png)", "![convergence](convergence.png)",
               "![conservation](conservation.png)", "![stress](stress.png)", "![animation](animation.gif)"]
    write_report(out, report, ["load_height.png", "convergence.png", "conservation.png", "stress.png",
                               "convergence.csv", "animation.gif", "frame.png"])
    return numbers


def main(argv=None):
    command_line(run, __doc__, "out/hca_rotary_crane", argv, quick_help="T = 4 s and four step sizes")


if __name__ == "__main__":
    main()
