"""Element kinds: the vectorised pure functions behind every user-facing part.

A user element (body, joint, force) contributes *terms*: a kind and the parameters of one
element. Assembly stacks the parameters of all terms of one kind into arrays with a leading
element axis, so each kind is evaluated by one vectorised call however many elements use it
(DESIGN §10). A kind is a class, or a hashable instance when it carries user functions.

Families (Q is the extended block array (m, 3) of ``conserve.kinematics.frames``):

- constraint kinds: ``residual(p, Q) -> (n, rows)`` and ``magnitude(p, Q) -> (n, rows)``, the
  size of the terms each row adds up (the row's round-off is ε times it: Newton's round-off
  floor and the initial-state check use it, so a joint 10⁷ m from the origin is judged by
  ε·10⁷ m, not by 1). The built-in ones are quadratic in the
  coordinates (and in θ or s where they declare ``reads_spin_angles`` or
  ``reads_coordinates``), so the midpoint Jacobian G(q_{n+½}) is an exact discrete derivative
  (DESIGN §4). A kind with ``invariants(p, Q)`` and ``outer(p_e, pi_e)`` (g = outer(π)) gets
  the discrete gradient of ``outer`` in invariant space instead (user constraints).
- potential kinds: ``invariants(p, Q) -> (n, k)`` quadratic (or linear) in the coordinates
  and ``energy(p_e, pi_e) -> scalar``; the discrete force follows from
  ``conserve.discrete.discrete_gradient`` unless the kind gives a closed-form
  ``discrete_gradient(p_e, pi0_e, pi1_e)`` (DESIGN §5).
- load kinds: ``generalized_force(p, Q0, Q1, t, h) -> (Q-shaped force, (n,) work)`` for
  applied, non-conservative loads evaluated at the midpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics.frames import frames_of, material_point, material_vector, point_magnitude, vector_magnitude


#: A residual row is at its round-off floor when ``|r_i| ≤ ROUNDOFF · m_i``, with m_i the size of the
#: terms the row adds up (the sum of their absolute values; constraint kinds give theirs as
#: ``magnitude``): a componentwise backward error, after Oettli and Prager. 2¹⁰ ε leaves room for
#: rows that add up tens of terms. Used by Newton's round-off floor (:class:`conserve.Newton`)
#: and by the check of the initial state at assembly.
ROUNDOFF = 1024 * float(np.finfo(np.float64).eps)


@dataclass
class Term:
    """One element's share of a kind: parameters (numpy arrays), owner name, row labels."""

    kind: object
    params: dict = field(default_factory=dict)
    owner: str = ""
    rows: tuple = ()
    #: coordinate terms whose indices in the state's s fill ``params["coordinates"]`` at assembly
    links: tuple = ()


# --- constraints -------------------------------------------------------------------------


@partial(jax.tree_util.register_dataclass, data_fields=["Q", "theta", "s"], meta_fields=[])
@dataclass(frozen=True)
class Configuration:
    """What constraint kinds see: the extended block array Q (indexing ``C[idx]`` reads Q), the
    spin angles θ (n_r,) of the hybrid rotors, which winch ropes couple to positions, and the
    tracked joint coordinates s (n_s,), which coordinate relations couple."""

    Q: jax.Array
    theta: jax.Array
    s: jax.Array

    def __getitem__(self, index):
        return self.Q[index]


class DirectorOrthonormality:
    """Internal constraints of a rigid body (DESIGN §3): ½(d_i·d_i − 1) = 0, d_i·d_j = 0 (i<j).

    params: ``frame`` (n, 4) block indices. Residual (n, 6), dimensionless.
    """

    rows = ("|d1|²", "|d2|²", "|d3|²", "d1·d2", "d1·d3", "d2·d3")

    @staticmethod
    def residual(p, Q):
        d = Q[p["frame"][:, 1:]]  # (n, 3, 3), d_i in row i
        g = jnp.einsum("nik,njk->nij", d, d)
        return jnp.stack([0.5 * (g[:, 0, 0] - 1.0), 0.5 * (g[:, 1, 1] - 1.0), 0.5 * (g[:, 2, 2] - 1.0),
                          g[:, 0, 1], g[:, 0, 2], g[:, 1, 2]], axis=1)

    @staticmethod
    def magnitude(p, Q):
        d = jnp.abs(Q[p["frame"][:, 1:]])
        g = jnp.einsum("nik,njk->nij", d, d)
        return jnp.stack([0.5 * (g[:, 0, 0] + 1.0), 0.5 * (g[:, 1, 1] + 1.0), 0.5 * (g[:, 2, 2] + 1.0),
                          g[:, 0, 1], g[:, 0, 2], g[:, 1, 2]], axis=1)


