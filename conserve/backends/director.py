"""The energy-momentum step in director coordinates (DESIGN §6, rotor-scheme.md §2).

Unknowns x = (Δq, λ̃) with Δq = q_{n+1} − q_n and scaled multipliers λ̃ = (h²/2) λ;
velocities are eliminated by v_{n+1} = 2Δq/h − v_n (midpoint rule). Residual:

    R1 = (h/2) [ M (v_{n+1} − v_n) + h f(q_n, q_{n+1}) ] + Ḡ(q_n, q_{n+1})ᵀ λ̃ = 0
    R2 = g(q_n + Δq) = 0

with f = ∇̄V − F̄ all discrete forces (``Model.discrete_forces``) and Ḡ = G(q_{n+½}) for
quadratic constraints. Scaling R1 by h/2 makes the Newton matrix ≈ [[M, Gᵀ], [G, 0]] (well
conditioned for all h). Energy: Δ(½vᵀMv) = v̄ᵀMΔv, v̄ᵀḠᵀλ ∝ λ·Δg = 0, and f·Δq = ΔV + D − W,
so E_{n+1} − E_n = W − D to Newton tolerance. Momentum: every constraint and invariant is
rotation and translation invariant, so the discrete forces have no net force or moment where
the system has the symmetry.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..discrete.newton import newton_solve
from ..kinematics.rotations import cayley, solve3
from ..model.assembled import Model, State


class StepInfo(NamedTuple):
    """Per-step statistics: Newton iterations, convergence flag, residual max-norm per iteration,
    work (n_w,) of motors and loads and dissipation (n_s,) of joint dampers, in J, and the
    number of sub-steps taken (1; more after a recovery, :mod:`.subdivide`)."""

    iterations: jax.Array
    converged: jax.Array
    history: jax.Array
    work: jax.Array
    dissipation: jax.Array
    substeps: jax.Array


def unknowns(model: Model) -> int:
    """Newton unknowns per step: coordinates, kept multipliers, 2 per hybrid rotor."""
    return model.n_coordinates + model.n_constraints + 2 * model.n_rotors


def predictor(model: Model, state: State, h):
    """Initial guess for Δq: h v_n, with each rigid body's directors turned by cay(h ω_n).

    The midpoint rule turns a free spin by exactly cay(hω) per step, so this predictor stays
    good for fast spin (ωh ≳ 1) where h v_n sends Newton astray (rotor-scheme.md §6). ω_n is
    taken from the body's spin momentum L = Σ_ij E_ij d_i × d_j' as ω = R J⁻¹ Rᵀ L (the node
    velocities of the midpoint DAE are not exactly tangent, L is the conserved quantity).
    """
    dQ = h * state.v.reshape(-1, 3)
    if model.rigid_frames.shape[0]:
        Q, V = state.q.reshape(-1, 3), state.v.reshape(-1, 3)
        idx = model.rigid_frames[:, 1:]
        d, d_rate = Q[idx], V[idx]  # (n, 3, 3), d_i in rows
        E = model.mu[idx[:, :, None], idx[:, None, :]]  # Euler tensors (n, 3, 3)
        J = jnp.trace(E, axis1=1, axis2=2)[:, None, None] * jnp.eye(3) - E
        pairs = jnp.cross(d[:, :, None, :], d_rate[:, None, :, :])  # d_i × d_j', (n, 3, 3, 3)
        L = jnp.einsum("nij,nijk->nk", E, pairs)
        omega_body = solve3(J, jnp.einsum("nij,nj->ni", d, L))
        omega = jnp.einsum("nij,ni->nj", d, omega_body)
        d_new = jnp.einsum("nij,nkj->nki", cayley(h * omega), d)
        dQ = dQ.at[idx].set(d_new - d)
    return dQ.ravel()


def equations(model: Model, state: State, t, h, dq, lam, dp, dtheta):
    """The midpoint equations of a step for a candidate increment Δq = q_{n+1} − q_n (n_q,) (the
    increment itself, not q_{n+1}, so v_{n+1} = 2Δq/h − v_n loses no digits), multipliers λ̃ (n_c,) and rotor
    increments Δp̃, Δθ (n_r,) (see :func:`step`): (R1 (n_q,), R2 (n_c,), R3 (n_r,), R4 (n_r,)).
    Shared by the backends: the reduced one projects R1 onto the tree's null space."""
    q0, v0 = state.q, state.v
    to_momentum = 2.0 * model.rotor_params["axial_inertia"] / h  # Δp = to_momentum · Δp̃, (n_r,)
    dp = to_momentum * dp
    q1, theta1 = q0 + dq, state.theta + dtheta
    v1 = 2.0 * dq / h - v0
    coupled = model.couples_coordinates
    # coordinate relations act through ∇̄s and are enforced on s_{n+1} = s_n + Δs(q_n, q_{n+1})
    s1 = state.s + model.coordinate_increments(q0, q1) if coupled else state.s
    gq, gtheta, gs = model.constraint_force(q0, q1, state.theta, theta1, state.s, s1, lam)
    f = model.discrete_forces(t, h, state, q1, (2.0 / h**2) * gs if coupled else None)[0]
    r1 = 0.5 * h * (model.mass_times(v1 - v0) + h * f) + gq
    r2 = model.constraints(q1, theta1, s1)
    if not model.n_rotors:  # no hybrid rotors: the plain step of DESIGN §6
        return r1, r2, dp, dtheta
    rotor_force, r_dq, tau, _, _ = model.rotor_step(t, h, state, q1, dp, dtheta)
    r3 = (dp - h * tau + (2.0 / h) * gtheta) / to_momentum
    r4 = dtheta - h * (state.p + 0.5 * dp) / model.rotor_params["axial_inertia"] + r_dq
    return r1 + 0.5 * h * rotor_force, r2, r3, r4


