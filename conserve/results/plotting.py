"""Plots of Solutions (matplotlib, headless-safe)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_conservation(sol, path=None, *, title="", momentum_components=(0, 1, 2)):
    """Error histories of the first integrals: the energy-balance error E − E0 − (W − D)
    (the drift for a conservative system) relative to :attr:`~conserve.Solution.energy_scale`
    (the largest kinetic energy or magnitude of the potential energy reached), the
    angular-momentum error of the given components (those the system conserves) relative to
    :meth:`~conserve.Solution.momentum_scale`, and the constraint residual. A scale of 0 (nothing
    moves) plots the errors in J and kg m²/s.

    Returns the figure; writes it to ``path`` when given.
    """
    J = sol.angular_momentum
    fig, axes = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
    scale_E = sol.energy_scale
    axes[0].plot(sol.t, sol.energy_balance_error / (scale_E or 1.0))
    axes[0].set_ylabel("(E − E₀ − W + D)/E scale" if scale_E else "E − E₀ − W + D [J]")
    scale = sol.momentum_scale("angular_momentum")
    if not momentum_components:
        axes[1].text(0.5, 0.5, "no component conserved", ha="center", transform=axes[1].transAxes)
    for i in momentum_components:
        axes[1].plot(sol.t, (J[:, i] - J[0, i]) / (scale or 1.0), label=f"J{'xyz'[i]}")
    axes[1].set_ylabel("(J − J₀)/J scale" if scale else "J − J₀ [kg m²/s]")
    if momentum_components:
        axes[1].legend(loc="upper left", fontsize=8)
    axes[2].semilogy(sol.t, np.maximum(sol.constraint_residual, 1e-20))
    axes[2].set_ylabel("max |g(q)|")
    axes[2].set_xlabel("t [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(title or "conservation errors")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
