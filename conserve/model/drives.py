"""Prescribed motion: a joint coordinate that follows a given function of time (a servo
constraint), ``cs.JointDrive(joint, law)``.

The joint's angle or slide s is tracked with its exact discrete increments (as for springs and
motors, :mod:`.coordinates`) and the rheonomic constraint

    g = s − θ(t) = 0                    enforced at every node, g(q_{n+1}, t_{n+1}) = 0,

joins the step (:class:`PrescribedCoordinate`). Its discrete gradient is ∇̄s, whose product with
Δq is Δs exactly, so the drive's constraint force −(2/h²) λ̃ ∇̄s does the discrete work

    W = −(2/h²) λ̃ Δs = −λ Δs           (λ̃ = (h²/2) λ, the step's scaled multiplier)

and the energy balance E_{n+1} − E_n = W (+ other work − dissipation) holds to round-off: the
drive's work is reported per step like a motor's (``sol.work_by_element[name]``): the drive
applies τ = −λ (N m about the axis or N along it, on part b and the reaction on a), so W = τ Δs
as for a motor. λ of a step (``sol.multipliers``) alternates about τ by O(Δt) from step to step,
like the node velocities of the midpoint DAE; the mean of two consecutive steps' is τ at the node
between them to O(Δt²). Because s and θ(t) are compared at the nodes, the coordinate follows
θ(t_n) to the Newton tolerance. The drive
reads a joint coordinate, so it is invariant under rigid motions of the whole system: a drive
between two bodies conserves momentum, one to the ground does not, as for a motor.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp

from ..errors import ModelError
from .coordinates import CoordinateElement, passive
from .elements import ConstraintElement, ConstraintKind
from .joints import Joint
from .laws import SCALAR, Law, as_array
from .terms import Term


@dataclass(frozen=True)
class PrescribedCoordinate(ConstraintKind):
    """s_i − θ(t) = 0 for tracked joint coordinates s_i (``params["coordinates"]`` (n, 1)),
    ``law`` θ(t) (jax-traceable, float64 scalar)."""

    law: object = None
    rows = ("drive",)
    reads_coordinates = True
    #: the rows depend on time (``Model.time_dependent``: the step, checks and diagnostics pass t)
    rheonomic = True

    def residual(self, p, C):
        return (C.s[p["coordinates"][:, 0]] - self.law(C.t))[:, None]

    def magnitude(self, p, C):
        return (jnp.abs(C.s[p["coordinates"][:, 0]]) + jnp.abs(self.law(C.t)))[:, None]


class JointDrive(ConstraintElement):
    """Prescribed motion of a joint coordinate: its angle (rad; Revolute, Cylindrical) or slide
    (m; Prismatic, Cylindrical) follows ``law(t)`` (a jax-traceable function of the time in s)
    exactly at every node, whatever the loads (see the module docstring). The law's value at
    the start must be the joint's coordinate there (as ``sol.joint(name)`` reads it: 0 at the
    build configuration for axes given in world axes), and its rate the joint's initial rate;
    assembly checks both. The drive's work −λ Δs is reported per step."""

    n_constraints = 1

    def __init__(self, joint, law, *, coordinate=None, name=None):
        name = name or f"drive on {getattr(joint, 'name', joint)}"
        if not isinstance(joint, Joint):
            raise ModelError(f"'{name}': drives a joint (Revolute, Prismatic, Cylindrical), got {joint!r}.")
        coordinate = joint.chosen_coordinate(coordinate, name)
        if not callable(law):
            raise ModelError(f"'{name}': law must be a function law(t) -> the joint's {coordinate}.")
        self.name, self.joint, self.coordinate = name, joint, coordinate
        unit = "rad" if coordinate == "angle" else "m"
        self._law = Law("drive law", law, "law(t) with t the time in s", (SCALAR,), (),
                        f"a scalar: the joint's {coordinate} in {unit}")
        self._step_law = as_array(law)

    def parts(self):
        return ()

    def laws(self):
        return [self._law]

    def terms(self, layout):
        geometry, params = self.joint.coordinate(self.coordinate, layout)
        tracked = Term(CoordinateElement(geometry), {**params, **passive()}, f"{self.name} {self.coordinate}")
        return [tracked, Term(PrescribedCoordinate(self._step_law), {}, self.name, links=(tracked,))]
