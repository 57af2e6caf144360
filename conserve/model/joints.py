"""Joints: holonomic constraints between two parts, built from the constraint kinds of
:mod:`conserve.model.terms` (all quadratic in the coordinates, DESIGN §4)."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .bodies import Part
from .terms import PointCoincidence, Term


class Joint:
    """Base of all joints: two parts ``a`` and ``b`` and a name for messages."""

    def __init__(self, a, b, name=None):
        for p in (a, b):
            if not isinstance(p, Part):
                raise ModelError(f"{type(self).__name__}: expected bodies or cs.ground, got {p!r}.")
        if a is b:
            raise ModelError(f"{type(self).__name__} '{name}': joins body '{a.name}' to itself.")
        self.a, self.b = a, b
        self.name = name or f"{type(self).__name__.lower()}({a.name}, {b.name})"

    def parts(self):
        return (self.a, self.b)

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


def _attachment(joint, at, at_a, at_b):
    """Body points (X_a, X_b) from a world point ``at`` (initial configuration) or both body points."""
    if at is not None:
        if at_a is not None or at_b is not None:
            raise ModelError(f"joint '{joint.name}': give either at= (world point) or at_a= and at_b=.")
        x = np.asarray(at, float)
        if x.shape != (3,) or not np.all(np.isfinite(x)):
            raise ModelError(f"joint '{joint.name}': at= must be 3 finite numbers in m, got {at!r}.")
        return joint.a.body_point(x), joint.b.body_point(x)
    if at_a is None or at_b is None:
        raise ModelError(
            f"joint '{joint.name}': say where it is, either at= (a world point at the initial "
            "configuration) or at_a= and at_b= (body-fixed points of both parts)."
        )
    pts = [np.asarray(p, float) for p in (at_a, at_b)]
    for p, raw in zip(pts, (at_a, at_b)):
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ModelError(f"joint '{joint.name}': body points must be 3 finite numbers in m, got {raw!r}.")
    return pts


class Spherical(Joint):
    """Ball joint: the material points X_a of ``a`` and X_b of ``b`` coincide (3 constraints).

    Parameters
    ----------
    a, b : bodies or ``cs.ground``
    at : (3,), m — joint location in the inertial frame at the initial configuration; the body
        points are computed from it. Or give ``at_a`` and ``at_b``: body-fixed points (m) in the
        axes of ``a`` and ``b`` (for the ground: inertial coordinates); they must coincide
        initially.
    name : str, optional
    """

    def __init__(self, a, b, at=None, *, at_a=None, at_b=None, name=None):
        super().__init__(a, b, name)
        self.at_a, self.at_b = _attachment(self, at, at_a, at_b)

    def terms(self, layout):
        params = {"frame_a": layout.frame(self.a), "at_a": self.at_a,
                  "frame_b": layout.frame(self.b), "at_b": self.at_b}
        return [Term(PointCoincidence, params, self.name)]
