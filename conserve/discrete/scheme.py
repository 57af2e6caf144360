"""The energy-momentum midpoint scheme (Simo and Tarnow 1992; Gonzalez 1996; Betsch and Steinmann
2001, 2002; hybrid rotors after Becker, Betsch, Franke and Siebert): the equations of one step,
its predictor and the update of the state, shared by the backends (:mod:`conserve.backends`),
which choose the unknowns and solve.

Unknowns of the step: Δq = q_{n+1} − q_n (the increment itself, so v_{n+1} = 2Δq/h − v_n loses no
digits), scaled multipliers λ̃ = (h²/2) λ, and per hybrid rotor Δp̃ = h Δp / (2 J_a) and Δθ.
Residual (:func:`equations`):

    R1 = (h/2)[M'(v_{n+1} − v_n) + Σ_k (p̄_k A_k Δq + Δp_k r_k) + h f] + Ḡ_qᵀ λ̃
    R2 = g(q_{n+1}, θ_{n+1}, s_{n+1})
    R3 = (h / 2J_a)[Δp − h τ(t_{n+½}) + (2/h) Ḡ_θᵀ λ̃]        (τ: motor minus bearing friction)
    R4 = Δθ − h p̄/J_a + r·Δq

with f = ∇̄V − F̄ all discrete forces (:mod:`.forces`) and Ḡ the discrete constraint gradient.
Scaling R1 by h/2 makes the Newton matrix ≈ [[M, Gᵀ], [G, 0]] (well conditioned for all h);
Δp̃ is scaled to the spin angle it causes, so one Newton tolerance fits every unknown. Energy:
Δ(½vᵀMv) = v̄ᵀMΔv, v̄ᵀḠᵀλ ∝ λ·Δg = 0 and f·Δq = ΔV + D − W, so E_{n+1} − E_n = W − D to the
Newton residual. Momentum: every constraint and invariant is rotation and translation
invariant, so the discrete forces have no net force or moment where the system has the symmetry.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..kinematics.rotations import cayley, solve3
from ..kinematics.tensor import contract
from ..control.controller import midpoint_commands
from ..model.assembled import Model, State
from ..model.parameters import bound
from .forces import constraint_force, discrete_forces, increment_groups
from .rotors import rotor_step


class StepRecord(NamedTuple):
    """What a step reports: Newton ``iterations`` (int32), ``converged`` (bool), the residual's
    max-norm at each iteration ``history`` (max_iterations,), the discrete ``work`` (n_w,) of
    motors and loads and the ``dissipation`` (n_s + n_v + n_r,) of joint dampers, viscous elements and rotor bearings in
    J, the ``substeps`` taken (1; 2^k after a recovery, ``conserve.backends.subdivide``) and the
    step's scaled ``multipliers`` λ̃ = (h²/2) λ of the kept constraint rows (n_c,; rows a backend
    eliminates are 0 until it recovers them after the run)."""

    iterations: jax.Array
    converged: jax.Array
    history: jax.Array
    work: jax.Array
    dissipation: jax.Array
    substeps: jax.Array
    multipliers: jax.Array


def predictor(model: Model, state: State, h, velocity, turn):
    """Initial guess for Δq: h·velocity (n_q,), with each rigid body's directors turned by
    cay(h·turn) (turn (n_b, 3) in rad/s). With v_n and the spins ω_n (:func:`spin_rates`) it is the
    first-order predictor; with rates extrapolated to the step's midpoint the second-order one
    (:class:`conserve.backends.director.Trend`).

    The midpoint rule turns a free spin by exactly cay(hω) per step, so this predictor stays
    good for fast spin (ωh ≳ 1) where h v_n sends Newton astray (it diverges at ωh ≥ 5).
    """
    dQ = h * velocity.reshape(-1, 3)
    if model.rigid_frames.shape[0]:
        idx = model.rigid_frames[:, 1:]
        d = state.q.reshape(-1, 3)[idx]  # (n, 3, 3), d_i in rows
        dQ = dQ.at[idx].set(contract("nij,nkj->nki", cayley(h * turn), d) - d)
    return dQ.ravel()


def spin_rates(model: Model, state: State):
    """(n_b, 3) each rigid body's angular velocity ω_n in rad/s from its spin momentum
    L = Σ_ij E_ij d_i × d_j' as ω = R J⁻¹ Rᵀ L (E_ij the Euler tensor; the node velocities of the
    midpoint DAE are not exactly tangent, L is the conserved quantity)."""
    Q, V = state.q.reshape(-1, 3), state.v.reshape(-1, 3)
    idx = model.rigid_frames[:, 1:]
    d, d_rate = Q[idx], V[idx]  # (n, 3, 3), d_i in rows
    E = model.mu[idx[:, :, None], idx[:, None, :]]  # Euler tensors (n, 3, 3)
    J = jnp.trace(E, axis1=1, axis2=2)[:, None, None] * jnp.eye(3) - E
    pairs = jnp.cross(d[:, :, None, :], d_rate[:, None, :, :])  # d_i × d_j', (n, 3, 3, 3)
    L = contract("nij,nijk->nk", E, pairs)
    return contract("nij,ni->nj", d, solve3(J, contract("nij,nj->ni", d, L)))


def turn_rates(model: Model, q, dq, h):
    """(n_b, 3) each rigid body's turn rate over a step, rad/s: the ω with Δd_i = h ω × d̄_i
    (d̄_i = d_i + Δd_i/2; cay(hω) turns d_i into d_i + Δd_i), in least squares over i = 1…3:
    Σ_i ((d̄_i·d̄_i) I − d̄_i d̄_iᵀ) ω = Σ_i d̄_i × Δd_i / h. A free spin's step gives back its ω."""
    idx = model.rigid_frames[:, 1:]
    d, dd = q.reshape(-1, 3)[idx], dq.reshape(-1, 3)[idx]
    mid = d + 0.5 * dd
    A = jnp.sum(mid * mid, axis=(1, 2))[:, None, None] * jnp.eye(3) - contract("nia,nib->nab", mid, mid)
    return solve3(A, jnp.sum(jnp.cross(mid, dd), axis=1)) / h


