"""Parts that carry mass and coordinates: rigid bodies (directors), point masses, the ground.

A rigid body has q = (φ, d1, d2, d3) ∈ R¹² with φ its centre of mass and d_i its principal or
body axes in the inertial frame; its mass matrix is M = kron(μ, I3) with
μ = diag(m, E), E = ½ tr(J) I − J the Euler tensor of the inertia J about the centre of mass
(Betsch and Steinmann 2001). A point mass has q = φ ∈ R³ and μ = [m].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInertia, InvalidMass, ModelError
from ..kinematics.rotations import as_rotation_matrix
import jax
import jax.numpy as jnp

from .elements import ConstraintKind, Element
from .terms import Term

#: Relative tolerance of the symmetry and triangle-inequality checks of inertia tensors.
INERTIA_TOL = 1e-12


def _vector(name, what, value, kind="part"):
    try:
        v = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        v = np.full(1, np.nan)
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ModelError(f"{kind} '{name}': {what} must be 3 finite numbers, got {value!r}.")
    return v


def _check_name(name):
    if not isinstance(name, str) or not name:
        raise ModelError(f"every part needs a non-empty string name, got {name!r}.")
    return name


def refuse_traced(kind, name, **values):
    """Refuse jax tracers (a part built inside ``jax.grad``, ``jit`` or ``vmap``) among the numbers
    of part ``name`` with what to differentiate instead: parts are built once from numbers, and
    their masses and inertias are the assembled model's arrays."""
    traced = [k for k, v in values.items()
              if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(v))]
    if traced:
        raise ModelError(
            f"{kind} '{name}': {', '.join(traced)} {'is' if len(traced) == 1 else 'are'} traced by jax (the part is "
            "built inside jax.grad, jit or vmap); parts are built from numbers, once. To differentiate, build the "
            "system with numbers and trace the assembled model instead: cs.step or cs.trajectory of "
            "dataclasses.replace(assembly.model, mu=...) (the mass matrix: masses and Euler tensors) or of an "
            "initial state (cs.pose for joint angles and rates), or read the number in a law through a "
            "cs.Parameter (model.parameters).")


def _check_mass(name, mass, allow_zero=False):
    """The mass in kg, positive and finite (≥ 0 with ``allow_zero``: a hybrid rotor whose mass the
    master carries)."""
    try:  # a number (a numpy scalar, a Parameter), not a string or a flag that float() would convert
        m = float("nan") if isinstance(mass, (str, bytes, bool, np.bool_)) else float(mass)
    except (TypeError, ValueError):
        m = float("nan")
    if not np.isfinite(m) or m < 0 or (m == 0 and not allow_zero):
        kind, bound = ("rotor", "≥ 0") if allow_zero else ("body", "positive")
        raise InvalidMass(f"{kind} '{name}': mass must be {bound} and finite, "
                          f"got {mass!r} kg.")
    return m


def checked_inertia(name, inertia):
    """The inertia tensor J (3, 3) from principal moments (3,) or a tensor (3, 3), checked.

    Raises InvalidInertia unless J is finite, symmetric and positive definite and its principal
    moments satisfy the triangle inequality J_i ≤ J_j + J_k (equivalently E ⪰ 0).
    """
    try:
        J = np.asarray(inertia)
        complex_entries = np.iscomplexobj(J)  # numpy would drop the imaginary parts with a warning
        J = J.real.astype(float) if complex_entries else J.astype(float)
    except (TypeError, ValueError):  # words, ragged lists
        J, complex_entries = np.full(1, np.nan), False
    if complex_entries:
        raise InvalidInertia(f"body '{name}': inertia must be real numbers in kg m², got {inertia!r} (complex); give "
                             "the principal moments or the tensor's entries as real numbers.")
    if J.shape == (3,):
        J = np.diag(J)
    if J.shape != (3, 3) or not np.all(np.isfinite(J)):
        raise InvalidInertia(
            f"body '{name}': inertia must be 3 principal moments or a 3x3 tensor of finite numbers "
            f"in kg m², got {inertia!r}."
        )
    scale = np.max(np.abs(J))
    if np.max(np.abs(J - J.T)) > INERTIA_TOL * scale:
        raise InvalidInertia(f"body '{name}': inertia tensor is not symmetric: {J.tolist()}.")
    moments = np.linalg.eigvalsh(J)
    if moments[0] <= 0:
        raise InvalidInertia(
            f"body '{name}': inertia must be positive definite, principal moments are "
            f"{moments.tolist()} kg m²; every moment of inertia of a body is > 0."
        )
    j1, j2, j3 = moments  # ascending, so only j3 ≤ j1 + j2 can fail
    if j3 > j1 + j2 + INERTIA_TOL * scale:
        raise InvalidInertia(
            f"body '{name}': principal moments {moments.tolist()} violate the triangle inequality "
            f"({j3:.6g} > {j1:.6g} + {j2:.6g}); no mass distribution has this inertia. "
            "Check units and which axis is which."
        )
    return J


