"""The joint catalogue: holonomic constraints between two parts (Thompson §IV; Betsch and Leyendecker 2006).

Every joint is a composition of four quadratic constraint kinds of :mod:`.terms`
(PointCoincidence, VectorDot, PointOffset, Distance), so the midpoint Jacobian is an exact
discrete derivative and every joint is invariant under rigid motions of the whole system.

Geometry is given either in the inertial frame at the initial configuration (``at``,
``axis``, ``axes``) — the usual way — or body-fixed in each part's axes (keywords ending in
``_a``/``_b``); the ground's axes are the inertial axes. Both parts may be bodies, point
masses or ``cs.ground``.

| joint        | constraints | relative freedoms left                 |
|--------------|-------------|----------------------------------------|
| Spherical    | 3           | 3 rotations                            |
| Revolute     | 5           | rotation about the axis                |
| Universal    | 4           | rotations about the two axes           |
| Cylindrical  | 4           | rotation about and slide along the axis|
| Prismatic    | 5           | slide along the axis                   |
| Planar       | 3           | 2 slides in the plane, rotation about the normal |
| Fixed        | 6           | none                                   |
| Distance     | 1           | all but the distance of two points     |
| Perpendicular| 1           | all but the angle between two axes (Thompson) |
| Parallel     | 2           | translations, rotation about the axis (Thompson) |
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from ..errors import InconsistentInitialState, ModelError
from ..kinematics.frames import material_point, material_vector, named_direction, point_magnitude, vector_magnitude
from .bodies import Ground, Part
from .coordinates import Angle, Slide
from .elements import ConstraintElement, ConstraintKind
from .terms import Term

#: Largest |u·w| accepted where two given axes must be perpendicular.
PERPENDICULAR_TOL = 1e-9


def _vec3(joint, what, value, direction=False):
    """3 finite numbers (``direction``: or an axis name, ``conserve.kinematics.frames.AXIS_NAMES``)."""
    try:
        v = np.asarray(named_direction(value) if direction else value, float)
    except (TypeError, ValueError):  # words, complex numbers, ragged lists
        v = np.full(1, np.nan)
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        if direction:
            raise ModelError(f"joint '{joint.name}': {what} must be one direction, 3 finite numbers or an axis name "
                             f"('x', 'y', 'z', '-x', '-y', '-z'), got {value!r}.")
        raise ModelError(f"joint '{joint.name}': {what} must be 3 finite numbers, got {value!r}.")
    return v


def _unit(joint, what, value):
    """A unit direction: 3 numbers, not all zero, or an axis name ('z', '-x', …)."""
    v = _vec3(joint, what, value, direction=True)
    n = np.linalg.norm(v)
    if n < 1e-12:
        raise ModelError(f"joint '{joint.name}': {what} has zero length; give a direction.")
    return v / n


def perpendicular_basis(n):
    """Two unit vectors e1, e2 with (e1, e2, n) right-handed and orthonormal."""
    k = np.argmin(np.abs(n))
    e1 = np.cross(n, np.eye(3)[k])
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(n, e1)


# --- the four quadratic constraint kinds every joint is made of -------------------------------


@dataclass(frozen=True)
class PointCoincidence(ConstraintKind):
    """Two material points coincide: x_A − x_B = 0 (Thompson's spherical constraint). Linear.

    params: ``frame_a``, ``frame_b`` (n, 4); ``at_a``, ``at_b`` (n, 3) body points in m.
    Residual (n, 3) in m; its multiplier λ is the force in N the joint exerts on B (on A: −λ).
    """

    rows = ("x", "y", "z")

    def residual(self, p, Q):
        return material_point(Q, p["frame_a"], p["at_a"]) - material_point(Q, p["frame_b"], p["at_b"])

    def magnitude(self, p, Q):
        return point_magnitude(Q, p["frame_a"], p["at_a"]) + point_magnitude(Q, p["frame_b"], p["at_b"])


@dataclass(frozen=True)
class VectorDot(ConstraintKind):
    """u_A · w_B = c for body-fixed vectors u of A and w of B (Thompson's perpendicular
    constraint for c = 0). Bilinear, hence quadratic.

    params: ``frame_a``, ``u`` (n, 3), ``frame_b``, ``w`` (n, 3), ``c`` (n,). Residual (n, 1).
    """

    rows = ("u·w",)

    def residual(self, p, Q):
        u = material_vector(Q, p["frame_a"], p["u"])
        w = material_vector(Q, p["frame_b"], p["w"])
        return (jnp.sum(u * w, axis=1) - p["c"])[:, None]

    def magnitude(self, p, Q):
        u = vector_magnitude(Q, p["frame_a"], p["u"])
        w = vector_magnitude(Q, p["frame_b"], p["w"])
        return (jnp.sum(u * w, axis=1) + jnp.abs(p["c"]))[:, None]


@dataclass(frozen=True)
class PointOffset(ConstraintKind):
    """u_A · (x_B − x_A) = c: B's point stays in a plane of A normal to the body vector u.

    params: ``frame_a``, ``at_a``, ``u``, ``frame_b``, ``at_b``, ``c``. Residual (n, 1) in m.
    Bilinear (u linear in A's directors times a linear difference), hence quadratic.
    """

    rows = ("u·(xB−xA)",)

    def residual(self, p, Q):
        u = material_vector(Q, p["frame_a"], p["u"])
        r = material_point(Q, p["frame_b"], p["at_b"]) - material_point(Q, p["frame_a"], p["at_a"])
        return (jnp.sum(u * r, axis=1) - p["c"])[:, None]

    def magnitude(self, p, Q):
        u = vector_magnitude(Q, p["frame_a"], p["u"])
        r = point_magnitude(Q, p["frame_b"], p["at_b"]) + point_magnitude(Q, p["frame_a"], p["at_a"])
        return (jnp.sum(u * r, axis=1) + jnp.abs(p["c"]))[:, None]


@dataclass(frozen=True)
class PointDistance(ConstraintKind):
    """½(|x_A − x_B|² − L²) = 0: two material points at fixed distance L (massless rod).

    params: ``frame_a``, ``at_a``, ``frame_b``, ``at_b``, ``length`` (n,) in m. Residual (n, 1) in m².
    """

    rows = ("|xA−xB|",)

    def residual(self, p, Q):
        r = material_point(Q, p["frame_a"], p["at_a"]) - material_point(Q, p["frame_b"], p["at_b"])
        return 0.5 * (jnp.sum(r * r, axis=1) - p["length"] ** 2)[:, None]

    def magnitude(self, p, Q):
        r = point_magnitude(Q, p["frame_a"], p["at_a"]) + point_magnitude(Q, p["frame_b"], p["at_b"])
        return 0.5 * (jnp.sum(r * r, axis=1) + p["length"] ** 2)[:, None]


@dataclass(frozen=True)
class JointMotion:
    """The relative freedoms of a joint, for the reduced backend (:mod:`.tree`).

    b moves relative to a by rotations about axes fixed in a (``rot_a``, (k_a, 3) body vectors of
    a) and in b (``rot_b``, (k_b, 3)), and by slides of the joint point x_B relative to x_A along
    u × w with u, w fixed in a (``slide_u``, ``slide_w``, (k_s, 3)); x_A = a's point ``at_a``,
    x_B = b's point ``at_b``. Velocity relations (all vectors in inertial axes):

        ω_b − ω_a = Σ ν_k R_a a_k + Σ ν_k R_b b_k,   ẋ_B − ẋ_A = ω_a × (x_B − x_A) + Σ ν_k (R_a u_k × R_a w_k)

    They annihilate the joint's constraint rows at any configuration, orthonormal or not
    (a vector dotted with a cross product containing it), so H2(q_{n+½}) spans exactly the null
    space of Ḡ = G(q_{n+½}). Degrees of freedom: k_a + k_b + k_s.
    """

    at_a: np.ndarray
    at_b: np.ndarray
    rot_a: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    rot_b: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    slide_u: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    slide_w: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    @property
    def dof(self):
        return len(self.rot_a) + len(self.rot_b) + len(self.slide_u)


class Joint(ConstraintElement):
    """Base of all joints: two parts ``a`` and ``b`` and a name for messages; ``at_a``, ``at_b``
    the body points where they meet (None for joints without one, such as Parallel)."""

    n_constraints = 0
    at_a = at_b = None

    def __init__(self, a, b, name=None):
        for p in (a, b):
            if not isinstance(p, Part):
                raise ModelError(f"{type(self).__name__}: expected bodies or cs.ground, got {p!r}.")
        self.a, self.b = a, b
        self.name = name or f"{type(self).__name__.lower()}({a.name}, {b.name})"
        if a is b:
            raise ModelError(f"joint '{self.name}': joins part '{a.name}' to itself.")

    def parts(self):
        return tuple(p for p in (self.a, self.b) if not isinstance(p, Ground))

    def sketch(self):
        return None if self.at_a is None else ("joint", self.a, self.at_a, self.b, self.at_b)

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"

    # --- geometry helpers ---------------------------------------------------------------
    def _points(self, at, at_a, at_b):
        """Body points (X_a, X_b) from a world point ``at`` or both body points."""
        if at is not None:
            if at_a is not None or at_b is not None:
                raise ModelError(f"joint '{self.name}': give either at= (world point) or at_a= and at_b=.")
            x = _vec3(self, "at", at)
            return self.a.body_point(x), self.b.body_point(x)
        if at_a is None or at_b is None:
            raise ModelError(f"joint '{self.name}': say where it is, either at= (a world point at the "
                             "initial configuration) or at_a= and at_b= (body-fixed points of both parts).")
        return _vec3(self, "at_a", at_a), _vec3(self, "at_b", at_b)

    def _axis(self, axis, axis_a, axis_b):
        """Body-fixed unit axis and perpendicular pair in each part:
        {'n_a', 'e1_a', 'e2_a', 'n_b', 'e1_b', 'e2_b'}. The pairs are images of one world pair at the
        initial configuration, so the relative angle starts at 0 whether the axis is given in world
        axes or body-fixed (b's pair then from a's: e1_b is a's e1 seen from b, made ⟂ n_b)."""
        if axis is not None:
            if axis_a is not None or axis_b is not None:
                raise ModelError(f"joint '{self.name}': give either axis= (world) or axis_a= and axis_b=.")
            n = _unit(self, "axis", axis)
            world = dict(zip(("n", "e1", "e2"), (n, *perpendicular_basis(n))))
            return {f"{k}_{s}": part.body_vector(v) for k, v in world.items()
                    for s, part in (("a", self.a), ("b", self.b))}
        if axis_a is None or axis_b is None:
            raise ModelError(f"joint '{self.name}': give its axis, either axis= (a world direction at the "
                             "initial configuration) or axis_a= and axis_b= (body-fixed in each part).")
        n_a, n_b = _unit(self, "axis_a", axis_a), _unit(self, "axis_b", axis_b)
        e1_a, e2_a = perpendicular_basis(n_a)
        e1_b = self.b.body_vector(self.a.world_vector(e1_a))
        e1_b = e1_b - (e1_b @ n_b) * n_b
        if np.linalg.norm(e1_b) < 0.5:  # the axes are far from aligned (refused at assembly): any pair
            e1_b = perpendicular_basis(n_b)[0]
        e1_b = e1_b / np.linalg.norm(e1_b)
        return {"n_a": n_a, "e1_a": e1_a, "e2_a": e2_a, "n_b": n_b, "e1_b": e1_b, "e2_b": np.cross(n_b, e1_b)}

    def _frames(self, layout):
        return {"frame_a": layout.frame(self.a), "frame_b": layout.frame(self.b)}

    def _coincide(self, layout, X_a, X_b):
        return Term(PointCoincidence(), {**self._frames(layout), "at_a": X_a, "at_b": X_b}, self.name)

    def _dot(self, layout, u_a, w_b, label, c=0.0):
        """u (body vector of a) · w (body vector of b) = c."""
        return Term(VectorDot(), {**self._frames(layout), "u": u_a, "w": w_b, "c": c}, self.name, (label,))

    def _offset(self, layout, X_a, u_a, X_b, label):
        """u_a · (x_b − x_a) = 0."""
        return Term(PointOffset(), {**self._frames(layout), "at_a": X_a, "u": u_a, "at_b": X_b, "c": 0.0},
                    self.name, (label,))

    def _initial_dot(self, u_a, w_b):
        return float(self.a.world_vector(u_a) @ self.b.world_vector(w_b))

    # --- relative motion (the reduced backend's kinematic tree, :mod:`.tree`) ---------------
    def motion(self):
        """The freedoms b keeps relative to a, as a :class:`JointMotion`, or None if the joint
        cannot be a tree joint (the reduced backend then keeps it as a cut joint with multipliers)."""
        return None

    # --- joint coordinates (for spring-dampers and motors) --------------------------------
    coordinates = ()

    def record(self, layout) -> dict:
        """What the joint's sensors need (:mod:`conserve.results.sensors`), as plain data: kind, part
        names, frames (block indices (4,) into the extended block array), attachment points (or
        None) and the body vectors of its coordinates ("angle": e1, e2 of a and b of b; "slide": u)."""
        name = lambda part: "ground" if isinstance(part, Ground) else part.name  # noqa: E731
        point = lambda x: None if x is None else np.asarray(x, float).tolist()  # noqa: E731
        record = {"kind": type(self).__name__, "a": name(self.a), "b": name(self.b),
                  "frame_a": layout.frame(self.a).tolist(), "frame_b": layout.frame(self.b).tolist(),
                  "at_a": point(self.at_a), "at_b": point(self.at_b)}
        for which in self.coordinates:
            p = self.coordinate(which, layout)[1]
            record[which] = {k: np.asarray(p[k], float).ravel().tolist() for k in
                             (("e1", "e2", "b") if which == "angle" else ("u",))}
        return record

    def chosen_coordinate(self, which, owner):
        """The coordinate ``which`` ('angle', 'slide' or None: the joint's only one) an element
        ``owner`` (a spring, motor or drive) acts on, or a ModelError saying what the joint has."""
        if not self.coordinates:
            raise ModelError(f"'{owner}': joint '{self.name}' is a {type(self).__name__} joint, which has no angle or "
                             "slide to act on; joint springs, motors and drives act on the angle of a Revolute or "
                             "Cylindrical joint or the slide of a Prismatic or Cylindrical joint (for a ball joint, "
                             "chain Revolute joints through light bodies, one per axis, and act on each).")
        if which is None:
            if len(self.coordinates) != 1:
                raise ModelError(f"'{owner}': joint '{self.name}' has coordinates {' and '.join(self.coordinates)}; "
                                 "choose one with coordinate='angle' or 'slide'.")
            return self.coordinates[0]
        if which not in self.coordinates:
            raise ModelError(f"'{owner}': joint '{self.name}' has no {which} coordinate; "
                             f"it has: {', '.join(self.coordinates) or 'none'}.")
        return which

    def coordinate(self, which, layout):
        """(geometry, params) of the joint coordinate ``which`` ('angle' or 'slide')."""
        if which not in self.coordinates:
            raise ModelError(f"joint '{self.name}' ({type(self).__name__}) has no {which} coordinate; "
                             f"it has: {', '.join(self.coordinates) or 'none'}.")
        g = self._geometry
        if which == "angle":
            return Angle(), {**self._frames(layout), "e1": g["e1_a"], "e2": g["e2_a"], "b": g["e1_b"]}
        return Slide(), {**self._frames(layout), "at_a": self.at_a, "u": g["n_a"], "at_b": self.at_b}


class Spherical(Joint):
    """Ball joint: material points of ``a`` and ``b`` coincide (3 constraints).

    ``at``: joint location (world, initial configuration), or ``at_a``/``at_b`` body points.
    """

    n_constraints = 3

    def __init__(self, a, b, at=None, *, at_a=None, at_b=None, name=None):
        super().__init__(a, b, name)
        self.at_a, self.at_b = self._points(at, at_a, at_b)

    def terms(self, layout):
        return [self._coincide(layout, self.at_a, self.at_b)]

    def motion(self):
        return JointMotion(self.at_a, self.at_b, rot_a=np.eye(3))


class _AxisJoint(Joint):
    """A joint with a common point and a common axis n (world ``at``/``axis`` or body-fixed)."""

    def __init__(self, a, b, at=None, axis=None, *, at_a=None, at_b=None, axis_a=None, axis_b=None,
                 name=None):
        super().__init__(a, b, name)
        self.at_a, self.at_b = self._points(at, at_a, at_b)
        self._geometry = self._axis(axis, axis_a, axis_b)

    def _parallel_axes(self, layout):
        """n_a·e1_b = n_a·e2_b = 0: the axis of a stays the axis of b."""
        g = self._geometry
        return [self._dot(layout, g["n_a"], g["e1_b"], "n·e1"), self._dot(layout, g["n_a"], g["e2_b"], "n·e2")]


class Revolute(_AxisJoint):
    """Hinge: common point and common axis n, rotation about n free (5 constraints).

    Constraints: x_a = x_b, n_a·e1_b = 0, n_a·e2_b = 0 (e1, e2 ⟂ n in b). Coordinate: ``angle``
    (rad, right-handed about n, 0 at the start when the axis is given in world axes).
    """

    n_constraints = 5
    coordinates = ("angle",)

    def terms(self, layout):
        return [self._coincide(layout, self.at_a, self.at_b)] + self._parallel_axes(layout)

    def motion(self):
        return JointMotion(self.at_a, self.at_b, rot_a=self._geometry["n_a"][None])


class Universal(Joint):
    """Cardan joint: common point, axis u of ``a`` stays perpendicular to axis w of ``b`` (4 constraints).

    ``axes=(u, w)`` in world axes at the initial configuration (must be perpendicular), or
    ``axis_a``/``axis_b`` body-fixed.
    """

    n_constraints = 4

    def __init__(self, a, b, at=None, axes=None, *, at_a=None, at_b=None, axis_a=None, axis_b=None,
                 name=None):
        super().__init__(a, b, name)
        self.at_a, self.at_b = self._points(at, at_a, at_b)
        self.u, self.w = _two_axes(self, axes, axis_a, axis_b)

    def terms(self, layout):
        return [self._coincide(layout, self.at_a, self.at_b), self._dot(layout, self.u, self.w, "u·w")]

    def motion(self):
        return JointMotion(self.at_a, self.at_b, rot_a=self.u[None], rot_b=self.w[None])


class Cylindrical(_AxisJoint):
    """Rotation about and slide along a common axis (4 constraints): n_a·e1_b = n_a·e2_b = 0 and
    e1_a·(x_b − x_a) = e2_a·(x_b − x_a) = 0. Coordinates: ``angle`` and ``slide`` (m along n)."""

    n_constraints = 4
    coordinates = ("angle", "slide")

    def terms(self, layout):
        g = self._geometry
        return self._parallel_axes(layout) + [self._offset(layout, self.at_a, g["e1_a"], self.at_b, "e1·Δx"),
                                              self._offset(layout, self.at_a, g["e2_a"], self.at_b, "e2·Δx")]

    def motion(self):
        g = self._geometry
        return JointMotion(self.at_a, self.at_b, rot_a=g["n_a"][None], slide_u=g["e1_a"][None],
                           slide_w=g["e2_a"][None])


class Prismatic(Cylindrical):
    """Slider: translation along a common axis only (5 constraints): the cylindrical joint plus
    e1_a·e2_b = const (no rotation about n). Coordinate: ``slide`` (m along n, 0 at the start)."""

    n_constraints = 5
    coordinates = ("slide",)

    def terms(self, layout):
        g = self._geometry
        c = self._initial_dot(g["e1_a"], g["e2_b"])
        return super().terms(layout) + [self._dot(layout, g["e1_a"], g["e2_b"], "e1·e2", c)]

    def motion(self):
        g = self._geometry
        return JointMotion(self.at_a, self.at_b, slide_u=g["e1_a"][None], slide_w=g["e2_a"][None])


class Planar(_AxisJoint):
    """Plane-on-plane contact held closed (3 constraints): normals stay parallel
    (n_a·e1_b = n_a·e2_b = 0) and b's point stays in a's plane (n_a·(x_b − x_a) = 0).
    ``normal`` in world axes, or ``normal_a``/``normal_b`` body-fixed."""

    n_constraints = 3

    def __init__(self, a, b, at=None, normal=None, *, at_a=None, at_b=None, normal_a=None, normal_b=None,
                 name=None):
        super().__init__(a, b, at, normal, at_a=at_a, at_b=at_b, axis_a=normal_a, axis_b=normal_b, name=name)

    def terms(self, layout):
        g = self._geometry
        return self._parallel_axes(layout) + [self._offset(layout, self.at_a, g["n_a"], self.at_b, "n·Δx")]

    def motion(self):
        g = self._geometry  # slides along e2 × n ≈ e1 and n × e1 ≈ e2, exactly ⟂ n at any configuration
        return JointMotion(self.at_a, self.at_b, rot_a=g["n_a"][None], slide_u=np.stack([g["e2_a"], g["n_a"]]),
                           slide_w=np.stack([g["n_a"], g["e1_a"]]))


class Fixed(Joint):
    """Rigid connection (6 constraints): a common point and a common triad,
    x_a = x_b, t1_a·t2_b = t2_a·t3_b = t3_a·t1_b = 0, with (t1, t2, t3) the inertial axes at the start."""

    n_constraints = 6

    def __init__(self, a, b, at=None, *, at_a=None, at_b=None, name=None):
        super().__init__(a, b, name)
        self.at_a, self.at_b = self._points(at, at_a, at_b)

    def terms(self, layout):
        t = np.eye(3)
        ta = [self.a.body_vector(v) for v in t]
        tb = [self.b.body_vector(v) for v in t]
        return [self._coincide(layout, self.at_a, self.at_b),
                self._dot(layout, ta[0], tb[1], "t1·t2", self._initial_dot(ta[0], tb[1])),
                self._dot(layout, ta[1], tb[2], "t2·t3", self._initial_dot(ta[1], tb[2])),
                self._dot(layout, ta[2], tb[0], "t3·t1", self._initial_dot(ta[2], tb[0]))]

    def motion(self):
        return JointMotion(self.at_a, self.at_b)


class Translational(Joint):
    """b translates relative to a without turning (3 + 3 − k constraints): the rows of
    :class:`Fixed` that hold the relative orientation, t1_a·t2_b = t2_a·t3_b = t3_a·t1_b = const,
    and x_b − x_a ⟂ every direction normal to the k = 1 or 2 ``axes`` (world directions at the
    initial configuration, perpendicular; carried by a): a slider along one axis (as Prismatic), a
    plane slider along two, or, without ``axes``, free translation (k = 3: the orientation rows
    only). It has no coordinate of its own: a spring or motor per axis needs a Prismatic per axis."""

    def __init__(self, a, b, at=None, axes=None, *, at_a=None, at_b=None, name=None):
        super().__init__(a, b, name)
        self.at_a, self.at_b = self._points(at, at_a, at_b)
        world = np.eye(3) if axes is None else np.array([_unit(self, "axes", u) for u in axes]).reshape(-1, 3)
        if len(world) not in (1, 2, 3) or np.abs(world @ world.T - np.eye(len(world))).max() > 1e-9:
            raise ModelError(f"joint '{self.name}': axes must be one or two perpendicular directions (or None: "
                             f"translation in any direction), got {axes!r}.")
        normals = np.linalg.svd(world)[2][len(world):]  # the directions x_b − x_a stays normal to
        self.slides = [self.a.body_vector(u) for u in world]
        self.normals = [self.a.body_vector(n) for n in normals]
        self.n_constraints = 3 + len(self.normals)

    def terms(self, layout):
        t = np.eye(3)
        ta, tb = [self.a.body_vector(v) for v in t], [self.b.body_vector(v) for v in t]
        held = [self._dot(layout, ta[i], tb[(i + 1) % 3], f"t{i + 1}·t{(i + 1) % 3 + 1}",
                          self._initial_dot(ta[i], tb[(i + 1) % 3])) for i in range(3)]
        return held + [self._offset(layout, self.at_a, n, self.at_b, f"n{k + 1}·Δx")
                       for k, n in enumerate(self.normals)]

    def motion(self):
        pairs = [perpendicular_basis(u) for u in self.slides]
        return JointMotion(self.at_a, self.at_b, slide_u=np.array([p[0] for p in pairs]),
                           slide_w=np.array([p[1] for p in pairs]))


class Distance(Joint):
    """Massless rod: two material points keep the distance ``length`` (1 constraint),
    ``½(|x_a − x_b|² − L²) = 0``. ``points=(x_a, x_b)`` in world axes at the start, or
    ``at_a``/``at_b`` body points; ``length`` defaults to the initial distance."""

    n_constraints = 1

    def __init__(self, a, b, points=None, *, at_a=None, at_b=None, length=None, name=None):
        super().__init__(a, b, name)
        if points is not None:
            if at_a is not None or at_b is not None:
                raise ModelError(f"joint '{self.name}': give either points= or at_a= and at_b=.")
            xa, xb = (_vec3(self, "points", x) for x in points)
            self.at_a, self.at_b = a.body_point(xa), b.body_point(xb)
        else:
            if at_a is None or at_b is None:
                raise ModelError(f"joint '{self.name}': give points=(x_a, x_b) or at_a= and at_b=.")
            self.at_a, self.at_b = _vec3(self, "at_a", at_a), _vec3(self, "at_b", at_b)
        initial = np.linalg.norm(a.world_point(self.at_a) - b.world_point(self.at_b))
        self.length = initial if length is None else float(length)
        if not (self.length > 0 and np.isfinite(self.length)):
            raise ModelError(f"joint '{self.name}': length must be positive, got {self.length}; "
                             "two points at distance 0 are a Spherical joint.")

    def terms(self, layout):
        p = {**self._frames(layout), "at_a": self.at_a, "at_b": self.at_b, "length": self.length}
        return [Term(PointDistance(), p, self.name)]


class Perpendicular(Joint):
    """Thompson's perpendicular constraint: axis u of ``a`` stays perpendicular to axis w of ``b``
    (1 constraint, u·w = 0). ``axes=(u, w)`` world at the start, or ``axis_a``/``axis_b``."""

    n_constraints = 1

    def __init__(self, a, b, axes=None, *, axis_a=None, axis_b=None, name=None):
        super().__init__(a, b, name)
        self.u, self.w = _two_axes(self, axes, axis_a, axis_b)

    def terms(self, layout):
        return [self._dot(layout, self.u, self.w, "u·w")]


class Parallel(Joint):
    """Thompson's parallel constraint: the axis of ``b`` stays parallel to the axis of ``a``
    (2 constraints, e1_a·n_b = e2_a·n_b = 0); rotation about the axis and translations stay free."""

    n_constraints = 2

    def __init__(self, a, b, axis=None, *, axis_a=None, axis_b=None, name=None):
        super().__init__(a, b, name)
        self._geometry = self._axis(axis, axis_a, axis_b)

    def terms(self, layout):
        g = self._geometry
        return [self._dot(layout, g["e1_a"], g["n_b"], "e1·n"), self._dot(layout, g["e2_a"], g["n_b"], "e2·n")]


def _two_axes(joint, axes, axis_a, axis_b):
    """Body-fixed unit axes (u of a, w of b), perpendicular at the initial configuration."""
    if axes is not None:
        if axis_a is not None or axis_b is not None:
            raise ModelError(f"joint '{joint.name}': give either axes=(u, w) or axis_a= and axis_b=.")
        if isinstance(axes, str) or len(axes) != 2:
            raise ModelError(f"joint '{joint.name}': axes must be two directions (u of a, w of b), e.g. "
                             f"axes=('x', 'y') or axes=((1, 0, 0), (0, 1, 0)), got {axes!r}.")
        u, w = (_unit(joint, "axes", x) for x in axes)
        u, w = joint.a.body_vector(u), joint.b.body_vector(w)
    elif axis_a is not None and axis_b is not None:
        u, w = _unit(joint, "axis_a", axis_a), _unit(joint, "axis_b", axis_b)
    else:
        raise ModelError(f"joint '{joint.name}': give axes=(u, w) (world) or axis_a= and axis_b= (body-fixed).")
    dot = joint.a.world_vector(u) @ joint.b.world_vector(w)
    if abs(dot) > PERPENDICULAR_TOL:
        raise InconsistentInitialState(
            f"joint '{joint.name}': its two axes must be perpendicular at the start, but u·w = {dot:.3g}.")
    return u, w
