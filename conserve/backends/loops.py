"""Loop coordinates (Führer & Wallrapp 1984, Sec. 2, eqs. (12)–(16)): which minimal coordinates
of the kinematic tree stay independent once cut joints close loops.

A loop-closing joint's constraints g_l(q) = 0 restrict the tree's minimal velocities ν
(:mod:`conserve.model.tree`) to C ν = 0 with

    C = G_l(q) H2(q)        (n_l, n_t), full row rank (redundant loop rows are dropped at assembly).

QR with column pivoting, C P = Q R, orders the columns by how well they can be solved for: the
first n_l are the *dependent* coordinates u_d (C_d = C[:, dependent] is then as well conditioned
as the loop allows), the rest are the *independent* coordinates u_i. Both are actual joint angles,
slides and body increments of the tree, so the independent ones keep their physical meaning (the
crank angle of a four-bar), and re-pivoting as the mechanism moves keeps C_d away from
singularity (Führer–Wallrapp). Then

    ker C = { u : u_d = −C_d⁻¹ C_i u_i },     N = P [−C_d⁻¹ C_i ; I]   (n_t, n_t − n_l).

All functions are pure jax (jit- and grad-safe; the pivot choice itself is not differentiated).
"""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.linalg


def partition(C):
    """(dependent (n_l,), independent (n_t − n_l,)) column indices of C (n_l, n_t) chosen by QR
    with column pivoting (integer arrays)."""
    pivots = jax.scipy.linalg.qr(C, mode="economic", pivoting=True)[2]
    n_l = C.shape[0]
    return pivots[:n_l], pivots[n_l:]


def null_basis(C, dependent, independent):
    """N (n_t, n_t − n_l): the basis of ker C with the identity on the independent coordinates."""
    n_t = C.shape[1]
    N_d = -jnp.linalg.solve(C[:, dependent], C[:, independent])
    return jnp.zeros((n_t, independent.shape[0]), C.dtype).at[dependent].set(N_d).at[
        independent].set(jnp.eye(independent.shape[0], dtype=C.dtype))


def project(C, r, dependent, independent):
    """Nᵀ r (n_t − n_l,) for r (n_t,): r_i − C_iᵀ C_d⁻ᵀ r_d, without forming N."""
    return r[independent] - C[:, independent].T @ jnp.linalg.solve(C[:, dependent].T, r[dependent])