def euler_tensor(J):
    """E = ½ tr(J) I − J, the Euler tensor of the director mass matrix (Betsch and Steinmann 2001); J = tr(E) I − E."""
    return 0.5 * np.trace(J) * np.eye(3) - J


@dataclass(frozen=True)
class DirectorOrthonormality(ConstraintKind):
    """Internal constraints of a rigid body (Betsch and Steinmann 2001): ½(d_i·d_i − 1) = 0, d_i·d_j = 0 (i<j).

    params: ``frame`` (n, 4) block indices. Residual (n, 6), dimensionless.
    """

    rows = ("|d1|²", "|d2|²", "|d3|²", "d1·d2", "d1·d3", "d2·d3")

    def residual(self, p, Q):
        g = _director_products(Q[p["frame"][:, 1:]])  # d_i·d_j of the rows (n, 6)
        return _HALF_ON_NORMS * g - _HALF_ON_NORMS * _ON_NORMS

    def magnitude(self, p, Q):
        g = _director_products(jnp.abs(Q[p["frame"][:, 1:]]))
        return _HALF_ON_NORMS * g + _HALF_ON_NORMS * _ON_NORMS


#: the director pairs (i, j) of the rows of :class:`DirectorOrthonormality`, and the rows' factors
_PAIRS = (np.array([0, 1, 2, 0, 0, 1]), np.array([0, 1, 2, 1, 2, 2]))
_ON_NORMS = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
_HALF_ON_NORMS = np.array([0.5, 0.5, 0.5, 1.0, 1.0, 1.0])


def _director_products(d):
    """d_i·d_j (n, 6) of each frame's directors d (n, 3, 3) (rows d_i) for the pairs of :data:`_PAIRS`."""
    return jnp.sum(d[:, _PAIRS[0]] * d[:, _PAIRS[1]], axis=-1)


