"""P6 and P8: Thompson's example systems (2011, §VI) and his pendulum, with the reduced backend.

For every example: the degrees of freedom of the assembled model against the paper's, the
null-space property G(q) H2(q) = 0 and rank H2 = P at random tree configurations, and a
simulation with the director and reduced energy-momentum backends (their trajectories agree, both
conserve energy) and the ode backend (Thompson's reduced ODE by solve_ivp, the reference). P6:
the pendulum's β(t) from all three backends against its reduced scalar equation.

    python paper_reproductions/thompson_examples.py [--out DIR] [--quick]

Writes into DIR (default out/thompson): pendulum.png, energy.png, examples.csv, report.md.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.backends.null_space import configure, null_space  # noqa: E402
from conserve.problems import ThompsonPendulum, thompson_examples  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))  # the scripts' shared helpers
from _study import command_line, write_report  # noqa: E402

BACKENDS = ("director", "reduced", "ode")


def null_space_check(assembly, samples=3, seed=0):
    """max |G(q) H2(q)| / |G| |H2| and min over samples of (rank H2 == P) at random tree configurations."""
    model, state = assembly.model, assembly.initial_state
    tree, rng = model.tree, np.random.default_rng(seed)
    worst, full_rank = 0.0, True
    for _ in range(samples):
        G, H2 = (np.asarray(a) for a in _jacobian_and_null_space(model, state, rng.uniform(-0.5, 0.5, tree.n_dof)))
        worst = max(worst, np.max(np.abs(G @ H2)) / (np.max(np.abs(G)) * np.max(np.abs(H2))))
        full_rank &= np.linalg.matrix_rank(H2, tol=1e-9 * np.max(np.abs(H2))) == tree.n_dof
    return worst, bool(full_rank)


@jax.jit
def _jacobian_and_null_space(model, state, u):
    """G(q) and H2(q) at the tree configuration q = F(q0, u) (one compilation per model)."""
    q = configure(model.tree, model.blocks(state.q), u)
    G = jax.jacfwd(lambda x: model.constraints(x, state.theta, state.s))(q)
    return G, null_space(model.tree, model.blocks(q))


def run(out: Path, quick: bool = False) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    t_end, dt = (0.2, 2e-3) if quick else (2.0, 1e-3)
    rows, energy = [], {}
    for name, (system, paper_dof) in thompson_examples().items():
        assembly = system.assemble()
        gh, full_rank = null_space_check(assembly)
        sols = {b: cs.simulate(assembly, t_end, dt, backend=b) for b in BACKENDS}
        d, r, o = (sols[b] for b in BACKENDS)
        scale = np.max(np.abs(d.q))
        E0 = abs(d.energy.total[0])
        energy[name] = {b: (s.t, (s.energy.total - s.energy.total[0]) / E0) for b, s in sols.items()}
        rows.append({"example": name, "paper P": paper_dof, "model P": assembly.degrees_of_freedom,
                     "tree P": assembly.model.tree.n_dof, "max |G H2| (rel)": gh, "rank H2 = P": full_rank,
                     "unknowns director": d.stats["unknowns"], "unknowns reduced": r.stats["unknowns"],
                     "µs/step director": 1e6 * d.stats["time_per_step"], "µs/step reduced": 1e6 * r.stats["time_per_step"],
                     "code": d.stats["compile"],  # the code generation (compile="auto": by the run's length)
                     "reduced − director (rel q)": np.max(np.abs(r.q - d.q)) / scale,
                     "director − ode (rel q)": np.max(np.abs(d.q - o.q)) / scale,
                     "energy error director": np.max(np.abs(d.energy.total - d.energy.total[0])) / E0,
                     "energy error reduced": np.max(np.abs(r.energy.total - r.energy.total[0])) / E0,
                     "energy error ode": np.max(np.abs(o.energy.total - o.energy.total[0])) / E0})
    with open(out / "examples.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    fig, axes = plt.subplots(2, 3, figsize=(11, 6), sharex=True)
    for ax, (name, curves) in zip(axes.ravel(), energy.items()):
        for b, (t, e) in curves.items():
            ax.plot(t, e, label=b)
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.supylabel("(E − E₀)/|E₀|")
    fig.supxlabel("t [s]")
    fig.suptitle(f"P8: energy error, Δt = {dt:g} (EM backends) and solve_ivp DOP853 (ode)")
    fig.tight_layout()
    fig.savefig(out / "energy.png", dpi=110)
    plt.close(fig)

    # P6: the pendulum with the rotary spring-damper, every backend against the reduced equation
    pendulum = ThompsonPendulum()
    t6, dt6 = (2.0, 1e-2) if quick else (10.0, 1e-2)
    p6 = {b: cs.simulate(pendulum.system(), t6, dt6, backend=b) for b in BACKENDS}
    t = p6["director"].t
    beta_ref = pendulum.reference(t)
    p6_errors = {b: float(np.max(np.abs(pendulum.beta(s) - beta_ref))) for b, s in p6.items()}
    balance = {b: float(np.max(np.abs(s.energy_balance_error)) / abs(s.energy.total[0])) for b, s in p6.items()}
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    a1.plot(t, beta_ref, "k-", lw=2.5, alpha=0.4, label="reduced equation (DOP853, rtol 1e-12)")
    for b, style in zip(BACKENDS, ("-", "--", ":")):
        a1.plot(t, pendulum.beta(p6[b]), style, label=b)
        a2.semilogy(t, np.abs(pendulum.beta(p6[b]) - beta_ref) + 1e-17, style, label=b)
    a1.set_ylabel("β [rad]")
    a2.set_ylabel("|β − β_ref| [rad]")
    a2.set_xlabel("t [s]")
    a1.legend(fontsize=8)
    a2.legend(fontsize=8)
    fig.suptitle(f"P6 pendulum with spring-damper (k = {pendulum.k}, b = {pendulum.b}), Δt = {dt6:g}")
    fig.tight_layout()
    fig.savefig(out / "pendulum.png", dpi=110)
    plt.close(fig)

    def fmt(v):
        return f"{v:.2e}" if isinstance(v, float) and not v.is_integer() else str(v)

    table = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    table += ["| " + " | ".join(fmt(v) for v in row.values()) + " |" for row in rows]
    report = [f"# P6 and P8: Thompson's examples ({'quick' if quick else 'full'} run, T = {t_end:g} s, Δt = {dt:g})", "",
              *table, "",
              f"P6 pendulum, T = {t6:g} s, Δt = {dt6:g}: max |β − β_ref| " + ", ".join(f"{b} {e:.1e}" for b, e in p6_errors.items())
              + "; energy balance (E − E₀ + dissipated)/E₀ " + ", ".join(f"{b} {e:.1e}" for b, e in balance.items()) + ".",
              "", "![energy](energy.png)", "![pendulum](pendulum.png)"]
    write_report(out, report, ["energy.png", "pendulum.png", "examples.csv"])
    return {"rows": rows, "p6_errors": p6_errors, "p6_balance": balance}


def main(argv=None):
    command_line(run, __doc__, "out/thompson", argv)


if __name__ == "__main__":
    main()