class PointCoincidence:
    """Two material points coincide: x_A − x_B = 0 (Thompson's spherical constraint). Linear.

    params: ``frame_a``, ``frame_b`` (n, 4); ``at_a``, ``at_b`` (n, 3) body points in m.
    Residual (n, 3) in m; its multiplier λ is the force in N the joint exerts on B (on A: −λ).
    """

    rows = ("x", "y", "z")

    @staticmethod
    def residual(p, Q):
        return material_point(Q, p["frame_a"], p["at_a"]) - material_point(Q, p["frame_b"], p["at_b"])

    @staticmethod
    def magnitude(p, Q):
        return point_magnitude(Q, p["frame_a"], p["at_a"]) + point_magnitude(Q, p["frame_b"], p["at_b"])


class VectorDot:
    """u_A · w_B = c for body-fixed vectors u of A and w of B (Thompson's perpendicular
    constraint for c = 0). Bilinear, hence quadratic.

    params: ``frame_a``, ``u`` (n, 3), ``frame_b``, ``w`` (n, 3), ``c`` (n,). Residual (n, 1).
    """

    rows = ("u·w",)

    @staticmethod
    def residual(p, Q):
        u = material_vector(Q, p["frame_a"], p["u"])
        w = material_vector(Q, p["frame_b"], p["w"])
        return (jnp.sum(u * w, axis=1) - p["c"])[:, None]

    @staticmethod
    def magnitude(p, Q):
        u = vector_magnitude(Q, p["frame_a"], p["u"])
        w = vector_magnitude(Q, p["frame_b"], p["w"])
        return (jnp.sum(u * w, axis=1) + jnp.abs(p["c"]))[:, None]


class PointOffset:
    """u_A · (x_B − x_A) = c: B's point stays in a plane of A normal to the body vector u.

    params: ``frame_a``, ``at_a``, ``u``, ``frame_b``, ``at_b``, ``c``. Residual (n, 1) in m.
    Bilinear (u linear in A's directors times a linear difference), hence quadratic.
    """

    rows = ("u·(xB−xA)",)

    @staticmethod
    def residual(p, Q):
        u = material_vector(Q, p["frame_a"], p["u"])
        r = material_point(Q, p["frame_b"], p["at_b"]) - material_point(Q, p["frame_a"], p["at_a"])
        return (jnp.sum(u * r, axis=1) - p["c"])[:, None]

    @staticmethod
    def magnitude(p, Q):
        u = vector_magnitude(Q, p["frame_a"], p["u"])
        r = point_magnitude(Q, p["frame_b"], p["at_b"]) + point_magnitude(Q, p["frame_a"], p["at_a"])
        return (jnp.sum(u * r, axis=1) + jnp.abs(p["c"]))[:, None]


class Distance:
    """½(|x_A − x_B|² − L²) = 0: two material points at fixed distance L (massless rod).

    params: ``frame_a``, ``at_a``, ``frame_b``, ``at_b``, ``length`` (n,) in m. Residual (n, 1) in m².
    """

    rows = ("|xA−xB|",)

    @staticmethod
    def residual(p, Q):
        r = material_point(Q, p["frame_a"], p["at_a"]) - material_point(Q, p["frame_b"], p["at_b"])
        return 0.5 * (jnp.sum(r * r, axis=1) - p["length"] ** 2)[:, None]

    @staticmethod
    def magnitude(p, Q):
        r = point_magnitude(Q, p["frame_a"], p["at_a"]) + point_magnitude(Q, p["frame_b"], p["at_b"])
        return 0.5 * (jnp.sum(r * r, axis=1) + p["length"] ** 2)[:, None]


class Rope:
    """Winch rope: ½(|x_A − x_B|² − L(θ)²) = 0 with free length L = L0 + r (θ_k − θ0) paid out
    by hybrid rotor k (P5). Quadratic in (q, θ), so the midpoint Jacobian is exact.

    params: ``frame_a``, ``at_a``, ``frame_b``, ``at_b``, ``rotor`` (n,) index into θ,
    ``radius`` r (n,) in m (its sign sets which way the drum pays out), ``length`` L0, ``theta0``.
    """

    rows = ("rope",)
    reads_spin_angles = True

    @staticmethod
    def residual(p, C):
        r = material_point(C, p["frame_a"], p["at_a"]) - material_point(C, p["frame_b"], p["at_b"])
        L = p["length"] + p["radius"] * (C.theta[p["rotor"]] - p["theta0"])
        return 0.5 * (jnp.sum(r * r, axis=1) - L**2)[:, None]

    @staticmethod
    def magnitude(p, C):
        r = point_magnitude(C, p["frame_a"], p["at_a"]) + point_magnitude(C, p["frame_b"], p["at_b"])
        L = jnp.abs(p["length"]) + jnp.abs(p["radius"]) * (jnp.abs(C.theta[p["rotor"]]) + jnp.abs(p["theta0"]))
        return 0.5 * (jnp.sum(r * r, axis=1) + L**2)[:, None]