class Part(Element):
    """A part of the system that owns coordinate blocks (3-vectors) of q."""

    n_blocks = 0

    def __init__(self, name):
        self.name = _check_name(name)

    def mass_blocks(self):
        """μ of the part, (n_blocks, n_blocks)."""
        raise NotImplementedError

    def initial_blocks(self):
        """Initial coordinate blocks (n_blocks, 3)."""
        raise NotImplementedError

    def initial_rates(self):
        """Initial velocity blocks (n_blocks, 3)."""
        raise NotImplementedError

    def parts(self):
        return () if isinstance(self, Ground) else (self,)

    def terms(self, layout):
        return []

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class RigidBody(Part):
    """A rigid body in natural coordinates (centre of mass and three directors).

    Parameters
    ----------
    name : str
    mass : float, kg
    inertia : (3,) principal moments or (3, 3) tensor, kg m², about the centre of mass in body axes
    position : (3,), m — initial centre of mass in the inertial frame
    orientation, quaternion, euler : initial attitude, see
        :func:`conserve.kinematics.as_rotation_matrix` (default: body axes = inertial axes);
        ``degrees=True``: the Euler angles in degrees
    velocity : (3,), m/s — initial velocity of the centre of mass
    angular_velocity : (3,), rad/s — initial angular velocity
    frame : "inertial" or "body" — the frame in which ``velocity`` and ``angular_velocity`` are given
    shapes : what the body looks like, for viewers only (no effect on the dynamics): a list of
        :func:`~conserve.model.bodies.shape` dicts in body axes about the centre of mass (default: none; a viewer then
        draws the body's equivalent inertia box)
    """

    n_blocks = 4

    def __init__(self, name, mass, inertia, position=(0.0, 0.0, 0.0), orientation=None, *,
                 quaternion=None, euler=None, degrees=False, velocity=(0.0, 0.0, 0.0),
                 angular_velocity=(0.0, 0.0, 0.0), frame="inertial", shapes=()):
        super().__init__(name)
        refuse_traced("body", name, mass=mass, inertia=inertia, position=position, orientation=orientation,
                      quaternion=quaternion, euler=euler, velocity=velocity, angular_velocity=angular_velocity)
        self.mass = _check_mass(name, mass)
        self.inertia = checked_inertia(name, inertia)
        self.position = _vector(name, "position", position)
        self.rotation = as_rotation_matrix(name, orientation, quaternion, euler, degrees)
        if frame not in ("inertial", "body"):
            raise ModelError(f"body '{name}': frame must be 'inertial' or 'body', got {frame!r}.")
        to_inertial = self.rotation if frame == "body" else np.eye(3)
        self.velocity = to_inertial @ _vector(name, "velocity", velocity)
        self.angular_velocity = to_inertial @ _vector(name, "angular_velocity", angular_velocity)
        self.shapes = [checked_shape(s, f"body '{name}': shape {i}") for i, s in enumerate(shapes)]

    def mass_blocks(self):
        mu = np.zeros((4, 4))
        mu[0, 0] = self.mass
        mu[1:, 1:] = euler_tensor(self.inertia)
        return mu

    def initial_blocks(self):
        return np.vstack([self.position, self.rotation.T])

    def initial_rates(self):
        return np.vstack([self.velocity, np.cross(self.angular_velocity, self.rotation.T)])

    def body_point(self, x):
        """Body coordinates X of the inertial point x at the initial configuration."""
        return self.rotation.T @ (np.asarray(x, float) - self.position)

    def body_vector(self, u):
        """Body components U of the inertial vector u at the initial configuration."""
        return self.rotation.T @ np.asarray(u, float)

    def world_point(self, X):
        return self.position + self.rotation @ np.asarray(X, float)

    def world_vector(self, U):
        return self.rotation @ np.asarray(U, float)

    def terms(self, layout):
        return [Term(DirectorOrthonormality(), {"frame": layout.frame(self)}, self.name)]


#: visual shape kinds and how many ``size`` values each takes (MuJoCo's geom conventions, m): a box
#: its 3 half-sizes, a sphere its radius, a capsule or cylinder its radius and half-length along the
#: shape's z, an ellipsoid its 3 semi-axes; a mesh none (its ``vertices`` and ``faces`` instead)
SHAPE_SIZES = {"box": 3, "sphere": 1, "capsule": 2, "cylinder": 2, "ellipsoid": 3, "mesh": 0}


def shape(kind, size=(), pos=(0.0, 0.0, 0.0), rotation=None, rgba=None, vertices=None, faces=None) -> dict:
    """A visual shape of a body (:class:`RigidBody` ``shapes``), in body axes about its centre of
    mass: ``kind`` one of ``SHAPE_SIZES`` with its ``size`` values in m (see there), ``pos`` (3,) m
    and ``rotation`` (3, 3) (the shape's axes in body axes; default identity), ``rgba`` (4,) in
    [0, 1]; a mesh's ``vertices`` (V, 3) m in the shape's axes and ``faces`` (F, 3) vertex indices.
    Checked by :func:`checked_shape`."""
    spec = {"kind": kind, "size": size, "pos": pos, "rotation": np.eye(3) if rotation is None else rotation,
            "rgba": rgba, "vertices": vertices, "faces": faces}
    return checked_shape({k: v for k, v in spec.items() if v is not None})


