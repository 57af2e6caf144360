"""Flexible members: geometrically exact rods (Simo–Reissner) in director form.

A beam of N elements has N + 1 *nodes*, and a node is a rigid body's frame (φ, d1, d2, d3) with
the same six orthonormality constraints: φ a point of the centreline, d3 the section's normal
(along the centreline when the section is not sheared), d1 and d2 the section's principal axes
(Betsch and Steinmann 2002, "Frame-indifferent beam finite elements based upon the geometrically
exact beam theory", IJNME 54; Romero and Armero 2002, IJNME 54). Each element interpolates its
two nodes linearly and is integrated at its midpoint (one point: no shear locking), so its
strains are

    Γ_i = d̄_i · φ′,   φ′ = (φ_B − φ_A) / L,   d̄_i = ½ (d_i^A + d_i^B)       (shear Γ1, Γ2; stretch Γ3)
    K_i = (d_j^B · d_k^A − d_j^A · d_k^B) / (2L),   (i, j, k) cyclic         (bending K1, K2; twist K3)

(K_i is ½ (d_j′·d̄_k − d_k′·d̄_j), the material curvature about d_i). They are bilinear in the
nodal coordinates, hence quadratic invariants in the sense of :mod:`conserve.discrete.gradient`,
and unchanged by any rigid motion: the strain energy

    U_e = ½ L Σ_i [C_Γi (Γ_i − Γ_i⁰)² + C_Ki (K_i − K_i⁰)²],   C_Γ = (GA1, GA2, EA), C_K = (EI1, EI2, GJ)

is objective, its discrete gradient ∇̄U = L C (ε̄ − ε⁰) with ε̄ = ½ (ε_n + ε_{n+1}) is exact (U is
quadratic in ε), so the step keeps energy and momentum exactly (Simo, Tarnow and Doblaré 1995;
the strain-averaged force of Romero and Armero). The reference strains ε⁰ are the initial
shape's: a beam is stress-free as built, curved or twisted.

Mass is *lumped*: each node carries ρA and the section's rotary inertia over half of each
element beside it, as a body with principal moments (ρI1, ρI2, ρI1 + ρI2) ℓ about (d1, d2, d3).
Lumped rather than consistent, because then every node is an ordinary rigid body: the mass matrix
stays block-diagonal, joints, forces and hybrid rotors attach to nodes as to any body, and the
step's Newton matrix keeps the beam's chain structure, which the tree elimination solves in time
linear in the number of elements. For linear elements both converge at the same order (the
lumped frequencies from below, the consistent from above). The section's own inertia about d3 is
its polar moment; the Euler tensor's d3 entry is then 0, which the constraints make harmless.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..kinematics.rotations import as_rotation_matrix
from .bodies import RigidBody, _vector
from .elements import ForceElement, PotentialKind
from .forces import Load
from .terms import Term

#: the strain components of an element, in the order of :class:`ElasticRod`'s invariants
STRAINS = ("shear 1", "shear 2", "stretch", "bending 1", "bending 2", "twist")
#: the stress resultants conjugate to :data:`~conserve.model.beams.STRAINS` (section axes): N, N, N, N m, N m, N m
RESULTANTS = ("shear force 1", "shear force 2", "axial force", "bending moment 1", "bending moment 2", "torque")

_CYCLIC = ((1, 2), (2, 0), (0, 1))  # (j, k) of K_i for i = 0, 1, 2


def rod_strains(phi_a, d_a, phi_b, d_b, length):
    """The strains (…, 6) = (Γ1, Γ2, Γ3, K1, K2, K3) of elements from their end nodes (module
    docstring): points φ (…, 3) in m, directors d (…, 3, 3) (rows d_i), reference lengths L (…,)
    in m. Γ is dimensionless, K in 1/m."""
    L = jnp.asarray(length)[..., None]
    dphi = (phi_b - phi_a) / L
    gamma = jnp.sum(0.5 * (d_a + d_b) * dphi[..., None, :], axis=-1)
    kappa = jnp.stack([jnp.sum(d_b[..., j, :] * d_a[..., k, :] - d_a[..., j, :] * d_b[..., k, :], axis=-1)
                       for j, k in _CYCLIC], axis=-1) / (2 * L)
    return jnp.concatenate([gamma, kappa], axis=-1)


@dataclass(frozen=True)
class ElasticRod(PotentialKind):
    """The strain energy of geometrically exact rod elements (module docstring).

    Invariants: the element's strains ε (n, 6) (:func:`rod_strains`); energy
    U = ½ L Σ C (ε − ε⁰)² in J; closed-form discrete gradient L C (½ (ε_n + ε_{n+1}) − ε⁰), exact
    because U is quadratic in ε.
    params: ``frame_a``, ``frame_b`` (n, 4) the end nodes, ``length`` L (n,) in m, ``stiffness``
    C (n, 6) = (GA1, GA2, EA in N, EI1, EI2, GJ in N m²), ``reference`` ε⁰ (n, 6); with
    ``viscous`` also ``damping`` η = τ L C (n, 6) (Kelvin–Voigt, retardation times τ in s): the
    step adds the force ∇ε(q_{n+½})ᵀ η Δε/h and reports the dissipation Σ η Δε²/h ≥ 0
    (:mod:`conserve.discrete.forces`).
    """

    viscous: bool = False

    def invariants(self, p, Q):
        fa, fb = p["frame_a"], p["frame_b"]
        return rod_strains(Q[fa[:, 0]], Q[fa[:, 1:]], Q[fb[:, 0]], Q[fb[:, 1:]], p["length"])

    def energy(self, p, pi):
        e = pi - p["reference"]
        return 0.5 * p["length"] * jnp.sum(p["stiffness"] * e * e)

    def discrete_gradient(self, p, pi0, pi1):
        return p["length"] * p["stiffness"] * (0.5 * (pi0 + pi1) - p["reference"])


def _positive(what, value, unit, n=1):
    """``value`` as a positive finite float (n = 1) or a pair of them (n = 2, one number repeats)."""
    try:
        v = np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
    except (TypeError, ValueError):
        v = np.full(n, np.nan)
    if not np.all(np.isfinite(v) & (v > 0)):
        raise ModelError(f"Section: {what} must be {'a positive number' if n == 1 else 'one or two positive numbers'} "
                         f"in {unit}, got {value!r}.")
    return float(v[0]) if n == 1 else (float(v[0]), float(v[1]))


@dataclass(frozen=True)
class Section:
    """A beam's cross-section per unit length, in its principal axes (d1, d2); d3 is its normal.

    Parameters
    ----------
    EA : axial stiffness, N
    GA : shear stiffness, N: one number or (GA1, GA2) for shear along d1 and d2 (shear
        correction included)
    GJ : torsional stiffness, N m²
    EI : bending stiffness, N m²: one number or (EI1, EI2) about d1 and d2
    rhoA : mass per length, kg/m
    rhoI : rotary inertia per length about d1 and d2, kg m (one number or two; about d3 it is
        their sum)

    ``Section.rectangle``, ``.circle`` and ``.tube`` compute them from a material and a shape.
    """

    EA: float
    GA: tuple
    GJ: float
    EI: tuple
    rhoA: float
    rhoI: tuple

    def __init__(self, EA, GA, GJ, EI, rhoA, rhoI):
        object.__setattr__(self, "EA", _positive("EA", EA, "N"))
        object.__setattr__(self, "GA", _positive("GA", GA, "N", 2))
        object.__setattr__(self, "GJ", _positive("GJ", GJ, "N m²"))
        object.__setattr__(self, "EI", _positive("EI", EI, "N m²", 2))
        object.__setattr__(self, "rhoA", _positive("rhoA", rhoA, "kg/m"))
        object.__setattr__(self, "rhoI", _positive("rhoI", rhoI, "kg m", 2))

    @property
    def stiffness(self):
        """C (6,) = (GA1, GA2, EA, EI1, EI2, GJ) in the order of :data:`~conserve.model.beams.STRAINS`."""
        return np.array([*self.GA, self.EA, *self.EI, self.GJ])

    @classmethod
    def _of_shape(cls, A, I1, I2, J, E, G, nu, rho, shear_factor):
        E, rho = _positive("E", E, "Pa"), _positive("rho", rho, "kg/m³")
        if (G is None) == (nu is None):
            raise ModelError("Section: give the shear modulus G= or Poisson's ratio nu= (not both).")
        G = _positive("G", G, "Pa") if G is not None else E / (2.0 * (1.0 + float(nu)))
        return cls(EA=E * A, GA=shear_factor * G * A, GJ=G * J, EI=(E * I1, E * I2), rhoA=rho * A,
                   rhoI=(rho * I1, rho * I2))

    @classmethod
    def rectangle(cls, width, height, *, E, rho, G=None, nu=None, shear_factor=5 / 6):
        """A solid rectangle, ``width`` along d1 and ``height`` along d2 (m); Young's modulus E and
        shear modulus G (or Poisson's ratio nu) in Pa, density rho in kg/m³. Torsion constant
        J = a b³ (1/3 − 0.21 (b/a)(1 − b⁴/(12 a⁴))), a ≥ b the sides (Roark, Table 10.7)."""
        b, h = _positive("width", width, "m"), _positive("height", height, "m")
        a, c = max(b, h), min(b, h)
        J = a * c**3 * (1 / 3 - 0.21 * (c / a) * (1 - c**4 / (12 * a**4)))
        return cls._of_shape(b * h, b * h**3 / 12, h * b**3 / 12, J, E, G, nu, rho, shear_factor)

    @classmethod
    def circle(cls, radius, *, E, rho, G=None, nu=None, shear_factor=0.9):
        """A solid circle of ``radius`` (m); material as :meth:`rectangle`. J = π r⁴/2."""
        r = _positive("radius", radius, "m")
        return cls._of_shape(np.pi * r**2, np.pi * r**4 / 4, np.pi * r**4 / 4, np.pi * r**4 / 2, E, G, nu, rho,
                             shear_factor)

    @classmethod
    def tube(cls, outer_radius, inner_radius, *, E, rho, G=None, nu=None, shear_factor=0.5):
        """A circular tube (m); material as :meth:`rectangle`. J = π (r_o⁴ − r_i⁴)/2."""
        ro, ri = _positive("outer_radius", outer_radius, "m"), float(inner_radius)
        if not 0 <= ri < ro:
            raise ModelError(f"Section.tube: inner_radius must be in [0, outer_radius), got {inner_radius!r} m.")
        q = ro**4 - ri**4
        return cls._of_shape(np.pi * (ro**2 - ri**2), np.pi * q / 4, np.pi * q / 4, np.pi * q / 2, E, G, nu, rho,
                             shear_factor)


def _turn(u, v):
    """The least rotation (3, 3) taking the unit vector u to the unit vector v (Rodrigues)."""
    axis, c = np.cross(u, v), float(u @ v)
    if c < -1 + 1e-12:
        raise ModelError("Beam: the polyline turns back on itself (two consecutive segments opposite).")
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + K + K @ K / (1 + c)


def _polyline_nodes(name, points, elements):
    """(node positions (N + 1, 3), node tangents (N + 1, 3)) with each segment divided into its
    number of equal elements."""
    try:
        P = np.asarray(points, dtype=float)
    except (TypeError, ValueError):
        P = np.full((0,), np.nan)
    if P.ndim != 2 or P.shape[1] != 3 or len(P) < 2 or not np.all(np.isfinite(P)):
        raise ModelError(f"beam '{name}': points must be 2 or more 3-vectors (m): the end points or a polyline, "
                         f"got {points!r}.")
    counts = np.broadcast_to(np.asarray(elements), (len(P) - 1,))
    if not np.all((counts >= 1) & (counts == np.round(counts))):
        raise ModelError(f"beam '{name}': elements must be a positive integer per segment, got {elements!r}.")
    seg = np.diff(P, axis=0)
    lengths = np.linalg.norm(seg, axis=1)
    if np.any(lengths <= 1e-12 * (1 + np.abs(P).max())):
        raise ModelError(f"beam '{name}': two consecutive points coincide (segment {int(np.argmin(lengths))}).")
    nodes = [P[0]]
    for a, d, n in zip(P[:-1], seg, counts.astype(int)):
        nodes.extend(a + d * (k / n) for k in range(1, n + 1))
    nodes = np.array(nodes)
    unit = seg / lengths[:, None]
    tangents = np.repeat(unit, counts.astype(int), axis=0)  # per element
    at_node = np.vstack([tangents[:1], tangents[:-1] + tangents[1:], tangents[-1:]])
    return nodes, at_node / np.linalg.norm(at_node, axis=1, keepdims=True)


class Beam(ForceElement):
    """A geometrically exact beam (Simo–Reissner rod) of ``section`` along ``points``.

    Its nodes are rigid bodies (``beam.nodes``, named ``"name[i]"``), so any joint, force or
    hybrid rotor attaches to a node as to a body:
    ``cs.Fixed(beam.start, cs.ground, at=beam.start.position)`` clamps it,
    ``cs.Revolute(beam.node(3), hub, ...)`` pins it. Add the beam to the System; its nodes come with
    it. Energy, momentum and every joint are kept exactly (:mod:`conserve.model.beams`). After a
    run, ``sol[beam]`` (a :class:`~conserve.results.solution.BeamView`) gives its centreline,
    frames, strains and stress resultants over time.

    Parameters
    ----------
    name : str
    section : :class:`Section`
    points : (m, 3), m — the end points (m = 2) or a polyline through which the centreline runs
        at the start; its shape at the start is stress-free
    elements : elements per segment of the polyline (an int, or m − 1 of them)
    normal : (3,), the direction d1 (the section's first axis) is closest to at the first node,
        carried along the polyline by the least rotation (default: the inertial axis most
        perpendicular to the first segment)
    frames : (N + 1, 3, 3), optional — the nodes' rotations (columns d1, d2, d3) instead, for a
        twisted or sheared reference
    velocity, angular_velocity : (3,) — a rigid motion at the start: the first node's velocity
        (m/s) and the angular velocity (rad/s, inertial)
    damping : retardation time τ in s of Kelvin–Voigt material damping, stresses C (ε − ε⁰ + τ ε̇)
        (one number, or 6 in the order of :data:`~conserve.model.beams.STRAINS`); its dissipation
        per element and step is reported as a damper's (``sol.dissipation_by_element["name element e"]``)
    """

    def __init__(self, name, section, points, elements=1, *, normal=None, frames=None, velocity=(0.0, 0.0, 0.0),
                 angular_velocity=(0.0, 0.0, 0.0), damping=0.0):
        self.name = name
        try:
            self.damping = np.broadcast_to(np.asarray(damping, dtype=float), (6,)).copy()
        except (TypeError, ValueError):
            self.damping = np.full(6, np.nan)
        if not np.all(np.isfinite(self.damping) & (self.damping >= 0)):
            raise ModelError(f"beam '{name}': damping must be a retardation time ≥ 0 in s (one number or 6), "
                             f"got {damping!r}.")
        if not isinstance(section, Section):
            raise ModelError(f"beam '{name}': section must be a cs.Section, got {section!r}.")
        self.section = section
        x, tangent = _polyline_nodes(name, points, elements)
        if frames is None:
            rotations = _carried_frames(name, tangent, normal)
        else:
            frames = np.asarray(frames, dtype=float)
            if frames.shape != (len(x), 3, 3):
                raise ModelError(f"beam '{name}': frames must be ({len(x)}, 3, 3), one rotation per node; got "
                                 f"{frames.shape}.")
            rotations = np.array([as_rotation_matrix(f"{name}[{i}]", f) for i, f in enumerate(frames)])
        L = np.linalg.norm(np.diff(x, axis=0), axis=1)
        self.lengths = L
        #: (N + 1,) the length each node carries, half of each element beside it (m): its lumped share
        self.shares = 0.5 * (np.concatenate([L, [0.0]]) + np.concatenate([[0.0], L]))
        I1, I2 = section.rhoI
        v, w = _vector(name, "velocity", velocity, "beam"), _vector(name, "angular_velocity", angular_velocity, "beam")
        self.nodes = tuple(
            RigidBody(f"{name}[{i}]", section.rhoA * s, np.array([I1, I2, I1 + I2]) * s, position=xi, orientation=R,
                      velocity=v + np.cross(w, xi - x[0]), angular_velocity=w)
            for i, (xi, R, s) in enumerate(zip(x, rotations, self.shares)))
        d = np.swapaxes(rotations, 1, 2)  # rows d_i
        self.reference = np.asarray(rod_strains(x[:-1], d[:-1], x[1:], d[1:], L))
        self.arclength = np.concatenate([[0.0], np.cumsum(L)])

    @property
    def n_elements(self):
        return len(self.lengths)

    @property
    def start(self):
        """The first node (a RigidBody)."""
        return self.nodes[0]

    @property
    def end(self):
        """The last node (a RigidBody)."""
        return self.nodes[-1]

    def node(self, i):
        """Node ``i`` (0 … N; negative counts from the end)."""
        try:
            return self.nodes[i]
        except (IndexError, TypeError):
            raise ModelError(f"beam '{self.name}': it has nodes 0 … {len(self.nodes) - 1}, got {i!r}.") from None

    def at(self, s):
        """The node at arclength ``s`` (m) from the start, which must be a node's (to 1e-9 of the
        length): joints and loads attach at nodes."""
        i = int(np.argmin(np.abs(self.arclength - s)))
        if abs(self.arclength[i] - s) > 1e-9 * self.arclength[-1]:
            near = self.arclength[max(i - 1, 0):i + 2]
            raise ModelError(f"beam '{self.name}': no node at s = {s!r} m; the nearest are at {near.tolist()} m. "
                             "Choose elements so that a node falls there, or attach at one of these.")
        return self.nodes[i]

    def parts(self):
        return self.nodes

    def sketch(self):
        return [("beam", a, np.zeros(3), b, np.zeros(3)) for a, b in zip(self.nodes[:-1], self.nodes[1:])]

    def terms(self, layout):
        frames = np.array([layout.frame(n) for n in self.nodes])
        C, viscous = self.section.stiffness, bool(np.any(self.damping > 0))
        terms = []
        for e, L in enumerate(self.lengths):
            p = {"frame_a": frames[e], "frame_b": frames[e + 1], "length": L, "stiffness": C,
                 "reference": self.reference[e]}
            if viscous:
                p["damping"] = self.damping * L * C
            terms.append(Term(ElasticRod(viscous), p, f"{self.name} element {e}"))
        return terms

    def record(self):
        """What a Solution needs to show the beam: node names, element lengths, stiffnesses and
        reference strains (plain lists)."""
        return {"nodes": [n.name for n in self.nodes], "lengths": self.lengths.tolist(),
                "stiffness": self.section.stiffness.tolist(), "reference": self.reference.tolist()}

    def __repr__(self):
        return f"Beam({self.name!r}, {self.n_elements} elements, length {self.arclength[-1]:.6g} m)"


def _carried_frames(name, tangent, normal):
    """Node rotations (N + 1, 3, 3) with d3 the node's tangent and d1 closest to ``normal`` at the
    first node, then carried from node to node by the least rotation between their tangents."""
    t0 = tangent[0]
    if normal is None:
        normal = np.eye(3)[int(np.argmin(np.abs(t0)))]
    n = _vector(name, "normal", normal, "beam")
    d1 = n - (n @ t0) * t0
    if np.linalg.norm(d1) < 1e-9 * np.linalg.norm(n):
        raise ModelError(f"beam '{name}': normal {n.tolist()} is along the beam; give a direction across it.")
    d1 /= np.linalg.norm(d1)
    out = [np.column_stack([d1, np.cross(t0, d1), t0])]
    for a, b in zip(tangent[:-1], tangent[1:]):
        out.append(_turn(a, b) @ out[-1])
    return np.array(out)


class DistributedLoad(ForceElement):
    """A load per unit length on a beam, constant: a force ``per_length`` (3,) in N/m, lumped at
    the nodes as the mass is (each node carries the load over half of each element beside it),
    in inertial axes, or with ``frame="body"`` in each node's section axes (d1, d2, d3): a
    follower load that turns with the section (a pressure, a blade's lift). Its discrete work is
    reported per node like a :class:`~conserve.Force`'s (``"name[i]"``). Gravity is
    :class:`~conserve.Gravity`; a load that varies in time is a ``cs.Force`` with a law per node.
    """

    def __init__(self, beam, per_length, *, frame="inertial", name=None):
        self.name = name or f"load on {getattr(beam, 'name', beam)}"
        if not isinstance(beam, Beam):
            raise ModelError(f"'{self.name}': a distributed load acts on a cs.Beam, got {beam!r}.")
        if callable(per_length):
            raise ModelError(f"'{self.name}': per_length must be a constant (3,) in N/m; for a load that varies "
                             "in time, put a cs.Force with a law on each node (beam.nodes).")
        if frame not in ("inertial", "body"):
            raise ModelError(f"'{self.name}': frame must be 'inertial' or 'body', got {frame!r}.")
        self.beam, self.per_length = beam, _vector(self.name, "per_length", per_length, "load")
        self.kind = Load(body_axes=frame == "body")

    def parts(self):
        return self.beam.nodes

    def terms(self, layout):
        return [Term(self.kind, {"frame": layout.frame(node), "at": np.zeros(3), "force": ell * self.per_length,
                                 "torque": np.zeros(3)}, f"{self.name}[{i}]")
                for i, (node, ell) in enumerate(zip(self.beam.nodes, self.beam.shares))]