def rotor_weights(state: State, dp, dtheta):
    """Newton scales of the rotor unknowns (see :class:`conserve.Newton`): Δp̃ by 1 + |Δp̃| (an
    angle), Δθ by 1 + |Δθ| + |θ_n| (ropes read θ_{n+1} = θ_n + Δθ, known to ε|θ_{n+1}|)."""
    return 1.0 + jnp.abs(dp), 1.0 + jnp.abs(dtheta) + jnp.abs(state.theta)


def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth's TwoSum, no branches)."""
    s = a + b
    b_virtual = s - a
    return s, (a - (s - b_virtual)) + (b - b_virtual)


def advance(model: Model, state: State, t, h, dq, dp, dtheta, newton_result):
    """The state at t_{n+1} and the step's :class:`StepInfo` from the converged unknowns.

    The coordinates are updated by compensated summation: q_{n+1} + q_low_{n+1} = q_n + q_low_n
    + Δq to O(ε²) (``State.q_low`` carries the rounding error of q, at most ulp(q)/2). Rounded
    plainly, q_{n+1} = fl(q_n + Δq) moves the configuration by up to ulp(q)/2 per step unseen by
    the velocity v_{n+1} = 2Δq/h − v_n; the constraint forces do work Gᵀλ·δq on that
    displacement, and the rounding is not independent of the constraint directions (on the heavy
    top it pushes the directors outward, d·δq ≈ +1e-18 per step on average), so the energy
    drifted linearly, ≈ 1e-17 J per step whatever the Newton tolerance. Compensated, the energy
    error is a random walk (heavy top: 5e-13 J after 10⁶ steps instead of 1e-11 J).
    """
    iterations, converged, history = newton_result
    q0, v0 = state.q, state.v
    s, e = _two_sum(q0, dq)
    q1, q1_low = _two_sum(s, e + state.q_low)
    dp = 2.0 * model.rotor_params["axial_inertia"] / h * dp
    _, s1, work, dissipation = model.discrete_forces(t, h, state, q1)
    if model.n_rotors:
        _, _, _, rotor_work, rotor_dissipation = model.rotor_step(t, h, state, q1, dp, dtheta)
    else:
        rotor_work = rotor_dissipation = jnp.zeros((0,), q0.dtype)
    new = State(q1, 2.0 * dq / h - v0, s1, state.p + dp, state.theta + dtheta, q1_low)
    info = StepInfo(iterations, converged, history, jnp.concatenate([work, rotor_work]),
                    jnp.concatenate([dissipation, rotor_dissipation]), jnp.int32(1))
    return new, info