def commanded(dp_index):
    """Decorate a step function ``fn(model, state, t, h, dq, *args)`` whose ``args[dp_index]`` is the
    scaled rotor increment Δp̃: inside it the commands of the model's controllers without a rate
    (:func:`~conserve.control.controller.midpoint_commands`) are bound as the parameters their
    actuators read, evaluated on the step's candidate q_{n+1} = q_n + Δq and p_{n+1}, so they are
    functions of the step's unknowns as element laws are."""
    def decorate(fn):
        @functools.wraps(fn)
        def with_commands(model: Model, state: State, t, h, dq, *args):
            if not any(s.rate is None for s in model.controllers):
                return fn(model, state, t, h, dq, *args)
            p1 = state.p + 2.0 * model.rotor_params["axial_inertia"] / h * args[dp_index]
            values = midpoint_commands(model, t, h, state.q, state.q + dq, state.p, p1)
            with bound({**model.parameters, **values}):
                return fn(model, state, t, h, dq, *args)

        return with_commands

    return decorate


@commanded(dp_index=1)
def equations(model: Model, state: State, t, h, dq, lam, dp, dtheta):
    """The midpoint equations of a step for a candidate increment Δq = q_{n+1} − q_n (n_q,) (the
    increment itself, not q_{n+1}, so v_{n+1} = 2Δq/h − v_n loses no digits), multipliers λ̃ (n_c,) and rotor
    increments Δp̃, Δθ (n_r,) (see the module docstring): (R1 (n_q,), R2 (n_c,), R3 (n_r,), R4 (n_r,)).
    Shared by the backends: the reduced one projects R1 onto the tree's null space."""
    q0, v0 = state.q, state.v
    to_momentum = 2.0 * model.rotor_params["axial_inertia"] / h  # Δp = to_momentum · Δp̃, (n_r,)
    dp = to_momentum * dp
    q1, theta1 = q0 + dq, state.theta + dtheta
    v1 = node_velocity(dq, v0, h)
    coupled = model.couples_coordinates
    # coordinate relations act through ∇̄s and are enforced on s_{n+1} = s_n + Δs(q_n, q_{n+1})
    increments = increment_groups(model, q0, q1) if coupled else None
    s1 = state.s + jnp.concatenate([ds for ds, _ in increments]) if coupled else state.s
    gq, gtheta, gs = constraint_force(model, q0, q1, state.theta, theta1, state.s, s1, lam)
    f = discrete_forces(model, t, h, state, q1, (2.0 / h**2) * gs if coupled else None, increments)[0]
    r1 = 0.5 * h * (model.mass_times(v1 - v0) + h * f) + gq
    r2 = model.constraints(q1, theta1, s1, t + h)  # a prescribed motion at t_{n+1}
    if not model.n_rotors:  # no hybrid rotors: the plain director step
        return r1, r2, dp, dtheta
    rotor_force, r_dq, tau, _, _ = rotor_step(model, t, h, state, q1, dp, dtheta)
    r3 = (dp - h * tau + (2.0 / h) * gtheta) / to_momentum
    r4 = dtheta - h * (state.p + 0.5 * dp) / model.rotor_params["axial_inertia"] + r_dq
    return r1 + 0.5 * h * rotor_force, r2, r3, r4


def rotor_weights(state: State, dp, dtheta):
    """Newton scales of the rotor unknowns (see :class:`conserve.Newton`): Δp̃ by 1 + |Δp̃| (an
    angle), Δθ by 1 + |Δθ| + |θ_n| (ropes read θ_{n+1} = θ_n + Δθ, known to ε|θ_{n+1}|)."""
    return 1.0 + jnp.abs(dp), 1.0 + jnp.abs(dtheta) + jnp.abs(state.theta)


