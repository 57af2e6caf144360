"""The assembled model: flat arrays and pure jax functions of the state, fixed once at assembly.

A :class:`Model` is a jax pytree. Its leaves are numbers (mass blocks, element parameters,
index arrays); its static part is the tuple of element kinds. Two models with the same kinds
and array shapes share one compiled step, whatever their parameters.

Conventions: q, v are flat (n_q,) = (3 n_blocks,); Q = q.reshape(-1, 3) stacked with the
ground frame (:data:`conserve.kinematics.GROUND_BLOCKS`); M = kron(μ, I3) with μ symmetric and
constant; s (n_s,) are the tracked joint coordinates of spring-damper-motor elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics.frames import GROUND_BLOCKS
from ..kinematics.tensor import contract
from .coordinates import dry_friction_potential
from .lawtable import LawTable
from .terms import Configuration, RotorState, midpoint_state


class State(NamedTuple):
    """The state at one time node: coordinates q (n_q,), velocities v (n_q,), joint coordinates
    s (n_s,), per hybrid rotor its axial angular momentum p (n_r,) in kg m²/s and spin angle
    theta (n_r,) in rad relative to its master, and q_low (n_q,), the low-order part of the
    coordinates: the configuration the steps have reached is q + q_low, ``|q_low| ≤ ulp(q)/2``
    (compensated summation of the updates, see :func:`conserve.discrete.scheme.advance`;
    zeros at the start; carried by runs and checkpoints, not kept in a Solution)."""

    q: jax.Array
    v: jax.Array
    s: jax.Array
    p: jax.Array
    theta: jax.Array
    q_low: jax.Array


#: Levi-Civita symbol ε_ijk.
EPS = np.zeros((3, 3, 3))
EPS[0, 1, 2] = EPS[1, 2, 0] = EPS[2, 0, 1] = 1.0
EPS[0, 2, 1] = EPS[2, 1, 0] = EPS[1, 0, 2] = -1.0


class Energy(NamedTuple):
    """Kinetic, potential and total energy in J (arrays of equal shape)."""

    kinetic: jax.Array
    potential: jax.Array
    total: jax.Array


def _n_elements(params):
    return next(iter(params.values())).shape[0]


#: models of at most this many coordinate blocks (16 rigid bodies) apply μ as a dense (n_blocks,
#: n_blocks) product in :meth:`Model.mass_times`, larger ones block by block
DENSE_MASS_BLOCKS = 64


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["mu", "translational", "rigid_frames", "constraint_params",
                 "potential_params", "coordinate_params", "load_params", "rotor_params", "tree", "parameters"],
    meta_fields=["constraint_kinds", "potential_kinds", "coordinate_kinds", "load_kinds", "rotor_laws",
                 "constraint_keep", "controllers"],
)
@dataclass(frozen=True)
class Model:
    """Mass, constraints, potentials, joint-coordinate elements and loads as pure functions.

    Attributes
    ----------
    mu : (n_blocks, n_blocks) block mass matrix, M = kron(μ, I3)
    translational : (n_blocks,) 1 for blocks that are positions (φ), 0 for directors
    rigid_frames : (n_rigid, 4) block indices (φ, d1, d2, d3) of the rigid bodies
    constraint_keep : (static) tuple of the rows of g kept in the step (redundant rows dropped at
        assembly); static so that the usual case, nothing dropped, costs no indexing
    *_params, *_kinds : per kind, the stacked parameters and the kind (static)
    rotor_params : hybrid rotors: ``frame`` (n_r, 4) of the master, ``axis`` (n_r, 3) body-fixed unit
        axis a, ``axial_inertia`` J_a (n_r,), ``friction`` c (n_r,)
    rotor_laws : (static) per rotor its motor law or None
    tree : the kinematic tree of the reduced backend (:class:`conserve.model.tree.Tree`)
    parameters : {name: float64 scalar} the values of the :class:`~conserve.model.parameters.Parameter` s
        the laws read (bound to them inside a step, :func:`~conserve.model.parameters.bound`)
    controllers : (static) the sampled controllers (:class:`conserve.control.controller.Sampler`),
        whose held commands are parameters; run by :mod:`conserve.backends.sampled`
    """

    mu: jax.Array
    translational: jax.Array
    rigid_frames: jax.Array
    constraint_params: tuple
    potential_params: tuple
    coordinate_params: tuple
    load_params: tuple
    constraint_kinds: tuple
    potential_kinds: tuple
    coordinate_kinds: tuple
    load_kinds: tuple
    rotor_params: dict
    rotor_laws: tuple
    constraint_keep: tuple
    tree: object = None
    parameters: dict = field(default_factory=dict)
    controllers: tuple = ()

    @property
    def n_coordinates(self):
        return 3 * self.mu.shape[0]

    @staticmethod
    def blocks(q):
        """The extended block array Q (n_blocks + 4, 3): coordinates and the ground frame."""
        return jnp.concatenate([q.reshape(-1, 3), jnp.asarray(GROUND_BLOCKS, q.dtype)])

    # --- mass and momenta -------------------------------------------------------------
    def mass_times(self, v):
        """M v, (n_q,). μ is block diagonal by part (4 × 4 per rigid body, with its hybrid rotors'
        share; 1 × 1 per point mass): for more than :data:`DENSE_MASS_BLOCKS` blocks applied block
        by block, O(n_q), else as one dense product (fewer operations; no scatter, which XLA's CPU
        compiler makes a loop of its own)."""
        V = v.reshape(-1, 3)
        if V.shape[0] <= DENSE_MASS_BLOCKS:
            return (self.mu @ V).ravel()
        idx = self.rigid_frames
        diagonal = jnp.diagonal(self.mu)
        if not idx.shape[0]:
            return (diagonal[:, None] * V).ravel()
        blocks = self.mu[idx[:, :, None], idx[:, None, :]]  # (n_rigid, 4, 4)
        points = diagonal.at[idx.ravel()].set(0.0)  # the point masses' 1 × 1 blocks
        return (points[:, None] * V).at[idx].add(contract("nij,njc->nic", blocks, V[idx])).ravel()

    def kinetic_energy(self, v, p):
        """T = ½ vᵀ M' v + Σ_k p_k² / (2 J_a,k) in J (M' holds the hybrid rotors' mass and transverse
        inertia, p_k their axial angular momenta)."""
        return 0.5 * v @ self.mass_times(v) + jnp.sum(0.5 * p**2 / self.rotor_params["axial_inertia"])

    def routhian(self, q, v, p, s):
        """R = ½ vᵀ M' v − p·θ'(q, v, p) − V(q, s) in J: the Lagrangian with the hybrid rotors'
        cyclic spin angles eliminated at fixed axial momenta p (Routh; −p·θ' = p·(ω·a) + const,
        the gyroscopic coupling). The reduced ODE and the linearisation differentiate it."""
        return 0.5 * v @ self.mass_times(v) - p @ self.rotor_relative_rates(q, v, p) - self.potential_energy(q, s)

    def rayleigh(self, q, v):
        """(R, ṡ): the dissipation potential R = ½ Σ c_k ṡ_k² + Σ D_k(ṡ_k) + ½ Σ P_e of the joint
        dampers (viscous, and dry friction D = τ_c ω_s log cosh(ṡ/ω_s),
        :func:`~conserve.model.coordinates.dry_friction_potential`) and the viscous potentials
        (:meth:`viscous_powers` P_e), in W, whose v-gradient is the damping force, and the joint
        rates ṡ = ∂s/∂q v (n_s,). Rotor bearings act on the spin angles only and are not in R."""
        s_dot = jax.jvp(self.coordinate_values, (q,), (v,))[1]
        if not s_dot.size:
            return 0.5 * jnp.sum(self.viscous_powers(q, v)), s_dot
        c = jnp.concatenate([g["damping"] for _, g, _ in self.coordinate_groups()])
        dry = jnp.concatenate([dry_friction_potential(g, s_dot[sl]) for _, g, sl in self.coordinate_groups()])
        return 0.5 * c @ s_dot**2 + jnp.sum(dry) + 0.5 * jnp.sum(self.viscous_powers(q, v)), s_dot

    def viscous_groups(self):
        """(kind, params) of the potential kinds with a viscous part (params ``damping`` (n, k):
        η_k on the invariants' rates, a Kelvin–Voigt material's), in the order of their
        dissipation entries."""
        return [(k, p) for k, p in zip(self.potential_kinds, self.potential_params) if "damping" in p]

    def viscous_powers(self, q, v):
        """(n_v,) the power Σ_k η_k π̇_k² in W each viscous potential element dissipates at (q, q̇)."""
        powers = [jnp.sum(p["damping"] * jax.jvp(lambda x, k=k, p=p: k.invariants(p, self.blocks(x)), (q,), (v,))[1]
                          ** 2, axis=1) for k, p in self.viscous_groups()]
        return jnp.concatenate(powers) if powers else jnp.zeros((0,), q.dtype)

    def linear_momentum(self, v):
        """L = Σ_a t_a (M v)_a over translational blocks a, in kg m/s (3,)."""
        return self.translational @ self.mass_times(v).reshape(-1, 3)

    def momentum_scales(self, q, v, p):
        """(Σ_a |q_a| |(M' v)_a| + Σ_k |p_k| |ã_k|, Σ_a t_a |(M v)_a|): the size of the terms that
        make up the angular momentum about the origin (kg m²/s) and the linear momentum (kg m/s),
        the scales their round-off and drift are measured against."""
        Mv = jnp.linalg.norm(self.mass_times(v).reshape(-1, 3), axis=1)
        J = jnp.linalg.norm(q.reshape(-1, 3), axis=1) @ Mv
        J = J + jnp.abs(p) @ jnp.linalg.norm(self.rotor_axes(q), axis=1) if self.n_rotors else J
        return J, self.translational @ Mv

    def angular_momentum(self, q, v, p):
        """J = Σ_a q_a × (M' v)_a + Σ_k p_k ã_k(q) about the origin, in kg m²/s (3,)
        (q_a over all 3-vector blocks; ã_k the rotor axes of ``rotor_axes``)."""
        J = jnp.sum(jnp.cross(q.reshape(-1, 3), self.mass_times(v).reshape(-1, 3)), axis=0)
        return J + p @ self.rotor_axes(q) if self.n_rotors else J

    # --- hybrid rotors (Becker et al.; docs/guide/modelling.rst) ----------------------
    @property
    def n_rotors(self):
        return self.rotor_params["axial_inertia"].shape[0]

    def master_directors(self, q):
        return q.reshape(-1, 3)[self.rotor_params["frame"][:, 1:]]  # (n_r, 3, 3), d_i in rows

    def rotor_axes(self, q):
        """ã_k(q) = Σ_j a_kj d_{j+1} × d_{j+2} (n_r, 3): quadratic, = the inertial spin axis on rotations."""
        d = self.master_directors(q)
        pairs = jnp.cross(d[:, :, None, :], d[:, None, :, :])  # d_k × d_l
        return 0.5 * contract("nj,jkl,nklc->nc", self.rotor_params["axis"], EPS, pairs)

    def rotor_relative_rates(self, q, v, p):
        """θ'_k = p_k / J_a,k − ω·a_k (n_r,) in rad/s, ω·a = ½ vᵀ A_k q."""
        if not self.n_rotors:
            return jnp.zeros((0,), q.dtype)
        d, dv = self.master_directors(q), self.master_directors(v)
        alpha = contract("nk,kij->nij", self.rotor_params["axis"], EPS)
        w = 0.5 * contract("nij,nic,njc->n", alpha, dv, d)
        return p / self.rotor_params["axial_inertia"] - w

    def rotor_momenta(self, q, v, rates):
        """p_k = J_a,k (ω·a_k + θ'_k) (n_r,): the axial momenta that give the rotors the relative
        spin rates θ' (rad/s) on masters moving with v (the inverse of :meth:`rotor_relative_rates`)."""
        p0 = jnp.zeros_like(rates)
        return self.rotor_params["axial_inertia"] * (rates - self.rotor_relative_rates(q, v, p0))

    # --- constraints ------------------------------------------------------------------
    @property
    def n_constraints(self):
        """Number of constraint rows used in the step (after dropping redundant rows)."""
        return len(self.constraint_keep)

    @property
    def _n_rows(self):
        return sum(len(k.rows) * _n_elements(p) for k, p in zip(self.constraint_kinds, self.constraint_params))

    @property
    def _all_kept(self):
        return len(self.constraint_keep) == self._n_rows

    def constraint_groups(self):
        """(kind, params, slice of its rows in :meth:`all_constraints`) per constraint kind."""
        out, offset = [], 0
        for kind, p in zip(self.constraint_kinds, self.constraint_params):
            n = len(kind.rows) * _n_elements(p)
            out.append((kind, p, slice(offset, offset + n)))
            offset += n
        return out

    def to_all_rows(self, kept):
        """Values of the kept rows (n_c,) spread over all rows (dropped redundant rows 0)."""
        if self._all_kept:
            return kept
        return jnp.zeros(self._n_rows, kept.dtype).at[np.asarray(self.constraint_keep, dtype=np.int64)].set(kept)

    @property
    def row_kinds(self):
        """The constraint kind of every kept row (n_c,), in the order of :meth:`constraints`."""
        kinds = [k for k, p in zip(self.constraint_kinds, self.constraint_params)
                 for _ in range(len(k.rows) * _n_elements(p))]
        return tuple(kinds[i] for i in self.constraint_keep)

    @property
    def couples_coordinates(self):
        """True if a constraint reads the tracked joint coordinates s (coordinate relations)."""
        return any(k.reads_coordinates for k in self.constraint_kinds)

    def configuration(self, q, theta, s, t=0.0):
        """The :class:`Configuration` constraint kinds see: blocks, rotor spin angles, joint
        coordinates and the time t (s; only prescribed motions read it)."""
        return Configuration(self.blocks(q), theta, s, t)

    @property
    def time_dependent(self):
        """True if a constraint depends on time (a prescribed motion, :mod:`conserve.model.drives`)."""
        return any(getattr(k, "rheonomic", False) for k in self.constraint_kinds)

    def all_constraints(self, q, theta, s, field="residual", t=0.0):
        """g(q, θ, s, t) with every row, kind by kind, element-major within a kind (monitoring);
        ``field="magnitude"``: the size of the terms each row adds up (its round-off is ε times it)."""
        C = self.configuration(q, theta, s, t)
        rows = [getattr(k, field)(p, C).ravel() for k, p in zip(self.constraint_kinds, self.constraint_params)]
        return jnp.concatenate(rows) if rows else jnp.zeros((0,), q.dtype)

    def constraints(self, q, theta, s, t=0.0):
        """g(q, θ, s, t) restricted to the kept rows, (n_c,)."""
        return self._kept(self.all_constraints(q, theta, s, t=t))

    def constraint_magnitudes(self, q, theta, s, t=0.0):
        """(n_c,) the size of the terms of each kept row of g (m for points, 1 for directors, …):
        its round-off level is ε times it, whatever the distance from the origin."""
        return self._kept(self.all_constraints(q, theta, s, "magnitude", t))

    def _kept(self, rows):
        return rows if self._all_kept else rows[np.asarray(self.constraint_keep, dtype=np.int64)]

    def initial_constraints(self, q, theta, t=0.0):
        """g(q, θ, s(q), t) with the joint coordinates computed from q: for the checks at assembly,
        where G = ∂g/∂(q, θ) must include the dependence of s on q."""
        return self.all_constraints(q, theta, self.coordinate_values(q), t=t)

    # --- joint coordinates (spring-damper-motor elements) -------------------------------
    def coordinate_groups(self):
        """(kind, params, slice into s) per coordinate kind."""
        out, offset = [], 0
        for kind, p in zip(self.coordinate_kinds, self.coordinate_params):
            n = _n_elements(p)
            out.append((kind, p, slice(offset, offset + n)))
            offset += n
        return out

    def coordinate_values(self, q):
        """Joint coordinates computed from q (angles in (−π, π]): the initial s."""
        Q = self.blocks(q)
        vals = [jax.vmap(k.geometry.value)(k.geometry.invariants(p, Q)) for k, p, _ in self.coordinate_groups()]
        return jnp.concatenate(vals) if vals else jnp.zeros((0,), q.dtype)

    # --- energy -----------------------------------------------------------------------
    def potential_energies(self, q):
        """(n_potentials,) each potential element's energy U(π(q)) in J, in the order of the
        layout's ``potential_names`` (the joint springs' not included)."""
        Q = self.blocks(q)
        energies = [jax.vmap(k.energy)(p, k.invariants(p, Q)) for k, p in zip(self.potential_kinds,
                                                                            self.potential_params)]
        return jnp.concatenate([e.reshape(e.shape[0], -1).sum(axis=1) for e in energies] or [jnp.zeros((0,), q.dtype)])

    def potential_energy(self, q, s):
        """V = Σ U(π(q)) over potentials + Σ ½ k (s − s_0)² over joint springs, in J."""
        Q = self.blocks(q)
        total = jnp.zeros((), q.dtype)
        for k, p in zip(self.potential_kinds, self.potential_params):
            total = total + jnp.sum(jax.vmap(k.energy)(p, k.invariants(p, Q)))
        for _, p, sl in self.coordinate_groups():
            total = total + jnp.sum(0.5 * p["stiffness"] * (s[sl] - p["rest"]) ** 2)
        return total

    def applied_forces(self, t, q, v, s, theta, p):
        """Motor and load forces of the continuous equations at (t, q, q̇): the h -> 0 limit of the
        motor and load terms of :meth:`discrete_forces` and :meth:`rotor_step` (the ode backend).
        Laws see the exact state: Q is affine in q, so q ∓ v/2 over h = 1 has midpoint q and
        rate q̇, and :func:`midpoint_state` gives position, velocity, rotation and ω of each frame.

        Returns
        -------
        f : (n_q,) generalized force of the joint motors, Σ τ ∂s/∂q, and of the applied loads
        tau : (n_r,) the rotors' motor torques (N m), acting on their axial momenta p
        power : (n_w,) power of each motor and load in W, in the order of the per-step work
        """
        Qa, Qb = self.blocks(q - 0.5 * v), self.blocks(q + 0.5 * v)
        s_dot = jax.jvp(self.coordinate_values, (q,), (v,))[1]
        torque, power = jnp.zeros_like(s), []
        for k, prm, sl in self.coordinate_groups():
            if k.motor is not None:
                tau = k.motor.vmap((None, 0, 0, 0))(t, s[sl], s_dot[sl],
                                              midpoint_state(Qa, Qb, prm["frame_a"], 1.0))
                torque = torque.at[sl].set(tau)
                power.append(tau * s_dot[sl])
        f = jax.vjp(self.coordinate_values, q)[1](torque)[0] if s.size else jnp.zeros_like(q)
        for k, prm in zip(self.load_kinds, self.load_params):
            force, load_power = k.generalized_force(prm, Qa, Qb, t, 1.0)
            f = f + force[:-4].ravel()
            power.append(load_power)
        tau_r = jnp.zeros_like(p)
        if any(law is not None for law in self.rotor_laws):
            rates = self.rotor_relative_rates(q, v, p)
            tau_r, motors = self.rotor_motors(t, theta, rates, midpoint_state(Qa, Qb, self.rotor_params["frame"], 1.0))
            power.append(tau_r[motors] * rates[motors])
        return f, tau_r, jnp.concatenate(power) if power else jnp.zeros((0,), q.dtype)

    def rotor_motors(self, t, angle, rate, master):
        """(τ (n_r,), motors): the hybrid rotors' motor torques in N m at time t (s), 0 for a rotor
        without a motor, from each rotor's spin ``angle`` (rad) and ``rate`` (rad/s) relative to its
        master and the masters' BodyStates ``master`` (leading axis n_r); ``motors`` (numpy) the
        rotors with a motor. Each distinct law runs once, on its rotors (a law table,
        :mod:`~conserve.model.lawtable`)."""
        motors = np.array([k for k, law in enumerate(self.rotor_laws) if law is not None], dtype=np.int64)
        states = RotorState(angle[motors], rate[motors], jax.tree.map(lambda x: x[motors], master))
        tau = _rotor_table(self.rotor_laws).vmap((None, 0))(t, states)
        source = np.full(len(self.rotor_laws), motors.size)  # each rotor's motor, or the zero after the last
        source[motors] = np.arange(motors.size)
        return jnp.concatenate([tau, jnp.zeros(1, tau.dtype)])[source], motors


@lru_cache(maxsize=64)
def _rotor_table(laws):
    """The :class:`~conserve.model.lawtable.LawTable` of the motor laws among a model's ``rotor_laws``."""
    return LawTable.of([law for law in laws if law is not None])