class CoordinateRelation:
    """A linear relation between tracked joint coordinates: Σ_i c_i s_i − c0 = 0 (a gear, a belt,
    a winch rope on a full-body drum: ℓ − r α = L0 − r α0).

    Each s_i is carried in the state with an exact discrete increment (``conserve.model.coordinates``),
    s_{n+1} = s_n + Δs_i(q_n, q_{n+1}), so the step enforces g(s_{n+1}) = 0 and its discrete
    Jacobian Ḡ = Σ_i c_i ∇̄s_i satisfies Ḡ·Δq = Δg exactly: the relation does no work. The
    ∇̄s_i are invariant under rigid motions, so momentum is conserved as well.

    ``reads_coordinates``: marks kinds whose force acts through ∇̄s (see Model.constraint_force).
    params: ``coordinates`` (n, k) indices into s, ``coefficients`` (n, k), ``value`` c0 (n,).
    """

    rows = ("relation",)
    reads_coordinates = True

    @staticmethod
    def residual(p, C):
        return (jnp.sum(p["coefficients"] * C.s[p["coordinates"]], axis=1) - p["value"])[:, None]

    @staticmethod
    def magnitude(p, C):
        return (jnp.sum(jnp.abs(p["coefficients"] * C.s[p["coordinates"]]), axis=1) + jnp.abs(p["value"]))[:, None]


def of_coordinates_alone(kind) -> bool:
    """True for a constraint kind quadratic in the coordinates q alone: it reads neither spin
    angles (``reads_spin_angles``, a rope on a hybrid winch) nor joint coordinates
    (``reads_coordinates``), and has no user ``outer`` function. The reduced backend closes loops
    of such rows by loop coordinates; all others keep multipliers."""
    return not (getattr(kind, "reads_spin_angles", False) or getattr(kind, "reads_coordinates", False)
                or hasattr(kind, "outer"))


@dataclass(frozen=True, eq=False)
class UserConstraint:
    """A user's holonomic constraint g = outer(π(frames)) with a discrete gradient in π-space.

    ``invariants(*frames) -> (k,)`` (default: the parts' coordinates themselves, which makes
    the discrete gradient Gonzalez's and conserves energy but not necessarily momentum) and
    ``outer(pi) -> (rows,)``; ``rows``: equation labels. params: ``frames`` (n, n_parts, 4).
    """

    invariant_fn: object
    outer_fn: object
    rows: tuple = ("g",)

    def invariants(self, p, Q):
        return jax.vmap(lambda f: jnp.atleast_1d(self.invariant_fn(*frames_of(Q, f))))(p["frames"])

    def outer(self, p_e, pi):
        return jnp.atleast_1d(self.outer_fn(pi))

    def residual(self, p, Q):
        return jax.vmap(lambda pe, pi: self.outer(pe, pi))(p, self.invariants(p, Q))

    def magnitude(self, p, Q):
        """The user's function is opaque: 1 + the largest coordinate of its parts, per row."""
        size = jax.vmap(lambda f: 1.0 + jnp.max(jnp.abs(Q[f])))(p["frames"])
        return jnp.broadcast_to(size[:, None], (size.shape[0], len(self.rows)))


# --- potentials --------------------------------------------------------------------------


class UniformGravity:
    """V = −m g·x for a mass m at the material point x = φ + X_i d_i (a part's centre of mass,
    X = 0, or a hybrid rotor's centre on its master).

    Invariant π = g·x (linear; in m²/s²), energy U = −m π in J.
    params: ``frame`` (n, 4), ``at`` (n, 3), ``mass`` (n,) in kg, ``g`` (n, 3) in m/s².
    """

    @staticmethod
    def invariants(p, Q):
        return jnp.sum(p["g"] * material_point(Q, p["frame"], p["at"]), axis=1, keepdims=True)

    @staticmethod
    def energy(p, pi):
        return -p["mass"] * pi[0]


class CentralGravity:
    """Newtonian point-mass gravity of a centre at the origin: V = −μ m / |x| for a mass m at the
    material point x (as :class:`UniformGravity`).

    Invariant s = |x|² (quadratic, rotation invariant about the origin ⇒ angular momentum about
    the origin is conserved); closed-form discrete gradient without 0/0 (rotor-scheme.md §3):
    Q = μ m / (√s0 √s1 (√s0 + √s1)).
    params: ``frame`` (n, 4), ``at`` (n, 3), ``mass`` (n,), ``mu`` (n,) in m³/s².
    """

    @staticmethod
    def invariants(p, Q):
        x = material_point(Q, p["frame"], p["at"])
        return jnp.sum(x * x, axis=1, keepdims=True)

    @staticmethod
    def energy(p, pi):
        return -p["mu"] * p["mass"] / jnp.sqrt(pi[0])

    @staticmethod
    def discrete_gradient(p, pi0, pi1):
        r0, r1 = jnp.sqrt(pi0), jnp.sqrt(pi1)
        return p["mu"] * p["mass"] / (r0 * r1 * (r0 + r1))


