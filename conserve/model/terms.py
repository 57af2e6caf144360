"""Element kinds: the vectorised pure functions behind every user-facing part.

A user element (body, joint, force) contributes *terms*: a kind (one of the classes below)
and the parameters of one element. Assembly stacks the parameters of all terms of one kind
into arrays with a leading element axis, so each kind is evaluated by one vectorised call
however many elements use it (DESIGN §10).

Two families share the code paths of the assembled model:

- constraint kinds: ``residual(params, Q) -> (n, rows)``, quadratic in the coordinates so
  that the midpoint Jacobian G(q_{n+½}) is an exact discrete derivative (DESIGN §4);
- potential kinds: ``invariants(params, Q) -> (n, k)`` quadratic (or linear) in the
  coordinates and ``energy(params_e, pi_e) -> scalar`` for one element; the discrete force
  follows from :func:`conserve.discrete.discrete_gradient` (DESIGN §5).

Q is the extended block array (m, 3) of :mod:`conserve.kinematics.frames`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from ..kinematics.frames import material_point


@dataclass
class Term:
    """One element's share of a kind: its parameters (numpy arrays) and its owner's name."""

    kind: type
    params: dict = field(default_factory=dict)
    owner: str = ""


class DirectorOrthonormality:
    """Internal constraints of a rigid body (DESIGN §3): ½(d_i·d_i − 1) = 0, d_i·d_j = 0 (i<j).

    params: ``frame`` (n, 4) block indices. Residual (n, 6), dimensionless.
    """

    rows = ("|d1|²", "|d2|²", "|d3|²", "d1·d2", "d1·d3", "d2·d3")

    @staticmethod
    def residual(p, Q):
        d = Q[p["frame"][:, 1:]]  # (n, 3, 3), d_i in row i
        g = jnp.einsum("nik,njk->nij", d, d)
        return jnp.stack(
            [
                0.5 * (g[:, 0, 0] - 1.0),
                0.5 * (g[:, 1, 1] - 1.0),
                0.5 * (g[:, 2, 2] - 1.0),
                g[:, 0, 1],
                g[:, 0, 2],
                g[:, 1, 2],
            ],
            axis=1,
        )


class PointCoincidence:
    """Two material points coincide: x_A − x_B = 0 (spherical joint, DESIGN §4). Linear in q.

    params: ``frame_a``, ``frame_b`` (n, 4); ``at_a``, ``at_b`` (n, 3) body coordinates in m.
    Residual (n, 3) in m; its multiplier λ is the force in N the joint exerts on B (on A: −λ).
    """

    rows = ("x", "y", "z")

    @staticmethod
    def residual(p, Q):
        return material_point(Q, p["frame_a"], p["at_a"]) - material_point(Q, p["frame_b"], p["at_b"])


class UniformGravity:
    """V = −m g·x_c for a part's centre of mass x_c = φ (the reference point is the centre of mass).

    Invariant π = g·φ (linear; in m²/s²), energy U = −m π in J.
    params: ``frame`` (n, 4), ``mass`` (n,) in kg, ``g`` (n, 3) in m/s².
    """

    @staticmethod
    def invariants(p, Q):
        return jnp.sum(p["g"] * Q[p["frame"][:, 0]], axis=1, keepdims=True)

    @staticmethod
    def energy(p, pi):
        return -p["mass"] * pi[0]


def stack_terms(terms):
    """Group terms by kind (order of first appearance) and stack their parameters.

    Returns a list of (kind, params with a leading element axis, owners).
    """
    groups: dict[type, list[Term]] = {}
    for t in terms:
        groups.setdefault(t.kind, []).append(t)
    out = []
    for kind, ts in groups.items():
        params = {k: np.stack([np.asarray(t.params[k]) for t in ts]) for k in ts[0].params}
        out.append((kind, params, [t.owner for t in ts]))
    return out
