"""The assembled model: flat arrays and pure jax functions of the state (DESIGN §2).

A :class:`Model` is a jax pytree. Its leaves are numbers (mass blocks, element parameters,
index arrays); its static part is the tuple of element kinds. Two models with the same kinds
and array shapes share one compiled step, whatever their parameters.

Conventions: q, v are flat (n_q,) = (3 n_blocks,); Q = q.reshape(-1, 3) stacked with the
ground frame (:data:`conserve.kinematics.GROUND_BLOCKS`); M = kron(μ, I3) with μ symmetric and
constant; s (n_s,) are the tracked joint coordinates of spring-damper-motor elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..discrete.gradient import discrete_gradient
from ..kinematics.frames import GROUND_BLOCKS


class State(NamedTuple):
    """The state at one time node: coordinates q (n_q,), velocities v (n_q,), joint coordinates s (n_s,)."""

    q: jax.Array
    v: jax.Array
    s: jax.Array


class Energy(NamedTuple):
    """Kinetic, potential and total energy in J (arrays of equal shape)."""

    kinetic: jax.Array
    potential: jax.Array
    total: jax.Array


def _n_elements(params):
    return next(iter(params.values())).shape[0]


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["mu", "translational", "rigid_frames", "constraint_params", "constraint_keep",
                 "potential_params", "coordinate_params", "load_params"],
    meta_fields=["constraint_kinds", "potential_kinds", "coordinate_kinds", "load_kinds"],
)
@dataclass(frozen=True)
class Model:
    """Mass, constraints, potentials, joint-coordinate elements and loads as pure functions.

    Attributes
    ----------
    mu : (n_blocks, n_blocks) block mass matrix, M = kron(μ, I3)
    translational : (n_blocks,) 1 for blocks that are positions (φ), 0 for directors
    rigid_frames : (n_rigid, 4) block indices (φ, d1, d2, d3) of the rigid bodies
    constraint_keep : (n_c,) rows of g kept in the step (redundant rows dropped at assembly)
    *_params, *_kinds : per kind, the stacked parameters and the kind (static)
    """

    mu: jax.Array
    translational: jax.Array
    rigid_frames: jax.Array
    constraint_params: tuple
    constraint_keep: jax.Array
    potential_params: tuple
    coordinate_params: tuple
    load_params: tuple
    constraint_kinds: tuple
    potential_kinds: tuple
    coordinate_kinds: tuple
    load_kinds: tuple

    @property
    def n_coordinates(self):
        return 3 * self.mu.shape[0]

    @staticmethod
    def blocks(q):
        """The extended block array Q (n_blocks + 4, 3): coordinates and the ground frame."""
        return jnp.concatenate([q.reshape(-1, 3), jnp.asarray(GROUND_BLOCKS, q.dtype)])

    # --- mass and momenta -------------------------------------------------------------
    def mass_times(self, v):
        """M v, (n_q,)."""
        return (self.mu @ v.reshape(-1, 3)).ravel()

    def kinetic_energy(self, v):
        """T = ½ vᵀ M v in J."""
        return 0.5 * v @ self.mass_times(v)

    def linear_momentum(self, v):
        """L = Σ_a t_a (M v)_a over translational blocks a, in kg m/s (3,)."""
        return self.translational @ self.mass_times(v).reshape(-1, 3)

    def angular_momentum(self, q, v):
        """J = Σ_a q_a × (M v)_a about the origin, in kg m²/s (3,) (rotor-scheme.md §1)."""
        return jnp.sum(jnp.cross(q.reshape(-1, 3), self.mass_times(v).reshape(-1, 3)), axis=0)

    # --- constraints ------------------------------------------------------------------
    @property
    def n_constraints(self):
        """Number of constraint rows used in the step (after dropping redundant rows)."""
        return self.constraint_keep.shape[0]

    def all_constraints(self, q):
        """g(q) with every row, kind by kind, element-major within a kind (monitoring)."""
        Q = self.blocks(q)
        rows = [k.residual(p, Q).ravel() for k, p in zip(self.constraint_kinds, self.constraint_params)]
        return jnp.concatenate(rows) if rows else jnp.zeros((0,), q.dtype)

    def constraints(self, q):
        """g(q) restricted to the kept rows, (n_c,)."""
        return self.all_constraints(q)[self.constraint_keep]

    def constraint_force(self, q0, q1, lam):
        """Ḡ(q0, q1)ᵀ λ, (n_q,): G(q_{n+½})ᵀλ for quadratic kinds (exact discrete derivative),
        the invariant-space discrete gradient of λ·outer(π) for kinds with ``outer``."""
        n_all = sum(len(k.rows) * _n_elements(p) for k, p in zip(self.constraint_kinds, self.constraint_params))
        lam_all = jnp.zeros(n_all, q0.dtype).at[self.constraint_keep].set(lam)
        Q0, Q1 = self.blocks(q0), self.blocks(q1)
        cotangents, offset = [], 0
        for kind, p in zip(self.constraint_kinds, self.constraint_params):
            n, r = _n_elements(p), len(kind.rows)
            lk = lam_all[offset:offset + n * r].reshape(n, r)
            offset += n * r
            if hasattr(kind, "outer"):
                def dg(pe, a, b, le, kind=kind):
                    return discrete_gradient(lambda pi: le @ kind.outer(pe, pi), a, b)
                lk = jax.vmap(dg)(p, kind.invariants(p, Q0), kind.invariants(p, Q1), lk)
            cotangents.append(lk)

        def fields(q):
            Q = self.blocks(q)
            return [k.invariants(p, Q) if hasattr(k, "outer") else k.residual(p, Q)
                    for k, p in zip(self.constraint_kinds, self.constraint_params)]

        if not cotangents:
            return jnp.zeros_like(q0)
        return jax.vjp(fields, 0.5 * (q0 + q1))[1](cotangents)[0]

    # --- joint coordinates (spring-damper-motor elements) -------------------------------
    def _coordinate_groups(self):
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
        vals = [jax.vmap(k.geometry.value)(k.geometry.invariants(p, Q)) for k, p, _ in self._coordinate_groups()]
        return jnp.concatenate(vals) if vals else jnp.zeros((0,), q.dtype)

    # --- energy -----------------------------------------------------------------------
    def potential_energy(self, q, s):
        """V = Σ U(π(q)) over potentials + Σ ½ k (s − s_0)² over joint springs, in J."""
        Q = self.blocks(q)
        total = jnp.zeros((), q.dtype)
        for k, p in zip(self.potential_kinds, self.potential_params):
            total = total + jnp.sum(jax.vmap(k.energy)(p, k.invariants(p, Q)))
        for _, p, sl in self._coordinate_groups():
            total = total + jnp.sum(0.5 * p["stiffness"] * (s[sl] - p["rest"]) ** 2)
        return total

    # --- discrete forces --------------------------------------------------------------
    def discrete_forces(self, t, h, state: State, q1):
        """All non-constraint discrete forces of the step t -> t + h.

        Returns
        -------
        f : (n_q,) ∇̄V(q_n, q_{n+1}) + Σ w ∇̄s − F̄ (potentials, joint springs-dampers-motors,
            applied loads), so that f·Δq = ΔV + D − W exactly
        s1 : (n_s,) joint coordinates at t + h
        work : (n_w,) discrete work of each motor and load (J)
        dissipation : (n_s,) energy each joint damper removes, c Δs²/h ≥ 0 (J)
        """
        q0, s0 = state.q, state.s
        qm = 0.5 * (q0 + q1)
        Q0, Q1 = self.blocks(q0), self.blocks(q1)
        tm = t + 0.5 * h
        invariants, cotangents = [], []
        # potentials through their invariants (DESIGN §5)
        for k, p in zip(self.potential_kinds, self.potential_params):
            dg = getattr(k, "discrete_gradient", None)
            if dg is None:
                def dg(pe, a, b, k=k):
                    return discrete_gradient(partial(k.energy, pe), a, b)
            invariants.append(k.invariants)
            cotangents.append(jax.vmap(dg)(p, k.invariants(p, Q0), k.invariants(p, Q1)))
        # joint coordinates: w ∇̄s with ∇̄s = ∇π(q_m)ᵀ ∂̄s/∂π
        s1, work, dissipation = [], [], []
        for k, p, sl in self._coordinate_groups():
            ds, dsdpi = jax.vmap(k.geometry.increment)(k.geometry.invariants(p, Q0), k.geometry.invariants(p, Q1))
            s_mid = s0[sl] + 0.5 * ds
            rate = ds / h
            w = p["stiffness"] * (s_mid - p["rest"]) + p["damping"] * rate
            if k.motor is not None:
                tau = jax.vmap(k.motor, in_axes=(None, 0, 0))(tm, s_mid, rate)
                w = w - tau
                work.append(tau * ds)
            invariants.append(k.geometry.invariants)
            cotangents.append(w[:, None] * dsdpi)
            s1.append(s0[sl] + ds)
            dissipation.append(p["damping"] * ds * rate)
        params = list(self.potential_params) + [p for _, p, _ in self._coordinate_groups()]

        def all_invariants(q):
            Q = self.blocks(q)
            return [fn(p, Q) for fn, p in zip(invariants, params)]

        f = jax.vjp(all_invariants, qm)[1](cotangents)[0] if invariants else jnp.zeros_like(q0)
        # applied loads at the midpoint
        for k, p in zip(self.load_kinds, self.load_params):
            force, w_load = k.generalized_force(p, Q0, Q1, tm, h)
            f = f - force[:-4].ravel()
            work.append(w_load)
        cat = lambda xs: jnp.concatenate(xs) if xs else jnp.zeros((0,), q0.dtype)  # noqa: E731
        return f, cat(s1), cat(work), cat(dissipation)