@dataclass(frozen=True, eq=False)
class UserPotential:
    """A user's potential U(π) of quadratic invariants π = invariants(*frames) (k,).

    params: ``frames`` (n, n_parts, 4).
    """

    invariant_fn: object
    energy_fn: object

    def invariants(self, p, Q):
        return jax.vmap(lambda f: jnp.atleast_1d(self.invariant_fn(*frames_of(Q, f))))(p["frames"])

    def energy(self, p_e, pi):
        return self.energy_fn(pi)


# --- applied loads -----------------------------------------------------------------------


class BodyState(NamedTuple):
    """Midpoint state of a part handed to user load and motor laws: position (3,) m,
    velocity (3,) m/s, rotation (3, 3), angular_velocity (3,) rad/s (inertial)."""

    position: jax.Array
    velocity: jax.Array
    rotation: jax.Array
    angular_velocity: jax.Array


class RotorState(NamedTuple):
    """What a rotor's motor law sees at t_{n+½}: spin ``angle`` (rad) and ``rate`` (rad/s)
    relative to the master, and the master's :class:`BodyState`."""

    angle: jax.Array
    rate: jax.Array
    master: BodyState


def midpoint_state(Q0, Q1, frame, h):
    """BodyStates (leading axis n) of the frames (n, 4) at t_{n+½}: q_{n+½}, v̄ = Δq/h and
    ω̄ = ½ Σ d_i × Δd_i / h."""
    Qm, dQ = 0.5 * (Q0 + Q1), Q1 - Q0
    d, dd = Qm[frame[:, 1:]], dQ[frame[:, 1:]]
    return BodyState(position=Qm[frame[:, 0]], velocity=dQ[frame[:, 0]] / h, rotation=jnp.swapaxes(d, 1, 2),
                     angular_velocity=0.5 * jnp.sum(jnp.cross(d, dd), axis=1) / h)


@dataclass(frozen=True)
class Load:
    """Applied force at a body point and/or pure torque, constant or ``fn(t, state)``.

    Generalized force (DESIGN §3): f_φ = F, f_{d_i} = X_i F + ½ m × d_i, evaluated at the
    midpoint q_{n+½} and t_{n+½}; its discrete work f·Δq is reported per step.
    params: ``frame`` (n, 4), ``at`` (n, 3), ``force`` (n, 3), ``torque`` (n, 3).
    ``body_axes``: force and torque given in body axes (rotated by the midpoint directors).
    """

    force_fn: object = None
    torque_fn: object = None
    body_axes: bool = False

    def generalized_force(self, p, Q0, Q1, t, h):
        frame = p["frame"]
        dQ = Q1 - Q0
        state = midpoint_state(Q0, Q1, frame, h)
        d, dd = jnp.swapaxes(state.rotation, 1, 2), dQ[frame[:, 1:]]  # midpoint directors in rows, Δd_i
        F, M = p["force"], p["torque"]
        if self.force_fn is not None:
            F = jax.vmap(self.force_fn, in_axes=(None, 0))(t, state)
        if self.torque_fn is not None:
            M = jax.vmap(self.torque_fn, in_axes=(None, 0))(t, state)
        if self.body_axes:
            F = jnp.einsum("ni,nij->nj", F, d)
            M = jnp.einsum("ni,nij->nj", M, d)
        f_phi = F
        f_d = p["at"][:, :, None] * F[:, None, :] + 0.5 * jnp.cross(M[:, None, :], d)
        force = jnp.zeros_like(Q0).at[frame[:, 0]].add(f_phi).at[frame[:, 1:]].add(f_d)
        work = jnp.sum(f_phi * dQ[frame[:, 0]], axis=1) + jnp.sum(f_d * dd, axis=(1, 2))
        return force, work


def stack_terms(terms):
    """Group terms by kind (order of first appearance) and stack their parameters.

    Returns a list of (kind, params with a leading element axis, terms).
    """
    groups: dict = {}
    for t in terms:
        groups.setdefault(t.kind, []).append(t)
    out = []
    for kind, ts in groups.items():
        params = {k: np.stack([np.asarray(t.params[k]) for t in ts]) for k in ts[0].params}
        out.append((kind, params, ts))
    return out
