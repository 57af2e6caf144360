"""System: the user's collection of parts, assembled once into a :class:`Model` (pure jax, flat arrays).

Assembly fixes the coordinate layout (parts in order of appearance, each owning consecutive
3-vector blocks), groups elements by kind, and checks the initial state: positions and
velocities on the constraints. It computes the rank of the constraint Jacobian G(q0): dependent
(redundant) rows — closed planar loops in 3-D, a joint stated twice — are named and, by
default, dropped so that the remaining rows have full rank; all rows are still monitored. A row
whose gradient is zero constrains nothing (a hinge's axis on a point mass) and is refused.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation.modes import jit_quick
from ..errors import InconsistentInitialState, ModelError
from .assembled import Model, State
from .beams import Beam
from .bodies import Ground, Part, RigidBody
from .coordinates import CoordinateElement
from .custom import check_quadratic_invariants
from .drives import JointDrive
from .elements import ConstraintKind, Element, LoadKind, PotentialKind
from .identity import shared_laws
from .joints import Joint
from .laws import check_all
from .parameters import recording
from .rotors import Rotor
from .terms import ROUNDOFF, stack_terms
from .tree import Tree, link_geometry, spanning_tree

#: Largest accepted initial constraint residual |g_i| is POSITION_TOL + ROUNDOFF · m_i (m for
#: joints, 1 for director constraints), with m_i the size of the terms of the equation (|x_a| +
#: |x_b| for two points, so a joint 10⁷ m from the origin is judged by its round-off, ~1e-9 m, not
#: by 10⁷ × 1e-10); orientations are projected onto rotations, so this is about joints.
POSITION_TOL = 1e-10
#: Largest accepted initial velocity-constraint residual |(G v0)_i|, relative to 1 + (|G| |v0|)_i.
VELOCITY_TOL = 1e-9
#: A row is dependent when its component orthogonal to the rows kept before it is below
#: RANK_TOL times its norm.
RANK_TOL = 1e-9


@dataclass
class Layout:
    """Where everything lives in the flat arrays; Python-side only (never traced).

    Attributes
    ----------
    parts : the parts with coordinates, in block order
    offsets : {name: first block index}
    constraint_rows : [(owner, equation)] for every row of g(q)
    dropped_rows : indices of redundant rows left out of the step
    rotors : the hybrid rotors, in the order of p and θ in the state
    body_rotors : rotors modelled as full bodies (``Rotor(..., model="body")``)
    coordinate_names : owners of the tracked joint coordinates s (springs, dampers, motors)
    work_names : owners of the entries of the per-step work (joint motors, loads, rotor motors)
    potential_names : owners of the potentials, in the order of ``Model.potential_energies``
    dissipation_names : owners of the per-step dissipation (joint dampers, viscous potential
        elements, then rotor bearings)
    rank, degrees_of_freedom : of the assembled system
    sketch : what a picture needs (:mod:`conserve.results.animation`): {"links": [(name, kind, part a,
        body point a, part b, body point b)] of joints, ropes, springs and beam elements (kind
        "joint", "rope", "spring", "beam"; part "ground" for the ground), "rotors": {name: (master,
        body axis, body offset, radius m)}, "inertia": {rigid body: [mass kg, (3, 3) inertia kg m² in
        body axes]} (a viewer's default box), "shapes": {body: [shape dicts]} of the bodies with
        visual shapes (:func:`conserve.model.bodies.shape`)} as plain lists
    joints : {name: :meth:`~conserve.model.joints.Joint.record`} of every joint, for its sensors
        (a driven joint's record: ``"drives"`` {coordinate: drive name})
    drives : {name: the :class:`~conserve.model.drives.JointDrive`} (posing evaluates their laws)
    beams : {name: :meth:`~conserve.Beam.record`} of every beam (nodes, element
        lengths, stiffnesses, reference strains), for its view in a Solution
    added : {part name: names of the elements that reference it} of the parts not listed in the
        System but added because other elements reference them
    projection : what projecting the initial velocities changed (``assemble(project_velocities=True)``)
    """

    parts: list
    offsets: dict
    rotors: list = field(default_factory=list)
    body_rotors: list = field(default_factory=list)
    constraint_rows: list = field(default_factory=list)
    dropped_rows: list = field(default_factory=list)
    coordinate_names: list = field(default_factory=list)
    work_names: list = field(default_factory=list)
    potential_names: list = field(default_factory=list)
    dissipation_names: list = field(default_factory=list)
    rank: int = 0
    degrees_of_freedom: int = 0
    sketch: dict = field(default_factory=dict)
    joints: dict = field(default_factory=dict)
    drives: dict = field(default_factory=dict)
    beams: dict = field(default_factory=dict)
    added: dict = field(default_factory=dict)
    projection: str = ""

    @property
    def n_blocks(self):
        return sum(p.n_blocks for p in self.parts)

    def __post_init__(self):
        self._by_name = {p.name: p for p in self.parts}

    def frame(self, part):
        """Block indices (4,) of the part's frame (φ, d1, d2, d3) in the extended block array."""
        g = self.n_blocks
        if isinstance(part, Ground):
            return np.arange(g, g + 4)
        if self._by_name.get(part.name) is not part:
            raise ModelError(f"part '{part.name}' is not in this system; add it to the System.")
        o = self.offsets[part.name]
        if part.n_blocks == 4:
            return np.arange(o, o + 4)
        return np.array([o, g + 1, g + 2, g + 3])  # point mass: inertial axes

    def rotor_index(self, rotor):
        """Index of a hybrid rotor in the state's p and θ."""
        for i, r in enumerate(self.rotors):
            if r is rotor:
                return i
        raise ModelError(f"rotor '{rotor.name}' is not in this system; add it to the System.")

    def masses(self, only=None):
        """(frame, body point, mass, owner) of every mass: parts at their centre of mass and hybrid
        rotors at their centre on the master; ``only`` restricts to the listed parts and the hybrid
        rotors riding on them."""
        keep = (lambda part: True) if only is None else (lambda part: any(part is o for o in only))  # noqa: E731
        return ([(self.frame(p), np.zeros(3), p.mass, p.name) for p in self.parts if keep(p)]
                + [(self.frame(r.master), r.offset, r.mass, r.name) for r in self.rotors if keep(r.master)])

    def describe(self):
        """{name: (kind, first block, number of blocks)} for saving with a Solution."""
        return {p.name: (type(p).__name__, self.offsets[p.name], p.n_blocks) for p in self.parts}


@dataclass(frozen=True)
class Assembly:
    """An assembled system: the model (traced), the layout (Python) and the initial state."""

    model: Model
    layout: Layout
    initial_state: State

    @property
    def degrees_of_freedom(self):
        return self.layout.degrees_of_freedom

    def __repr__(self):
        """One line: parts, hybrid rotors, coordinates, constraint equations, degrees of freedom
        (:meth:`report` for the rest; ``assembly.model`` and ``assembly.initial_state`` hold the arrays)."""
        L = self.layout
        count = lambda n, what: f"{n} {what}{'' if n == 1 else 's'}"  # noqa: E731
        rotors = f", {count(len(L.rotors), 'hybrid rotor')}" if L.rotors else ""
        return (f"Assembly({count(len(L.parts), 'part')}{rotors}, {count(self.model.n_coordinates, 'coordinate')}, "
                f"{count(len(L.constraint_rows), 'constraint equation')}, {L.degrees_of_freedom} DOF)")

    def report(self) -> str:
        """Coordinates, constraints, rank, dropped rows and degrees of freedom, as text."""
        L = self.layout
        n_q = self.model.n_coordinates
        lines = [f"{len(L.parts)} parts, {n_q} coordinates, {len(L.constraint_rows)} constraint equations, "
                 f"rank {L.rank}: {L.degrees_of_freedom} degrees of freedom"]
        if L.added:
            lines.append(f"added (not listed in the System): {_added(L.added)}")
        if L.projection:
            lines.append(L.projection)
        if L.dropped_rows:
            lines.append(f"{len(L.dropped_rows)} redundant equations dropped: "
                         + ", ".join(f"{L.constraint_rows[i][0]} ({L.constraint_rows[i][1]})" for i in L.dropped_rows))
        return "\n".join(lines)


def _added(added):
    """'b' (in 'hinge'), 'c' (in 'spring', 'motor'): parts added with the elements naming them."""
    return ", ".join(f"'{name}' (in {', '.join(repr(o) for o in owners)})" for name, owners in added.items())


def as_assembly(system, who):
    """The Assembly of a System (assembled now) or an Assembly as given; ``who`` names the caller
    in the error for anything else."""
    assembly = system.assemble() if isinstance(system, System) else system
    if not isinstance(assembly, Assembly):
        raise ModelError(f"{who}: expected a cs.System or its assembly, got {type(system).__name__}.")
    return assembly


class System:
    """A multibody system: bodies, joints and forces.

    >>> system = cs.System([top, cs.Spherical(top, cs.ground, at=[0, 0, 0]), cs.Gravity()])

    Parts that appear only in joints or forces are added, with a warning naming them (list every
    part to say that it belongs). Names must be unique.
    """

    def __init__(self, elements=()):
        self.elements, self.body_rotors, self.controllers, self.added = [], [], [], {}
        if isinstance(elements, Element):
            raise ModelError(f"System: give the elements as a list, System([...]), got the single element "
                             f"{elements!r}.")
        for e in elements:
            self.add(e)

    def add(self, element):
        if hasattr(element, "sampler"):  # a Controller (conserve.control): its motors and loads, then itself
            if any(c.name == element.name for c in self.controllers):
                raise ModelError(f"System: two controllers are named '{element.name}'; names must be unique.")
            for e in element.elements:
                self.add(e)
            self.controllers.append(element)
            return self
        if isinstance(element, Rotor) and element.model == "body":
            self.body_rotors.append(element)
            for e in element.expand():  # body, revolute bearing, bearing damper, motor
                self.add(e)
            return self
        if not isinstance(element, Element):
            raise ModelError(f"System: {element!r} is not a body, joint or force.")
        if isinstance(element, Beam):  # its nodes are parts of their own, listed before it
            for node in element.nodes:
                self.add(node)
        if not isinstance(element, Ground):
            self.elements.append(element)
        return self

    def parts(self):
        """Parts with coordinates, in order of first appearance (listed or referenced)."""
        return self._parts()[0]

    def _parts(self):
        """(the parts with coordinates in order of first appearance, {name: the elements that
        reference it} of the parts not listed themselves: added, :meth:`validated` warns)."""
        seen, listed, referenced = {}, set(), {}
        for e in self.elements:
            if isinstance(e, Part):
                listed.add(e.name)
            else:
                for p in e.parts():
                    if not isinstance(p, Ground):
                        referenced.setdefault(p.name, []).append(e.name)
        for e in self.elements:
            for p in (e,) if isinstance(e, Part) else e.parts():
                if isinstance(p, Ground):
                    continue
                if p.name in seen and seen[p.name] is not p:
                    raise ModelError(f"System: two different parts are named '{p.name}'; names must be unique.")
                if p.name == "ground":  # the kinematic tree, reactions and animations would take it for the ground
                    raise ModelError(f"System: a {type(p).__name__} is named 'ground', the name of the inertial "
                                     "frame (cs.ground) that joints attach to; give it another name (e.g. 'base').")
                seen[p.name] = p
        return list(seen.values()), {name: owners for name, owners in referenced.items() if name not in listed}

    def assemble(self, redundant="drop", project_velocities=False) -> Assembly:
        """Fix the layout, build the model and check the initial state.

        redundant : "drop" (default) removes a minimal set of dependent constraint rows,
            keeping the earlier-listed ones, and reports them in ``assembly.report()``;
            "raise" refuses with a ModelError naming them.
        project_velocities : replace the parts' initial velocities by the nearest ones the
            constraints allow (:func:`~conserve.model.system.projected_velocities`: the
            M-orthogonal projection, so the least kinetic energy is removed; rotors keep their
            relative spin rates) instead of refusing velocities that violate them; by how much is
            reported (``assembly.report()``, ``assembly.layout.projection``) and warned about.

        The stages, in order: the ``validated`` elements, their layout (``make_layout``), the
        elements' terms stacked by kind (``stacked_terms``, which also names every row and entry
        in the layout), the model (``make_model``), the ``initial_state``, the initial-state and
        redundancy check that fixes the kept rows (``checked_constraints``), and the reduced
        backend's kinematic tree (``conserve.model.tree``).
        """
        if redundant not in ("drop", "raise"):
            raise ModelError(f"assemble: redundant must be 'drop' or 'raise', got {redundant!r}.")
        with recording() as parameters:  # the Parameters the laws read, found while they are checked
            parts, others = self.validated()
        layout = make_layout(parts, others, self.body_rotors)
        layout.added = dict(self.added)
        terms = [t for e in parts + others for t in e.terms(layout)]
        _link_coordinates(terms)
        links, tree_params, tree_owners = spanning_tree(parts, others, layout)
        groups, row_priority = stacked_terms(terms, layout, tree_owners)
        with recording() as read:  # the controllers' sensors and laws (conserve.control), checked
            controllers = tuple(c.sampler(layout) for c in self.controllers)
        parameters.update(read)
        # laws (and controllers) equal to an earlier model's: its compiled code
        model = shared_laws(replace(make_model(parts, layout, groups), controllers=controllers))
        state = initial_state(model, parts, layout.rotors)
        check_quadratic_invariants(others, layout, model.blocks(state.q))
        if project_velocities:
            state = projected_velocities(model, layout, state)
        keep = checked_constraints(model, layout, state, row_priority, redundant)
        model = replace(model, constraint_keep=keep)
        # kept rows by role in the reduced step: the tree's (eliminated by H2), the other quadratic
        # rows of q alone (loop-closing joints: eliminated by loop coordinates), all others
        # (ropes on hybrid winches, coordinate relations, user constraints: keep multipliers)
        role = ["tree" if layout.constraint_rows[i][0] in tree_owners else "loop" if k.of_coordinates_alone else "cut"
                for i, k in zip(keep, model.row_kinds)]
        tree = Tree({k: jax.device_put(v) for k, v in link_geometry(links, tree_params).items()}, links,
                    *(tuple(k for k, r in enumerate(role) if r == which) for which in ("tree", "loop", "cut")),
                    layout.n_blocks)
        values = {name: jax.device_put(np.float64(p.value)) for name, p in sorted(parameters.items())}
        return Assembly(replace(model, tree=tree, parameters=values), layout, state)

    def validated(self):
        """(parts, other elements) after checking that there is something to simulate, that names
        are unique and that every user law can run in the step (:mod:`.laws`); warns of parts
        added because an element references them (``self.added``, reported by ``assembly.report()``)."""
        parts, self.added = self._parts()
        if self.added:
            warnings.warn(f"System: {_added(self.added)} not listed in the System, added because "
                          f"{'it appears' if len(self.added) == 1 else 'they appear'} in other elements; list "
                          f"{'it' if len(self.added) == 1 else 'them'} in System([...]) to say so (and silence this "
                          "warning), or check for a part left out or built twice.", UserWarning, stacklevel=4)
        if not parts:
            raise ModelError("System: no bodies or point masses to simulate; add at least one RigidBody or "
                             "PointMass.")
        others = [e for e in self.elements if not isinstance(e, Part)]
        names = [p.name for p in parts] + [e.name for e in others]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ModelError(f"System: the names {dup} are used more than once; names must be unique.")
        for e in [*self.body_rotors, *others]:  # user laws, before anything is traced
            check_all(e.name, e.laws())
        return parts, others


def make_layout(parts, others, body_rotors) -> Layout:
    """The coordinate layout: each part owns consecutive 3-vector blocks, in order of appearance;
    the hybrid rotors in the order of the state's p and θ."""
    offsets, o = {}, 0
    for p in parts:
        offsets[p.name] = o
        o += p.n_blocks
    layout = Layout(parts, offsets, rotors=[e for e in others if isinstance(e, Rotor)], body_rotors=list(body_rotors))
    layout.sketch = _sketch(parts + others, body_rotors)
    layout.joints = {e.name: e.record(layout) for e in others if isinstance(e, Joint)}
    layout.beams = {e.name: e.record() for e in others if isinstance(e, Beam)}
    _record_drives(layout, others)
    return layout


def _record_drives(layout: Layout, others):
    """Note in each driven joint's record which JointDrive prescribes which of its coordinates
    (``record["drives"]`` {coordinate: drive name}, for its sensor's ``drive``); refuse a drive whose
    joint is not in the system and two drives on one coordinate (the second would be dropped as a
    redundant row, its law silently ignored)."""
    joints = [e for e in others if isinstance(e, Joint)]
    for drive in (e for e in others if isinstance(e, JointDrive)):
        joint = drive.joint
        if not any(j is joint for j in joints):
            raise ModelError(f"'{drive.name}': it drives joint '{joint.name}', which is not in the system; add the "
                             "joint to the System too (a drive prescribes a coordinate of a joint, it is no joint).")
        driven = layout.joints[joint.name].setdefault("drives", {})
        if drive.coordinate in driven:
            raise ModelError(f"joint '{joint.name}': its {drive.coordinate} is prescribed by two drives, "
                             f"'{driven[drive.coordinate]}' and '{drive.name}'; a coordinate follows one law. Remove "
                             "one of them (to combine motions, give one drive the sum of the laws).")
        driven[drive.coordinate] = drive.name
        layout.drives[drive.name] = drive


def stacked_terms(terms, layout: Layout, tree_owners):
    """The terms stacked by kind and grouped by family ({family: [(kind, params, terms)]}) and
    the priority of every constraint row (tree rows first, so that redundant rows are dropped
    from cut joints). Names, in the layout, every constraint row, joint coordinate, work and
    dissipation entry in the order the model and the step make them — defined here only."""
    priority = {id(t): (t.owner not in tree_owners, i) for i, t in enumerate(terms)}
    groups = {"constraint": [], "potential": [], "coordinate": [], "load": []}
    row_priority = []
    for kind, params, ts in stack_terms(terms):
        params = {k: jax.device_put(v) for k, v in params.items()}
        family = _family(kind)
        groups[family].append((kind, params, ts))
        if family == "constraint":
            for t in ts:
                labels = t.rows or kind.rows
                layout.constraint_rows.extend((t.owner, r) for r in labels)
                row_priority.extend((priority[id(t)], j) for j in range(len(labels)))
    layout.coordinate_names = [t.owner for _, _, ts in groups["coordinate"] for t in ts]
    layout.potential_names = [t.owner for _, _, ts in groups["potential"] for t in ts]
    layout.work_names = ([t.owner for k, _, ts in groups["coordinate"] if k.motor is not None for t in ts]
                         + [t.owner for _, _, ts in groups["load"] for t in ts]
                         + [r.name for r in layout.rotors if r.motor is not None]
                         + [t.owner for k, _, ts in groups["constraint"] if getattr(k, "rheonomic", False)
                            for t in ts])
    layout.dissipation_names = (layout.coordinate_names
                                + [t.owner for _, params, ts in groups["potential"] if "damping" in params for t in ts]
                                + [r.name for r in layout.rotors])
    return groups, row_priority


def _block_diagonal(blocks):
    """The block-diagonal matrix of square ``blocks`` (numpy, float64)."""
    n = sum(b.shape[0] for b in blocks)
    out, k = np.zeros((n, n)), 0
    for b in blocks:
        out[k:k + b.shape[0], k:k + b.shape[0]] = b
        k += b.shape[0]
    return out


def make_model(parts, layout: Layout, groups) -> Model:
    """The Model of the stacked terms: block mass matrix (hybrid rotors' mass and transverse
    inertia on their masters), frames, every kind's parameters, the rotors' data; all rows kept."""
    mu = _block_diagonal([p.mass_blocks() for p in parts])
    for r in layout.rotors:
        f = layout.frame(r.master)
        mu[np.ix_(f, f)] += r.mass_blocks()
    rotors = layout.rotors
    rotor_params = {"frame": np.array([layout.frame(r.master) for r in rotors], dtype=np.int64).reshape(-1, 4),
                    "axis": np.array([r.axis for r in rotors]).reshape(-1, 3),
                    "axial_inertia": np.array([r.axial_inertia for r in rotors]),
                    "friction": np.array([r.friction for r in rotors]),
                    "dry_friction": np.array([r.dry_friction for r in rotors]),
                    "slip_rate": np.array([r.slip_rate for r in rotors])}
    translational = np.concatenate([[1.0] + [0.0] * (p.n_blocks - 1) for p in parts])
    rigid = np.array([layout.frame(p) for p in parts if p.n_blocks == 4], dtype=np.int64).reshape(-1, 4)
    return Model(
        mu=jax.device_put(mu), translational=jax.device_put(translational), rigid_frames=jax.device_put(rigid),
        constraint_keep=tuple(range(len(layout.constraint_rows))),
        **{f"{f}_params": tuple(p for _, p, _ in g) for f, g in groups.items()},
        **{f"{f}_kinds": tuple(k for k, _, _ in g) for f, g in groups.items()},
        rotor_params={k: jax.device_put(v) for k, v in rotor_params.items()},
        rotor_laws=tuple(r.motor for r in rotors), tree=None,
    )


def initial_state(model: Model, parts, rotors) -> State:
    """The State at t0 from the parts' and rotors' initial data (not yet checked)."""
    q0 = np.concatenate([p.initial_blocks().ravel() for p in parts])
    v0 = np.concatenate([p.initial_rates().ravel() for p in parts])
    p0 = np.array([r.axial_momentum for r in rotors], dtype=np.float64)
    return State(*jax.device_put((q0, v0)), coordinate_values(model, q0), *jax.device_put((p0, np.zeros(len(rotors)))),
                 jax.device_put(np.zeros_like(q0)))


@jit_quick(mode="unoptimized")
def coordinate_values(model: Model, q):
    """The tracked joint coordinates s (n_s,) at q (:meth:`Model.coordinate_values`), compiled."""
    return model.coordinate_values(q)


def _sketch(elements, body_rotors):
    """Layout.sketch: the geometry of joints, ropes, springs and rotors, as plain data."""
    name = lambda part: "ground" if isinstance(part, Ground) else part.name  # noqa: E731
    drawn = [(e.name, e.sketch()) for e in elements]
    sketches = [(owner, s) for owner, lines in drawn if lines is not None
                for s in (lines if isinstance(lines, list) else [lines])]
    links = [(owner, kind, name(a), np.asarray(at_a, float).tolist(), name(b), np.asarray(at_b, float).tolist())
             for owner, (kind, a, at_a, b, at_b) in sketches]
    rotors = {}
    for r in [e for e in elements if isinstance(e, Rotor)] + list(body_rotors):
        radius = float(np.sqrt(2.0 * r.axial_inertia / r.mass)) if r.mass > 0 else 0.0
        rotors[r.name] = (r.master.name, r.axis.tolist(), r.offset.tolist(), radius)
    shapes = {e.name: e.shapes for e in elements if getattr(e, "shapes", None)}
    inertia = {e.name: [float(e.mass), np.asarray(e.inertia, float).tolist()] for e in elements
               if isinstance(e, RigidBody)}
    return {"links": links, "rotors": rotors, "inertia": inertia, **({"shapes": shapes} if shapes else {})}


def _family(kind):
    """The family of a kind (:mod:`.elements`): where assembly groups its terms."""
    for family, types in (("constraint", ConstraintKind), ("coordinate", CoordinateElement), ("load", LoadKind),
                          ("potential", PotentialKind)):
        if isinstance(kind, types):
            return family
    raise ModelError(f"a term's kind {kind!r} belongs to no family (ConstraintKind, PotentialKind, LoadKind, "
                     "CoordinateElement): see conserve.model.elements.")


def _link_coordinates(terms):
    """Fill ``params["coordinates"]`` of terms that read joint coordinates (coordinate relations)
    with the indices in s of the coordinate terms they link, in the order Model makes s."""
    coordinate_terms = [t for t in terms if isinstance(t.kind, CoordinateElement)]
    index = {id(t): i for i, t in enumerate(t for _, _, ts in stack_terms(coordinate_terms) for t in ts)}
    for t in terms:
        if t.links:
            t.params["coordinates"] = np.array([index[id(link)] for link in t.links], dtype=np.int64)


def _rows_by_owner(layout, values):
    out = {}
    for (owner, row), val in zip(layout.constraint_rows, values):
        out.setdefault(owner, []).append((row, val))
    return out


def independent_rows(G, order, tol=RANK_TOL):
    """Rows of G taken in ``order`` that are independent of the ones taken before them: a row is
    kept when what is left of it after projecting out the kept rows' orthonormal basis (classical
    Gram–Schmidt, twice: as accurate as the modified one, Giraud et al. 2005, and one matrix
    product per pass) is larger than ``tol`` times its norm. Returns the kept row indices, sorted."""
    G = np.asarray(G, dtype=float)
    basis, k, keep = np.zeros((min(G.shape), G.shape[1])), 0, []
    for i in order:
        r = G[i].copy()
        norm0 = np.linalg.norm(r)
        for _ in range(2):
            r -= basis[:k].T @ (basis[:k] @ r)
        if norm0 > 0 and np.linalg.norm(r) > tol * norm0:
            keep.append(i)
            basis[k] = r / np.linalg.norm(r)
            k += 1
    return sorted(keep)


@jit_quick(mode="unoptimized")
def initial_gaps(model: Model, state: State, theta_rate, t=0.0):
    """(g, its tolerance, ġ = G v' + ∂g/∂t, its tolerance, G = ∂g/∂(q, θ)) of every constraint row
    at a state at time t (s), v' = (v, θ'), θ' the rotors' spin rates relative to their masters:
    the checks of :func:`checked_constraints` (pure jax, compiled once per model structure rather
    than run op by op; :func:`conserve.simulate_batch` vmaps it over members). ∂g/∂t is the rate
    of prescribed motions (:mod:`conserve.model.drives`)."""
    t = jnp.asarray(t, state.q.dtype)
    G = jnp.hstack(jax.jacfwd(model.initial_constraints, argnums=(0, 1))(state.q, state.theta, t))
    g, g_t = jax.jvp(lambda time: model.initial_constraints(state.q, state.theta, time), (t,), (jnp.ones_like(t),))
    s0 = model.coordinate_values(state.q)
    tol = POSITION_TOL + ROUNDOFF * model.all_constraints(state.q, state.theta, s0, "magnitude", t)
    velocities = jnp.concatenate([state.v, theta_rate])
    return (g, tol, G @ velocities + g_t, VELOCITY_TOL * (1.0 + jnp.abs(G) @ jnp.abs(velocities) + jnp.abs(g_t)),
            G)


def projected_velocities(model: Model, layout: Layout, state: State) -> State:
    """The state with its velocities v replaced by the nearest ones that satisfy the constraints,
    in the kinetic-energy norm: v' = v − M⁻¹Gᵀ(G M⁻¹Gᵀ)⁺(G v + G_θ θ') with G = ∂g/∂q at q0 (all
    rows, so redundant ones do no harm) and the rotors' spin rates θ' relative to their masters
    kept (their axial momenta follow their masters' new rates). Velocities within the tolerance of
    the assembly check are kept as they are; otherwise records and warns what changed: each
    part's largest change of centre velocity and angular velocity, and the kinetic energy removed."""
    spin_rates = jnp.asarray([r.spin_rate for r in layout.rotors])
    if not layout.constraint_rows:
        return state
    _, _, rates, vtol, G = (np.asarray(a) for a in initial_gaps(model, state, spin_rates))
    if np.all(np.abs(rates) <= vtol):
        return state
    n_q = model.n_coordinates
    Gq, Gt = G[:, :n_q], G[:, n_q:]
    M = np.kron(np.asarray(model.mu), np.eye(3))
    MinvGt = np.linalg.solve(M, Gq.T)
    v = np.asarray(state.v)
    gap = Gq @ v + Gt @ np.asarray(spin_rates)
    v1 = v - MinvGt @ (np.linalg.pinv(Gq @ MinvGt, rcond=1e-12) @ gap)
    p1 = model.rotor_momenta(state.q, v1, spin_rates)
    change, Q = (v1 - v).reshape(-1, 3), np.asarray(state.q).reshape(-1, 3)
    changes = []
    for part in layout.parts:
        o = layout.offsets[part.name]
        dw = 0.5 * np.sum(np.cross(Q[o + 1:o + 4], change[o + 1:o + 4]), axis=0) if part.n_blocks == 4 else np.zeros(3)
        changes.append((np.linalg.norm(change[o]), np.linalg.norm(dw), part.name))
    T = 0.5 * v @ M @ v
    removed = T - 0.5 * v1 @ M @ v1
    moved = ", ".join(f"'{name}' by {dv:.3g} m/s and {dw:.3g} rad/s" for dv, dw, name in changes if dv or dw)
    layout.projection = (f"initial velocities projected onto the constraints: {moved}; kinetic energy of the parts "
                         f"{removed:.4g} J lower ({removed / T if T else 0.0:.3g} of it)")
    warnings.warn(f"assemble: {layout.projection}.", stacklevel=3)
    return state._replace(v=jnp.asarray(v1), p=jnp.asarray(p1))


def refuse_gaps(layout: Layout, g, tol, rates, vtol, t0=0.0, drives=True):
    """Raise InconsistentInitialState naming the first element whose constraint rows the initial
    positions (|g| > tol) or velocities (|ġ| > vtol) violate, at time t0 (s), with how to fix it;
    ``drives=False``: not the prescribed motions' rows (checked at the run's t0 by :func:`check_drives_at`)."""
    def checked(pairs):  # {owner: rows} to check, without the drives' when they are checked elsewhere
        return {owner: rows for owner, rows in _rows_by_owner(layout, pairs).items() if drives or not _drive(rows)}

    for owner, rows in checked(zip(np.abs(g), tol)).items():
        if not all(gap <= limit for _, (gap, limit) in rows):  # also catches NaN
            worst = max(gap for _, (gap, _) in rows)
            detail = ", ".join(f"{r}: {gap:.3g}" for r, (gap, limit) in rows if not gap <= limit)
            if _drive(rows):
                raise InconsistentInitialState(
                    f"'{owner}': at t0 = {t0:g} s its joint's coordinate differs from the drive law's value by "
                    f"{worst:.3g}; pose the joint at law(t0): cs.set_joints(system, t0={t0:g}) poses every driven "
                    "joint at its law's value and rate there; or shift the law.")
            raise InconsistentInitialState(
                f"'{owner}': the initial positions violate its constraint by {worst:.3g} ({detail}); "
                "place the parts so that the joint is closed (e.g. give the joint as at= a world point, "
                "from which both body points are computed).")
    for owner, rows in checked(zip(rates, vtol)).items():
        if not all(abs(rate) <= limit for _, (rate, limit) in rows):
            vals = np.array([rate for _, (rate, _) in rows])
            if _drive(rows):
                raise InconsistentInitialState(
                    f"'{owner}': at t0 = {t0:g} s its joint's rate differs from the drive law's rate by {vals[0]:.6g} "
                    f"(ṡ − law'(t0)); give the parts the velocities the law asks for: cs.set_joints(system, "
                    f"t0={t0:g}) poses every driven joint at its law's value and rate there.")
            raise InconsistentInitialState(
                f"'{owner}': the initial velocities violate its constraint: d/dt of "
                f"({', '.join(r for r, _ in rows)}) = {np.array2string(vals, precision=6)}; give velocities "
                "the joint allows, e.g. for a body pinned at point r0 with angular velocity ω the centre of "
                "mass needs velocity ω × (x_c − r0).")


def _drive(rows):
    """Whether an owner's rows ((row name, values) pairs) are a prescribed motion's single row."""
    return [r for r, _ in rows] == ["drive"]


def check_drives_at(assembly: Assembly, t0):
    """A run of a model with prescribed motions (which assembly, not knowing the run's start, does
    not check): its initial state against every constraint at t0 (s), or InconsistentInitialState."""
    model, state = assembly.model, assembly.initial_state
    if not model.time_dependent or not assembly.layout.constraint_rows:
        return
    spin = model.rotor_relative_rates(state.q, state.v, state.p)
    g, tol, rates, vtol, _ = (np.asarray(a) for a in initial_gaps(model, state, spin, t0))
    refuse_gaps(assembly.layout, g, tol, rates, vtol, t0)


def checked_constraints(model: Model, layout: Layout, state: State, row_priority, redundant):
    """Raise on initial positions/velocities off the constraints; return the rows to keep (a tuple
    of indices into ``layout.constraint_rows``; the redundant ones dropped, or refused when
    ``redundant="raise"``) and set the layout's rank and degrees of freedom. Positions are (q, θ)
    and velocities (v, θ') with θ' the rotors' initial spin rates."""
    spin_rates = np.array([r.spin_rate for r in layout.rotors])
    n_q = model.n_coordinates + model.n_rotors
    if not layout.constraint_rows:
        layout.rank, layout.degrees_of_freedom = 0, n_q
        return ()
    g, tol, rates, vtol, G = (np.asarray(a) for a in initial_gaps(model, state, jnp.asarray(spin_rates)))
    refuse_gaps(layout, g, tol, rates, vtol, drives=False)  # drives: at the run's t0 (check_drives_at)
    void = np.flatnonzero(np.all(G == 0.0, axis=1))
    if void.size:  # equations that constrain nothing: not redundant but a modelling error
        which = ", ".join(f"'{layout.constraint_rows[i][0]}' ({layout.constraint_rows[i][1]})" for i in void)
        raise ModelError(
            f"{which}: {'these equations constrain' if void.size > 1 else 'this equation constrains'} nothing at the "
            "initial configuration (the gradient is zero): a joint fixing the orientation of a point mass, which has "
            "none (its axes are the inertial ones: the joint acts like a Spherical one), or a kinematic singularity "
            "(a Distance of length zero). Use a RigidBody for a part whose orientation the joint must fix, or "
            "another joint.")
    order = sorted(range(len(row_priority)), key=lambda i: row_priority[i])
    keep = independent_rows(G, order)
    layout.rank = len(keep)
    layout.degrees_of_freedom = n_q - len(keep)
    dropped = sorted(set(range(G.shape[0])) - set(keep))
    if dropped:
        which = ", ".join(f"{layout.constraint_rows[i][0]} ({layout.constraint_rows[i][1]})" for i in dropped)
        if redundant == "raise":
            raise ModelError(
                f"redundant constraints: {len(dropped)} of {G.shape[0]} constraint equations are dependent on "
                f"the others: {which}. Remove or replace joints so that each freedom is constrained once, or "
                "assemble with redundant='drop'.")
        layout.dropped_rows = dropped
    return tuple(int(i) for i in keep)
