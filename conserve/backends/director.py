"""The energy-momentum step in director coordinates (DESIGN §6, rotor-scheme.md §2).

Unknowns x = (Δq, λ̃) with Δq = q_{n+1} − q_n and scaled multipliers λ̃ = (h²/2) λ;
velocities are eliminated by v_{n+1} = 2Δq/h − v_n (midpoint rule). Residual:

    R1 = (h/2) [ M (v_{n+1} − v_n) + h ∇̄V(q_n, q_{n+1}) ] + G(q_{n+½})ᵀ λ̃ = 0
    R2 = g(q_n + Δq) = 0

Scaling R1 by h/2 makes the Newton matrix ≈ [[M, Gᵀ], [G, 0]] (well conditioned for all h).
Energy: Δ(½vᵀMv) = v̄ᵀMΔv, v̄ᵀGᵀλ ∝ λ·Δg = 0 for quadratic g, and v̄·∇̄V = ΔV/h, so
E_{n+1} = E_n to Newton tolerance. Momentum: every constraint and invariant is rotation and
translation invariant, so the discrete forces have no net force or moment where the system
has the symmetry.
"""

from __future__ import annotations

import jax.numpy as jnp

from ..discrete.newton import newton_solve
from ..kinematics.rotations import angular_velocity, cayley
from ..model.assembled import Model, State


def predictor(model: Model, state: State, h):
    """Initial guess for Δq: h v_n, with each rigid body's directors turned by cay(h ω_n).

    The midpoint rule turns a free spin by exactly cay(hω) per step, so this predictor stays
    good for fast spin (ωh ≳ 1) where h v_n sends Newton astray (rotor-scheme.md §6).
    """
    dQ = h * state.v.reshape(-1, 3)
    if model.rigid_frames.shape[0]:
        Q = state.q.reshape(-1, 3)
        idx = model.rigid_frames[:, 1:]
        d, d_rate = Q[idx], state.v.reshape(-1, 3)[idx]  # (n, 3, 3), d_i in rows
        omega = angular_velocity(d, d_rate)
        d_new = jnp.einsum("nij,nkj->nki", cayley(h * omega), d)
        dQ = dQ.at[idx].set(d_new - d)
    return dQ.ravel()


def step(model: Model, state: State, lam, t, h, newton):
    """One EM step t_n -> t_{n+1} = t_n + h.

    Parameters
    ----------
    state : State at t_n
    lam : (n_c,) scaled multipliers of the previous step (Newton's initial guess)
    t : float, t_n in s (unused by conservative models; kept for time-dependent loads)
    h : float, step in s
    newton : :class:`conserve.discrete.Newton`

    Returns
    -------
    state : State at t_{n+1}
    lam : (n_c,) scaled multipliers λ̃ = (h²/2) λ
    iterations, converged, history : Newton statistics
    """
    q0, v0 = state
    nq = q0.shape[0]

    def residual(x):
        dq, lam_ = x[:nq], x[nq:]
        q1 = q0 + dq
        v1 = 2.0 * dq / h - v0
        r1 = 0.5 * h * (model.mass_times(v1 - v0) + h * model.discrete_potential_force(q0, q1))
        r1 = r1 + model.constraint_force(q0 + 0.5 * dq, lam_)
        return jnp.concatenate([r1, model.constraints(q1)])

    x0 = jnp.concatenate([predictor(model, state, h), lam])
    x, iterations, converged, history = newton_solve(residual, x0, newton)
    dq = x[:nq]
    return State(q0 + dq, 2.0 * dq / h - v0), x[nq:], iterations, converged, history
