"""The assembled model: flat arrays and pure jax functions of the coordinates (DESIGN §2).

A :class:`Model` is a jax pytree. Its leaves are numbers (mass blocks, element parameters,
index arrays); its static part is only the list of element kinds. Two models with the same
kinds and array shapes therefore share one compiled step, whatever their parameters.

Conventions: q, v are flat (n_q,) = (3 n_blocks,); Q = q.reshape(-1, 3) stacked with the
ground frame (:data:`conserve.kinematics.GROUND_BLOCKS`). M = kron(μ, I3) with μ (n_blocks,
n_blocks) symmetric and constant.
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
    """The state at one time node: coordinates q (n_q,) and velocities v (n_q,)."""

    q: jax.Array
    v: jax.Array


class Energy(NamedTuple):
    """Kinetic, potential and total energy in J (arrays of equal shape)."""

    kinetic: jax.Array
    potential: jax.Array
    total: jax.Array


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["mu", "translational", "rigid_frames", "constraint_params", "potential_params"],
    meta_fields=["constraint_kinds", "potential_kinds"],
)
@dataclass(frozen=True)
class Model:
    """Mass, constraints and potentials of an assembled system as pure functions.

    Attributes
    ----------
    mu : (n_blocks, n_blocks) block mass matrix, M = kron(μ, I3)
    translational : (n_blocks,) 1 for blocks that are positions (φ), 0 for directors
    rigid_frames : (n_rigid, 4) block indices (φ, d1, d2, d3) of the rigid bodies
    constraint_params, potential_params : tuples of parameter dicts, one per kind
    constraint_kinds, potential_kinds : tuples of element kinds (static)
    """

    mu: jax.Array
    translational: jax.Array
    rigid_frames: jax.Array
    constraint_params: tuple
    potential_params: tuple
    constraint_kinds: tuple
    potential_kinds: tuple

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
    def constraints(self, q):
        """g(q), (n_c,): all constraint rows, kind by kind, element-major within a kind."""
        Q = self.blocks(q)
        rows = [k.residual(p, Q).ravel() for k, p in zip(self.constraint_kinds, self.constraint_params)]
        return jnp.concatenate(rows) if rows else jnp.zeros((0,), q.dtype)

    @property
    def n_constraints(self):
        return sum(len(k.rows) * p[next(iter(p))].shape[0]
                   for k, p in zip(self.constraint_kinds, self.constraint_params))

    def constraint_force(self, q, lam):
        """G(q)ᵀ λ as a vector–Jacobian product, (n_q,)."""
        return jax.vjp(self.constraints, q)[1](lam)[0]

    # --- potentials -------------------------------------------------------------------
    def _invariants(self, q):
        Q = self.blocks(q)
        return [k.invariants(p, Q) for k, p in zip(self.potential_kinds, self.potential_params)]

    def potential_energy(self, q):
        """V(q) = Σ_elements U(π(q)) in J."""
        total = jnp.zeros((), q.dtype)
        for k, p, pi in zip(self.potential_kinds, self.potential_params, self._invariants(q)):
            total = total + jnp.sum(jax.vmap(k.energy)(p, pi))
        return total

    def discrete_potential_force(self, q0, q1):
        """∇̄V(q0, q1) = Σ ∇π(q_{n+½})ᵀ ∇̄U(π0, π1), (n_q,) — exact: ∇̄V·(q1 − q0) = V(q1) − V(q0)."""
        qm = 0.5 * (q0 + q1)
        grad_u = []
        for k, p, pi0, pi1 in zip(self.potential_kinds, self.potential_params,
                                  self._invariants(q0), self._invariants(q1)):
            grad_u.append(jax.vmap(lambda pe, a, b, k=k: discrete_gradient(partial(k.energy, pe), a, b))(p, pi0, pi1))
        if not grad_u:
            return jnp.zeros_like(q0)
        return jax.vjp(self._invariants, qm)[1](grad_u)[0]

    def energy(self, state: State) -> Energy:
        T = self.kinetic_energy(state.v)
        V = self.potential_energy(state.q)
        return Energy(T, V, T + V)
