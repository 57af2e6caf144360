"""A winch rope: a massless inextensible rope whose free length a rotor's drum pays out (P5).

One element, two models of its drum. With a hybrid winch (:class:`~conserve.Rotor`, one spin
angle θ) the rope is the constraint ½(|x_a − x_b|² − L(θ)²) = 0, quadratic in (q, θ), with L =
L0 + r (θ − θ0) (:class:`RopeLength`): θ is an unknown of the step and the rope's multiplier
couples it to the positions. With a full-body drum (``Rotor(..., model="body")``) the rope is a
relation between two tracked joint coordinates, the rope's length ℓ and the drum joint's angle α,
ℓ − r α = L0 − r α0 (:class:`~conserve.model.coordinates.CoordinateRelation`), each carried with
exact discrete increments. Either way the rope does no work and energy and momentum stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..kinematics.frames import material_point, point_magnitude
from .coordinates import CoordinateElement, CoordinateRelation, Length, passive
from .elements import ConstraintKind
from .joints import Joint
from .rotors import Rotor
from .terms import Term


@dataclass(frozen=True)
class RopeLength(ConstraintKind):
    """Winch rope: ½(|x_A − x_B|² − L(θ)²) = 0 with free length L = L0 + r (θ_k − θ0) paid out
    by hybrid rotor k (P5). Quadratic in (q, θ), so the midpoint Jacobian is exact.

    params: ``frame_a``, ``at_a``, ``frame_b``, ``at_b``, ``rotor`` (n,) index into θ,
    ``radius`` r (n,) in m (its sign sets which way the drum pays out), ``length`` L0, ``theta0``.
    """

    rows = ("rope",)
    reads_spin_angles = True

    def residual(self, p, C):
        r = material_point(C, p["frame_a"], p["at_a"]) - material_point(C, p["frame_b"], p["at_b"])
        L = p["length"] + p["radius"] * (C.theta[p["rotor"]] - p["theta0"])
        return 0.5 * (jnp.sum(r * r, axis=1) - L**2)[:, None]

    def magnitude(self, p, C):
        r = point_magnitude(C, p["frame_a"], p["at_a"]) + point_magnitude(C, p["frame_b"], p["at_b"])
        L = jnp.abs(p["length"]) + jnp.abs(p["radius"]) * (jnp.abs(C.theta[p["rotor"]]) + jnp.abs(p["theta0"]))
        return 0.5 * (jnp.sum(r * r, axis=1) + L**2)[:, None]



class Rope(Joint):
    """Massless inextensible rope from a point of ``a`` to a point of ``b`` whose free length
    L = L0 + r (α − α0) is paid out by the rotor ``winch`` turning by α (P5).
    ``points=(x_a, x_b)`` world at the start or ``at_a``/``at_b``; ``radius`` r in m (negative to
    wind the other way), ``length`` L0 (default: the initial distance).

    With a hybrid winch, α is its spin angle θ and the constraint ``½(|x_a − x_b|² − L²) = 0`` is
    quadratic in (q, θ). With a full-body winch (``model="body"``), α is the drum joint's angle,
    tracked in the state like any joint coordinate, and the rope is the coordinate relation
    ℓ − r α = L0 − r α0 with ``ℓ = |x_a − x_b|`` (:class:`~conserve.model.coordinates.CoordinateRelation`).
    """

    n_constraints = 1

    def __init__(self, a, b, winch, radius, points=None, *, at_a=None, at_b=None, length=None, name=None):
        super().__init__(a, b, name)
        if not isinstance(winch, Rotor):
            raise ModelError(f"rope '{self.name}': the winch must be a Rotor, got {winch!r}.")
        self.winch, self.radius = winch, float(radius)
        if points is not None:
            xa, xb = (np.asarray(x, float) for x in points)
            at_a, at_b = a.body_point(xa), b.body_point(xb)
        if at_a is None or at_b is None:
            raise ModelError(f"rope '{self.name}': give points=(x_a, x_b) or at_a= and at_b=.")
        self.at_a, self.at_b = np.asarray(at_a, float), np.asarray(at_b, float)
        initial = np.linalg.norm(a.world_point(self.at_a) - b.world_point(self.at_b))
        self.length = initial if length is None else float(length)

    def sketch(self):
        return ("rope", self.a, self.at_a, self.b, self.at_b)

    def terms(self, layout):
        points = {**self._frames(layout), "at_a": self.at_a, "at_b": self.at_b}
        if self.winch.model == "hybrid":
            p = {**points, "rotor": layout.rotor_index(self.winch), "radius": self.radius,
                 "length": self.length, "theta0": 0.0}
            return [Term(RopeLength(), p, self.name)]
        if not any(r is self.winch for r in layout.body_rotors):
            raise ModelError(f"rope '{self.name}': its winch '{self.winch.name}' is not in this system; add it.")
        joint = self.winch.joint
        angle_geometry, angle_params = joint.coordinate("angle", layout)
        a0 = joint.a.world_vector(angle_params["e1"]), joint.a.world_vector(angle_params["e2"])
        b0 = joint.b.world_vector(angle_params["b"])
        alpha0 = np.arctan2(b0 @ a0[1], b0 @ a0[0])
        untouched = passive()
        length = Term(CoordinateElement(Length()), {**points, **untouched}, f"{self.name} length")
        angle = Term(CoordinateElement(angle_geometry), {**angle_params, **untouched}, f"{self.name} drum angle")
        relation = Term(CoordinateRelation(), {"coefficients": np.array([1.0, -self.radius]),
                                             "value": self.length - self.radius * alpha0},
                        self.name, rows=("length",), links=(length, angle))
        return [length, angle, relation]