@jax.custom_jvp
def node_velocity(dq, v0, h):
    """v_{n+1} = 2Δq/h − v_n (n,) of the increment Δq (n,), the velocity v_n (n,) and the step h (s),
    rounded once: within half an ulp and without bias. The quotient a ≈ 2Δq/h keeps its remainder
    2Δq − a h (exact, by Dekker's product) and a − v_n its rounding (Knuth's TwoSum), and both are
    added before the last rounding.

    Written out, fl(fl(2Δq/h) − v_n) rounds twice, and XLA divides by h or multiplies by fl(1/h),
    depending on the code around; neither first rounding is random: when 1/h has few significant
    bits (h a round decimal: 1/0.01 = 100 (1 − 2.1e-17)), 2Δq/h lies on a coarse grid of fractions
    of an ulp, shifted by the same relative amount every step, and the error has a mean with the
    sign of v̄ = (v_n + v_{n+1})/2, and so has the kinetic energy's. Where Newton's last residual saw
    the stored velocity it absorbs the bias; where it did not (the reduced backend's increments are
    the image of its last correction) the energy would drift (measurements:
    benchmarks/results/defaults.md, section ``node_velocity``)."""
    inverse = 1.0 / h
    x = 2.0 * dq
    a = x * inverse
    p, e = _two_product(a, h)
    remainder = (x - p) - e  # x − a h (x − p exactly: p is within a few ulps of x)
    s, t = _two_sum(a, -v0)
    return s + (t + remainder * inverse)


@node_velocity.defjvp
def _node_velocity_jvp(primals, tangents):
    """The derivative of v = 2Δq/h − v_n itself, not through the error-free transformations of its
    rounding (the same to round-off, at their cost in every Jacobian-vector product)."""
    dq, v0, h = primals
    d_dq, d_v0, d_h = tangents
    return node_velocity(dq, v0, h), 2.0 * d_dq / h - d_v0 - (2.0 * dq / h**2) * d_h


def _two_product(a, b):
    """(p, e) with p = fl(a b) and p + e = a b exactly (Dekker's product by Veltkamp's splitting;
    float64, no overflow)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _split(a):
    """(hi, lo), a = hi + lo with 26 significant bits each (Veltkamp's splitting of a float64)."""
    c = 134217729.0 * a  # 2²⁷ + 1
    hi = c - (c - a)
    return hi, a - hi


def _two_sum(a, b):
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth's TwoSum, no branches)."""
    s = a + b
    b_virtual = s - a
    return s, (a - (s - b_virtual)) + (b - b_virtual)


def drive_work(model: Model, h, s0, s1, multipliers):
    """(n_d,) the discrete work −(2/h²) λ̃ Δs of each prescribed motion over a step (J), Δs its
    coordinate's exact increment (:mod:`conserve.model.drives`): the constraint force of a
    rheonomic row does work, as the energy balance counts it."""
    lam = model.to_all_rows(multipliers)
    work = [-(2.0 / h**2) * lam[rows] * (s1 - s0)[p["coordinates"][:, 0]]
            for kind, p, rows in model.constraint_groups() if getattr(kind, "rheonomic", False)]
    return jnp.concatenate(work) if work else jnp.zeros((0,), s0.dtype)


@commanded(dp_index=0)
def advance(model: Model, state: State, t, h, dq, dp, dtheta, multipliers, newton_result):
    """The state at t_{n+1} and the step's :class:`StepRecord` from the converged unknowns.

    The coordinates are updated by compensated summation: q_{n+1} + q_low_{n+1} = q_n + q_low_n
    + Δq to O(ε²) (``State.q_low`` carries the rounding error of q, at most ulp(q)/2). Rounded
    plainly, q_{n+1} = fl(q_n + Δq) moves the configuration by up to ulp(q)/2 per step unseen by
    the velocity v_{n+1} = 2Δq/h − v_n; the constraint forces do work Gᵀλ·δq on that
    displacement, and the rounding is not independent of the constraint directions (on the heavy
    top it pushes the directors outward, d·δq ≈ +1e-18 per step on average), so the energy would
    drift linearly, ≈ 1e-17 J per step whatever the Newton tolerance. Compensated, the energy
    error is a random walk (heavy top: 5e-13 J after 10⁶ steps, against 1e-11 J rounded plainly).
    """
    iterations, converged, history = newton_result
    q0, v0 = state.q, state.v
    s, e = _two_sum(q0, dq)
    q1, q1_low = _two_sum(s, e + state.q_low)
    dp = 2.0 * model.rotor_params["axial_inertia"] / h * dp
    _, s1, work, dissipation = discrete_forces(model, t, h, state, q1)
    if model.n_rotors:
        _, _, _, rotor_work, rotor_dissipation = rotor_step(model, t, h, state, q1, dp, dtheta)
    else:
        rotor_work = rotor_dissipation = jnp.zeros((0,), q0.dtype)
    new = State(q1, node_velocity(dq, v0, h), s1, state.p + dp, state.theta + dtheta, q1_low)
    info = StepRecord(iterations, converged, history, jnp.concatenate([work, rotor_work,
                                                                       drive_work(model, h, state.s, s1, multipliers)]),
                      jnp.concatenate([dissipation, rotor_dissipation]), jnp.int32(1), multipliers)
    return new, info
