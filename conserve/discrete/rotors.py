"""The hybrid rotors' terms of the energy-momentum step (rotors after Becker, Betsch, Franke and
Siebert, with each rotor's axial momentum carried and a constant mass matrix; see
docs/guide/modelling.rst): the gyroscopic term, the corrected reaction couple and the motor and
bearing torques, for increments Δp, Δθ of the rotors' axial momenta and spin angles, such that
the step's energy balance and angular momentum map are exact.
"""

from __future__ import annotations

import jax.numpy as jnp

from ..kinematics.rotations import solve3
from ..kinematics.tensor import contract
from ..model.assembled import EPS, Model
from ..model.coordinates import dry_friction
from ..model.terms import midpoint_state


def rotor_step(model: Model, t, h, state, q1, dp, dtheta):
    """Rotor terms of the step (see the module docstring) for increments Δp, Δθ (n_r,).

    Returns
    -------
    force : (n_q,) Σ_k [p̄_k A_k Δq + Δp_k r_k] (gyroscopic term and corrected reaction couple)
    r_dq : (n_r,) r_k·Δq, with r_k = T(q_m)ᵀ m_k, S(q_m) m_k = ½ (ã_k(q_n) + ã_k(q_{n+1}))
    tau : (n_r,) motor torque minus bearing friction c Δθ/h + τ_c tanh(Δθ/(h ω_s)) at t_{n+½}
    work : (n_motors,) τ_motor Δθ;  dissipation : (n_r,) the bearing's, (c Δθ/h + τ_c tanh(…)) Δθ ≥ 0
    """
    rp = model.rotor_params
    q0 = state.q
    idx = rp["frame"][:, 1:]
    d0, d1 = model.master_directors(q0), model.master_directors(q1)
    dm, dd = 0.5 * (d0 + d1), d1 - d0
    pbar = state.p + 0.5 * dp
    alpha = contract("nk,kij->nij", rp["axis"], EPS)
    gyro = pbar[:, None, None] * contract("nij,njc->nic", alpha, dd)
    S = 0.5 * (jnp.sum(dm * dm, axis=(1, 2))[:, None, None] * jnp.eye(3) - contract("nic,nid->ncd", dm, dm))
    m = solve3(S, 0.5 * (model.rotor_axes(q0) + model.rotor_axes(q1)))
    r = 0.5 * jnp.cross(m[:, None, :], dm)  # (n_r, 3, 3): ½ m × d_i
    force = jnp.zeros((q0.shape[0] // 3, 3), q0.dtype).at[idx].add(gyro + dp[:, None, None] * r).ravel()
    r_dq = jnp.sum(r * dd, axis=(1, 2))
    rate = dtheta / h
    if any(law is not None for law in model.rotor_laws):
        master = midpoint_state(q0.reshape(-1, 3), q1.reshape(-1, 3), rp["frame"], h)
        tau_motor, motors = model.rotor_motors(t + 0.5 * h, state.theta + 0.5 * dtheta, rate, master)
        work = tau_motor[motors] * dtheta[motors]
    else:
        tau_motor, work = jnp.zeros_like(dp), jnp.zeros((0,), q0.dtype)
    bearing = rp["friction"] * rate + dry_friction(rp, rate)
    return force, r_dq, tau_motor - bearing, work, bearing * dtheta