def step(model: Model, state: State, lam, t, h, newton):
    """One EM step t_n -> t_{n+1} = t_n + h.

    Unknowns x = (Δq, λ̃, Δp̃, Δθ): with hybrid rotors (rotor-scheme.md §4) also the increments of
    their axial momenta, scaled to the spin angle they cause, Δp̃ = h Δp / (2 J_a) (rad), and of
    their spin angles,

        R1 = (h/2)[M'(v_{n+1} − v_n) + Σ_k (p̄_k A_k Δq + Δp_k r_k) + h f] + Ḡ_qᵀ λ̃
        R2 = g(q_{n+1}, θ_{n+1}, s_{n+1})
        R3 = (h / 2J_a)[Δp − h τ(t_{n+½}) + (2/h) Ḡ_θᵀ λ̃]        (τ: motor minus bearing friction)
        R4 = Δθ − h p̄/J_a + r·Δq

    The scaling gives every unknown and row a length or angle scale, so one Newton tolerance fits
    all: unscaled, round-off in the rope row reaches Δp amplified by 2J_a/h and stalls Newton at
    small steps.

    (Ḡ_s λ̃ enters f through the joint coordinates' ∇̄s when a constraint couples them), so that
    E_{n+1} − E_n = Σ τ Δθ + (work of other loads) − (dissipation) and ΔJ = 0 exactly.

    Parameters
    ----------
    state : State at t_n
    lam : (n_c,) scaled multipliers of the previous step (Newton's initial guess)
    t : float, t_n in s
    h : float, step in s
    newton : :class:`conserve.Newton`

    Returns
    -------
    state : State at t_{n+1}
    lam : (n_c,) scaled multipliers λ̃ = (h²/2) λ
    info : StepInfo
    """
    q0 = state.q
    nq, nc, nr = q0.shape[0], lam.shape[0], state.p.shape[0]
    split = lambda x: (x[:nq], x[nq:nq + nc], x[nq + nc:nq + nc + nr], x[nq + nc + nr:])  # noqa: E731
    blocks = (lambda r: jnp.concatenate(r)) if nr else (lambda r: jnp.concatenate(r[:2]))  # noqa: E731

    def residual(x):
        return blocks(equations(model, state, t, h, *split(x)))

    def weights(x):  # increments of each 3-block by their own size, multipliers by the largest
        dq, lam_, dp, dtheta = split(x)
        w_q = jnp.repeat(1.0 + jnp.max(jnp.abs(dq.reshape(-1, 3)), axis=1), 3)
        w_lam = jnp.full_like(lam_, 1.0 + jnp.max(jnp.abs(lam_), initial=0.0))
        return blocks((w_q, w_lam, *rotor_weights(state, dp, dtheta)))

    rates = model.rotor_relative_rates(q0, state.v, state.p)
    x0 = jnp.concatenate([predictor(model, state, h), lam, jnp.zeros(nr), h * rates])
    size = blocks((jnp.zeros(nq), model.constraint_magnitudes(q0, state.theta, state.s), jnp.zeros(nr), jnp.zeros(nr)))
    x, *result = newton_solve(residual, x0, newton, weights, size)
    dq, lam1, dp, dtheta = split(x)
    new, info = advance(model, state, t, h, dq, dp, dtheta, result)
    return new, lam1, info
