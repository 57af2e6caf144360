"""Joint coordinates with exact discrete derivatives, and the elements that act on them.

A joint coordinate s (a relative angle, a slide along an axis, a point-to-point length) is a
function of quadratic invariants π(q). Each geometry gives its increment Δs and a vector
∂̄s/∂π with ∂̄s/∂π · Δπ = Δs *exactly*, so ∇̄s = ∇π(q_{n+½})ᵀ ∂̄s/∂π satisfies ∇̄s·Δq = Δs
(π quadratic). A spring U(s), a damper c ṡ and a motor τ acting on s then enter the step as

    f = w ∇̄s,   w = ∇̄U(s_n, s_{n+1}) + c Δs/h − τ(t_{n+½}, s_{n+½}, Δs/h)

with discrete work −f·Δq = −(ΔU) − c Δs²/h + τ Δs: the energy balance is exact, the damper
never adds energy, and because π is invariant under rigid motions of the whole system the
force has no net force or moment (momentum conserved).

The coordinate is carried in the state (s_{n+1} = s_n + Δs), so an angle keeps counting past
±π: a torsion spring wound by several turns has the right energy.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp

from ..kinematics.frames import material_point, material_vector
from .elements import ConstraintKind, CoordinateGeometry


#: the default slip rate ω_s (rad/s or m/s) below which dry friction is regularised (:func:`dry_friction`)
SLIP_RATE = 1e-2


def passive(stiffness=0.0, damping=0.0, rest=0.0, dry_friction=0.0, slip_rate=SLIP_RATE) -> dict:
    """The parameters every joint-coordinate term carries for the forces acting on it: spring
    ``stiffness`` k and ``rest`` s0 (U = ½ k (s − s0)²), viscous ``damping`` c and
    ``dry_friction`` τ_c with its ``slip_rate`` ω_s (:func:`dry_friction`); all zero: a coordinate
    only tracked (a drive's, a rope's)."""
    return {"stiffness": float(stiffness), "damping": float(damping), "rest": float(rest),
            "dry_friction": float(dry_friction), "slip_rate": float(slip_rate)}


def dry_friction(p, rate):
    """The regularised dry (Coulomb) friction τ_c tanh(ṡ/ω_s) (n,) of elements with params
    ``dry_friction`` τ_c (N m or N) and ``slip_rate`` ω_s (rad/s or m/s) at the rates ṡ (n,),
    opposing the motion: with ṡ = Δs/h in a step its work −τ_c tanh(Δs/(h ω_s)) Δs is never
    positive, a dissipation, exact. It is ∂D/∂ṡ of :func:`dry_friction_potential`."""
    return p["dry_friction"] * jnp.tanh(rate / p["slip_rate"])


def dry_friction_potential(p, rate):
    """D = τ_c ω_s log cosh(ṡ/ω_s) (n,), J/s: the dissipation potential whose ṡ-derivative is
    :func:`dry_friction` (the continuous equations' Rayleigh-like term; log cosh evaluated without
    overflow)."""
    x = jnp.abs(rate / p["slip_rate"])
    return p["dry_friction"] * p["slip_rate"] * (x + jnp.log1p(jnp.exp(-2.0 * x)) - jnp.log(2.0))


@dataclass(frozen=True)
class Angle(CoordinateGeometry):
    """Relative rotation angle θ about a joint axis n, with an exact discrete increment (a torque τ
    about n does discrete work exactly τ Δθ).

    π = (b·e1, b·e2) with e1, e2 ⟂ n body vectors of A (e1 × e2 = n) and b ⟂ n of B; θ = atan2(π2, π1).
    Δθ = atan2(σ, c), σ = π1,n π2,n+1 − π2,n π1,n+1, c = π_n·π_{n+1};
    ∂̄θ/∂π = (Δθ/σ)(−π̄2, π̄1), with the series of atan2(σ, c)/σ for small σ/c behind a double where.
    params: ``frame_a``, ``e1``, ``e2``, ``frame_b``, ``b`` (body vectors, (n, 3)).
    """

    unit = "rad"

    @staticmethod
    def invariants(p, Q):
        b = material_vector(Q, p["frame_b"], p["b"])
        e1 = material_vector(Q, p["frame_a"], p["e1"])
        e2 = material_vector(Q, p["frame_a"], p["e2"])
        return jnp.stack([jnp.sum(b * e1, axis=1), jnp.sum(b * e2, axis=1)], axis=1)

    @staticmethod
    def value(pi):
        return jnp.arctan2(pi[1], pi[0])

    @staticmethod
    def increment(pi0, pi1):
        sigma = pi0[0] * pi1[1] - pi0[1] * pi1[0]
        c = jnp.sum(pi0 * pi1)
        dtheta = jnp.arctan2(sigma, c)
        t = sigma / jnp.where(c == 0, 1.0, c)
        series = (c > 0) & (jnp.abs(t) < 1e-3)
        t_safe = jnp.where(series, t, 0.0)
        ratio = jnp.where(series, (1 - t_safe**2 / 3 + t_safe**4 / 5 - t_safe**6 / 7) / jnp.where(series, c, 1.0),
                          dtheta / jnp.where(series, 1.0, sigma))
        mid = 0.5 * (pi0 + pi1)
        return dtheta, ratio * jnp.stack([-mid[1], mid[0]])


@dataclass(frozen=True)
class Slide(CoordinateGeometry):
    """Slide s = u_A·(x_B − x_A) along a body axis u of A (prismatic, cylindrical). Bilinear:
    Δs = Δπ, ∂̄s/∂π = 1. params: ``frame_a``, ``at_a``, ``u``, ``frame_b``, ``at_b``."""

    unit = "m"

    @staticmethod
    def invariants(p, Q):
        u = material_vector(Q, p["frame_a"], p["u"])
        r = material_point(Q, p["frame_b"], p["at_b"]) - material_point(Q, p["frame_a"], p["at_a"])
        return jnp.sum(u * r, axis=1, keepdims=True)

    @staticmethod
    def value(pi):
        return pi[0]

    @staticmethod
    def increment(pi0, pi1):
        return pi1[0] - pi0[0], jnp.ones(1, pi0.dtype)


@dataclass(frozen=True)
class Length(CoordinateGeometry):
    """Distance ℓ = ``|x_B − x_A|`` between two material points; π = ℓ², Δℓ = Δπ/(ℓ_n + ℓ_{n+1}),
    ∂̄ℓ/∂π = 1/(ℓ_n + ℓ_{n+1}) (exact, no 0/0 unless both lengths vanish).
    params: ``frame_a``, ``at_a``, ``frame_b``, ``at_b``."""

    unit = "m"

    @staticmethod
    def invariants(p, Q):
        r = material_point(Q, p["frame_b"], p["at_b"]) - material_point(Q, p["frame_a"], p["at_a"])
        return jnp.sum(r * r, axis=1, keepdims=True)

    @staticmethod
    def value(pi):
        return jnp.sqrt(pi[0])

    @staticmethod
    def increment(pi0, pi1):
        total = jnp.sqrt(pi0[0]) + jnp.sqrt(pi1[0])
        inv = 1.0 / jnp.where(total > 0, total, 1.0)
        return (pi1[0] - pi0[0]) * inv, jnp.reshape(inv, (1,))


@dataclass(frozen=True)
class CoordinateElement:
    """The kind of spring-damper-motor elements on one coordinate geometry.

    params: the geometry's, plus ``stiffness`` k, ``rest`` s_0, ``damping`` c (n,):
    U = ½ k (s − s_0)², damping force c ṡ; ``motor``: None or the elements' motor laws
    ``(t, s, s_dot, a_state) -> τ`` (N m or N) in a :class:`~conserve.model.lawtable.LawTable`
    (one law per element before assembly).
    """

    law_fields = ("motor",)

    geometry: CoordinateGeometry
    motor: object = None


@dataclass(frozen=True)
class CoordinateRelation(ConstraintKind):
    """A linear relation between tracked joint coordinates: Σ_i c_i s_i − c0 = 0 (a gear, a belt,
    a winch rope on a full-body drum: ℓ − r α = L0 − r α0).

    Each s_i is carried in the state with an exact discrete increment, s_{n+1} = s_n + Δs_i(q_n,
    q_{n+1}), so the step enforces g(s_{n+1}) = 0 and its discrete Jacobian Ḡ = Σ_i c_i ∇̄s_i
    satisfies Ḡ·Δq = Δg exactly: the relation does no work. The ∇̄s_i are invariant under rigid
    motions, so momentum is conserved as well.

    params: ``coordinates`` (n, k) indices into s (filled at assembly from the terms' ``links``),
    ``coefficients`` (n, k), ``value`` c0 (n,).
    """

    rows = ("relation",)
    reads_coordinates = True

    def residual(self, p, C):
        return (jnp.sum(p["coefficients"] * C.s[p["coordinates"]], axis=1) - p["value"])[:, None]

    def magnitude(self, p, C):
        return (jnp.sum(jnp.abs(p["coefficients"] * C.s[p["coordinates"]]), axis=1) + jnp.abs(p["value"]))[:, None]