def checked_shape(spec, where="shape") -> dict:
    """The shape dict ``spec`` (:func:`shape`'s entries) checked and in plain lists: {"kind",
    "size", "pos", "rotation"[, "rgba"][, "vertices", "faces"]}; a ModelError starting with
    ``where`` says what is wrong."""
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind not in SHAPE_SIZES:
        raise ModelError(f"{where}: kind {kind!r} is not one of {', '.join(SHAPE_SIZES)}; a shape is a dict with "
                         "'kind', 'size', 'pos', 'rotation' (cs.model.bodies.shape makes one).")
    size = np.asarray(spec.get("size", []), float).ravel()
    need = SHAPE_SIZES[kind]
    if size.size < need or not np.all(np.isfinite(size[:need])) or np.any(size[:need] <= 0):
        raise ModelError(f"{where}: a {kind} needs {need} positive size value(s) (MuJoCo's convention, m), got "
                         f"{spec.get('size')!r}.")
    pos = np.asarray(spec.get("pos", (0.0, 0.0, 0.0)), float)
    rotation = np.asarray(spec.get("rotation", np.eye(3)), float)
    if pos.shape != (3,) or not np.all(np.isfinite(pos)):
        raise ModelError(f"{where}: pos must be 3 finite numbers (m, body axes), got {spec.get('pos')!r}.")
    if rotation.shape != (3, 3) or not np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-6) \
            or np.linalg.det(rotation) <= 0:
        raise ModelError(f"{where}: rotation must be a 3x3 rotation matrix (the shape's axes in body axes), got "
                         f"{spec.get('rotation')!r}.")
    out = {"kind": kind, "size": size[:need].tolist(), "pos": pos.tolist(), "rotation": rotation.tolist()}
    rgba = spec.get("rgba")
    if rgba is not None:
        if np.shape(rgba) != (4,) or not np.all((np.asarray(rgba, float) >= 0) & (np.asarray(rgba, float) <= 1)):
            raise ModelError(f"{where}: rgba must be 4 numbers in [0, 1], got {rgba!r}.")
        out["rgba"] = np.asarray(rgba, float).tolist()
    if kind == "mesh":
        vertices = np.asarray(spec.get("vertices", []), float)
        faces = np.asarray(spec.get("faces", []))
        if vertices.ndim != 2 or vertices.shape[1] != 3 or not len(vertices) or not np.all(np.isfinite(vertices)):
            raise ModelError(f"{where}: a mesh needs 'vertices' [[x, y, z], ...] (m, finite), got shape "
                             f"{vertices.shape}.")
        if faces.ndim != 2 or faces.shape[1] != 3 or not len(faces) or not np.issubdtype(faces.dtype, np.integer) \
                or faces.min() < 0 or faces.max() >= len(vertices):
            raise ModelError(f"{where}: a mesh needs 'faces' [[i, j, k], ...] of vertex indices 0 … "
                             f"{len(vertices) - 1}.")
        out["vertices"], out["faces"] = vertices.tolist(), faces.tolist()
    return out


class PointMass(Part):
    """A point mass: q = φ ∈ R³, mass in kg, position in m, velocity in m/s (inertial)."""

    n_blocks = 1

    def __init__(self, name, mass, position=(0.0, 0.0, 0.0), velocity=(0.0, 0.0, 0.0)):
        super().__init__(name)
        refuse_traced("point mass", name, mass=mass, position=position, velocity=velocity)
        self.mass = _check_mass(name, mass)
        self.position = _vector(name, "position", position)
        self.velocity = _vector(name, "velocity", velocity)

    def mass_blocks(self):
        return np.array([[self.mass]])

    def initial_blocks(self):
        return self.position[None, :]

    def initial_rates(self):
        return self.velocity[None, :]

    def body_point(self, x):
        X = np.asarray(x, float) - self.position
        if np.linalg.norm(X) > 1e-12 * (1 + np.linalg.norm(self.position)):
            raise ModelError(
                f"point mass '{self.name}': a point mass has no orientation, so it can only be "
                f"attached at its own position {self.position.tolist()}, not at {np.asarray(x).tolist()}."
            )
        return np.zeros(3)

    def body_vector(self, u):
        return np.asarray(u, float)  # a point mass's axes are the inertial axes

    def world_point(self, X):
        return self.position + np.asarray(X, float)

    world_vector = body_vector


class Ground(Part):
    """The inertial frame: origin and axes e1, e2, e3, no coordinates. Use the instance ``ground``."""

    def __init__(self):
        super().__init__("ground")

    def body_point(self, x):
        return np.asarray(x, float)

    body_vector = world_point = world_vector = body_point


#: The ground (inertial frame) to attach joints to.
ground = Ground()
