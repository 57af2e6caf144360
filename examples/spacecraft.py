"""P3a spacecraft: a core with three reaction wheels driven by motors, hybrid rotors.

    python examples/spacecraft.py [--model body]    # writes spacecraft.png

Each wheel is one spin angle on the core (``cs.Rotor``); ``--model body`` swaps all three for full
director bodies on revolute joints. Energy changes by exactly the motors' work and the total
angular momentum stays constant.
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.problems import spacecraft  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--model", choices=["hybrid", "body"], default="hybrid")
parser.add_argument("--dt", type=float, default=1e-2)
args = parser.parse_args()

sol = cs.simulate(spacecraft(args.model), t_end=20.0, dt=args.dt)
print(f"P3a spacecraft, {args.model} wheels, {sol.stats['unknowns']} unknowns per step")
print(sol.summary())

E0 = abs(sol.energy.total[0])
J = sol.angular_momentum
fig, axes = plt.subplots(2, 2, figsize=(10, 6.5), sharex=True)
axes[0, 0].plot(sol.t, sol["core"].quaternion, label=["w", "x", "y", "z"])
axes[0, 0].set_ylabel("core attitude quaternion")
axes[0, 0].legend(fontsize=8, ncol=4)
for i in range(3):
    axes[0, 1].plot(sol.t, sol.rotor(f"wheel{i}").rate, label=f"wheel {i}")
axes[0, 1].set_ylabel("wheel rate relative to core [rad/s]")
axes[0, 1].legend(fontsize=8)
axes[1, 0].plot(sol.t, (sol.energy.total - sol.energy.total[0]) / E0, label="(E − E₀)/|E₀|")
axes[1, 0].plot(sol.t, np.concatenate([[0.0], np.cumsum(sol.work.sum(axis=1))]) / E0, "--", label="motor work / |E₀|")
axes[1, 0].plot(sol.t, sol.energy_balance_error / E0 * 1e12, label="balance error × 1e12")
axes[1, 0].set_ylabel("energy")
axes[1, 0].legend(fontsize=8)
axes[1, 1].plot(sol.t, (J - J[0]) / np.linalg.norm(J[0]), label=["Jx", "Jy", "Jz"])
axes[1, 1].set_ylabel("(J − J₀)/|J₀|")
axes[1, 1].legend(fontsize=8)
for ax in axes[1]:
    ax.set_xlabel("t [s]")
for ax in axes.ravel():
    ax.grid(alpha=0.3)
fig.suptitle(f"P3a spacecraft with {args.model} reaction wheels, Δt = {args.dt:g} s")
fig.tight_layout()
fig.savefig("spacecraft.png", dpi=110)
print("wrote spacecraft.png")
