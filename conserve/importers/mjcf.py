"""MJCF and URDF models as conserve Systems, read by MuJoCo's own parser (``mujoco.MjSpec``).

    system = cs.from_mjcf("arm.xml")                   # a path, an XML string, an MjSpec or an MjModel
    system = cs.from_urdf("robot.urdf")
    sol = cs.simulate(system, t_end=1.0, dt=1e-3)
    qpos = system.imported.qpos(sol)                   # (N+1, nq) MuJoCo's joint coordinates

MuJoCo compiles the file (defaults, inertias from geoms, frames), then the compiled model is
mapped at the configuration ``qpos`` (default the model's ``qpos0``) with velocities ``qvel``
(default 0):

- **bodies:** every MuJoCo body with joints heads a :class:`~conserve.RigidBody` of the same
  name; bodies without joints are welded to their parent in MuJoCo and are merged into the body
  they are welded to here (mass, centre of mass and inertia tensor summed; the body's axes are
  the principal axes of the sum), bodies welded to the world into the ground.
- **joints:** the joints of one body, by kind and number: ``free`` → none (a free body),
  ``ball`` → :class:`~conserve.Spherical`, ``hinge`` → :class:`~conserve.Revolute`, ``slide``
  → :class:`~conserve.Prismatic`, a slide and a hinge on one axis → :class:`~conserve.Cylindrical`,
  two perpendicular hinges through one point → :class:`~conserve.Universal`, three hinges
  through one point → :class:`~conserve.Spherical`, two or three perpendicular slides →
  :class:`~conserve.Translational`, two perpendicular slides and a hinge normal to both →
  :class:`~conserve.Planar`; other combinations raise a ModelError naming the body.
  The joint keeps MuJoCo's name (a combination: the names joined by "+"; " joint" appended
  where a body has the same name, as MuJoCo allows). Its angle or slide is 0
  at the mapped configuration, so MuJoCo's q = q(0) + the joint's angle or slide.
- **passive forces:** a hinge's or slide's ``stiffness`` (about ``springref``), ``damping`` and
  ``frictionloss`` → :class:`~conserve.JointSpringDamper` (the friction regularised below the
  slip rate: :func:`~conserve.model.coordinates.dry_friction`).
- **equality constraints:** ``connect`` → Spherical, ``weld`` → :class:`~conserve.Fixed` (holding
  the relative pose of the mapped configuration) between the bodies' conserve bodies: closed loops.
- **actuators** on a hinge or slide (``motor``, ``position``, ``velocity``, ``general`` with
  fixed or affine gain and bias, no activation dynamics) → one :class:`~conserve.Controller`
  named ``"actuators"`` (``rate=None``: evaluated at each step's midpoint) whose law is MuJoCo's
  force  gear · clamp(gain · clamp(u) + bias)  with gain = g₀ + g₁ l + g₂ l̇ and bias
  = b₀ + b₁ l + b₂ l̇ (l = gear q), the controls ``u = control(t, q, qdot)`` (a jax function of the
  actuated joints' q and q̇ in actuator order, returning (nu,); default zeros). Without
  ``control`` and without bias (plain motors) the actuators exert no force and no controller is
  made (it would cost each Newton iteration for nothing).
- **gravity:** ``option/gravity`` → :class:`~conserve.Gravity` (unless disabled).
- **geoms** (sphere, capsule, ellipsoid, cylinder, box, mesh) → the bodies' visual shapes
  (:func:`~conserve.model.bodies.shape`), drawn by ``sol.to_html``.

MuJoCo's option flags that disable contacts, limits, springs, dampers, friction loss, equality
constraints, actuation or gravity are honoured. What has no counterpart — contacts, joint limits,
armature, tendons, fluid forces, gravity compensation, other actuators, sensors, … — is listed in
one :class:`~conserve.errors.ModelImportWarning` (and in ``system.imported.unmapped``), never
dropped silently. For a like-for-like comparison run MuJoCo's model through :func:`like_conserve`
(contacts and limits disabled, armature 0).

MuJoCo is an optional dependency: ``pip install -e ".[import]"``.
"""

from __future__ import annotations

import copy
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..control.controller import Controller, motor
from ..control import sensors
from ..errors import ModelError, ModelImportWarning
from ..kinematics.rotations import quaternion_to_rotation, rotation_to_quaternion
from ..model.bodies import RigidBody, ground, shape
from ..model.forces import Gravity, JointSpringDamper
from ..model.joints import Cylindrical, Fixed, Planar, Prismatic, Revolute, Spherical, Translational, Universal
from ..model.system import System

#: MuJoCo's joint kinds (mjtJoint) and geom kinds (mjtGeom) by number
FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3
_KINDS = {FREE: "free", BALL: "ball", SLIDE: "slide", HINGE: "hinge"}
_GEOMS = {2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box", 7: "mesh"}
#: how close (m, or cosine) two anchors or axes must be to count as one point or perpendicular
_TOL = 1e-9


def _mujoco():
    try:
        import mujoco
    except ImportError as err:
        raise ModelError("importing MJCF or URDF needs MuJoCo's parser: pip install -e \".[import]\" "
                         "(or pip install mujoco).") from err
    return mujoco


@dataclass
class JointMap:
    """Where MuJoCo joint ``id`` went: ``kind`` (free, ball, hinge, slide), its ``body`` (MuJoCo's
    name), the conserve ``joint`` (None for a free joint), its ``coordinate`` ("angle", "slide" or
    None for a joint of a combination), MuJoCo's ``q0`` at the mapped configuration (hinge, slide:
    a float; ball, free: None) and its first entry ``qposadr`` in MuJoCo's qpos."""

    id: int
    kind: str
    body: str
    joint: str | None
    coordinate: str | None
    q0: float | None
    qposadr: int


@dataclass
class Imported:
    """What :func:`~conserve.from_mjcf` made of a MuJoCo model (``system.imported``).

    Attributes
    ----------
    model : the compiled ``mujoco.MjModel``
    bodies : {MuJoCo body: the conserve body it is part of ("ground" for the world's)}
    joints : {MuJoCo joint: :class:`JointMap`}
    unmapped : the items with no conserve counterpart (also warned about)
    frames : {MuJoCo body id: (conserve body or "ground", F (3,) m, R (3, 3))}: the conserve body it
        is part of and the body frame's origin and axes in that body's axes (about its centre of
        mass), or in world axes for the ground
    """

    model: object
    bodies: dict
    joints: dict
    unmapped: list = field(default_factory=list)
    frames: dict = field(default_factory=dict)

    def qpos(self, sol) -> np.ndarray:
        """MuJoCo's generalized coordinates (N+1, nq) at the nodes of ``sol``: hinges and slides
        q(0) + the joint's angle or slide, free joints the body frame's origin and quaternion (w,
        x, y, z), balls the quaternion of the body frame relative to its parent's; the joints of
        the other combinations (universal, three hinges, translational, planar) from the relative
        pose of the body and its parent."""
        m = self.model
        out = np.full((len(sol.t), m.nq), np.nan)
        pose = {}

        def frame(body_id):
            if body_id not in pose:
                owner, F, R = self.frames[body_id]
                if owner == "ground":
                    pose[body_id] = (np.broadcast_to(F, (len(sol.t), 3)), np.broadcast_to(R, (len(sol.t), 3, 3)))
                else:
                    view = sol[owner]
                    pose[body_id] = (view.position + view.rotation @ F, view.rotation @ R)
            return pose[body_id]

        by_body = {}
        for jm in self.joints.values():
            by_body.setdefault(int(m.jnt_bodyid[jm.id]), []).append(jm)
        for b, joints in by_body.items():
            x, R = frame(b)
            if joints[0].kind == "free":
                a = joints[0].qposadr
                out[:, a:a + 3], out[:, a + 3:a + 7] = x, rotation_to_quaternion(R)
                continue
            xp, Rp = frame(int(m.body_parentid[b]))
            Q = quaternion_to_rotation(m.body_quat[b])
            rel = Rp @ Q  # the body's frame at qpos0, the pose the model defines
            R_rel = np.einsum("nji,njk->nik", rel, R)  # its turn since: (Rp Q)ᵀ R
            for jm in joints:
                a = jm.qposadr
                if jm.kind == "ball":
                    out[:, a:a + 4] = rotation_to_quaternion(R_rel)
                elif jm.coordinate is not None:
                    view = sol.joint(jm.joint)
                    s = view.angle if jm.coordinate == "angle" else view.slide
                    out[:, a] = jm.q0 + (np.unwrap(s) if jm.coordinate == "angle" else s)
            combo = [jm for jm in joints if jm.kind in ("hinge", "slide") and jm.coordinate is None]
            if combo:
                _combination(m, b, combo, R_rel, x - xp, Rp, out)
        return out


def _combination(m, b, combo, R_rel, dx, Rp, out):
    """MuJoCo's q of a body's combination of joints (universal, three hinges, translational,
    planar): its reference ``qpos0`` (the joints' ``ref``, at which the body has the pose the model
    defines) plus the turn and slide from there, read off the frame's rotation ``R_rel`` (N, 3, 3)
    relative to the parent's frame at that pose and the body origin's displacement ``dx`` (N, 3)
    from the parent's origin (world axes; ``Rp`` (N, 3, 3))."""
    from scipy.spatial.transform import Rotation

    hinges = [jm for jm in combo if jm.kind == "hinge"]
    axes = np.array([m.jnt_axis[jm.id] for jm in hinges]).reshape(-1, 3)
    if len(hinges) >= 2:  # R_rel = R(a1, q1) R(a2, q2) [R(a3, q3)]: Davenport angles about the body-local axes
        if len(hinges) == 2:
            axes = np.vstack([axes, np.cross(axes[0], axes[1])])
        angles = Rotation.from_matrix(R_rel).as_davenport(axes, "intrinsic")
        for k, jm in enumerate(hinges):
            out[:, jm.qposadr] = m.qpos0[jm.qposadr] + np.unwrap(angles[:, k])
        return
    # slides, and a hinge normal to them (planar): the body origin moved by the slides along their
    # axes (and by the hinge's turn about its anchor p, (I − R) p), all in the body's axes at q = 0
    moved = np.einsum("nji,nj->ni", Rp, dx) - m.body_pos[b]
    moved = moved @ quaternion_to_rotation(m.body_quat[b])
    for jm in hinges:
        out[:, jm.qposadr] = m.qpos0[jm.qposadr] + np.unwrap(Rotation.from_matrix(R_rel).as_rotvec() @ axes[0])
        p = m.jnt_pos[jm.id]
        moved -= p - R_rel @ p
    for jm in combo:
        if jm.kind == "slide":
            out[:, jm.qposadr] = m.qpos0[jm.qposadr] + moved @ m.jnt_axis[jm.id]


def _name(m, kind, i, prefix=None):
    import mujoco

    name = mujoco.mj_id2name(m, kind, i)
    if name:
        return name
    return "world" if kind == mujoco.mjtObj.mjOBJ_BODY and i == 0 else f"{prefix or 'body'}{i}"


def compiled(source, assets=None):
    """The ``mujoco.MjModel`` of ``source``: a path to an MJCF or URDF file, an XML string, a
    ``mujoco.MjSpec`` (compiled here) or an ``MjModel``; ``assets`` {file name: bytes} for an
    XML string's meshes. MuJoCo's own errors come back as a ModelError saying which file."""
    mujoco = _mujoco()
    if isinstance(source, mujoco.MjModel):
        return source
    where = "the MjSpec"
    try:
        if isinstance(source, mujoco.MjSpec):
            spec = source
        elif isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("<"):
            where = os.fspath(source)
            if not os.path.isfile(where):
                raise ModelError(f"from_mjcf: no file {where!r} (give a path to an .xml or .urdf file, an XML string, "
                                 "a mujoco.MjSpec or a mujoco.MjModel).")
            spec = mujoco.MjSpec.from_file(where)
        elif isinstance(source, str):
            where = "the XML string"
            spec = mujoco.MjSpec.from_string(source, assets=assets) if assets else mujoco.MjSpec.from_string(source)
        else:
            raise ModelError(f"from_mjcf: expected a path, an XML string, a mujoco.MjSpec or a mujoco.MjModel, "
                             f"got {type(source).__name__}.")
        return spec.compile()
    except (ValueError, RuntimeError, mujoco.FatalError) as err:
        if isinstance(err, ModelError):
            raise
        raise ModelError(f"MuJoCo could not read {where}: {err}") from err


def like_conserve(source, assets=None):
    """A compiled ``mujoco.MjModel`` of ``source`` (as :func:`compiled`) with what conserve does not
    model switched off — contacts and joint limits (option flags), armature (set to 0) — the MuJoCo
    model to compare a conserve run of :func:`~conserve.from_mjcf` with (tendons, fluid forces and other
    unmapped items are left as they are: :func:`~conserve.from_mjcf` warns of them)."""
    mujoco = _mujoco()
    m = compiled(source, assets)
    if isinstance(source, mujoco.MjModel):
        m = copy.copy(source)  # the caller's model stays as it is
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(mujoco.mjtDisableBit.mjDSBL_LIMIT)
    m.dof_armature[:] = 0.0
    return m


def from_mjcf(source, *, qpos=None, qvel=None, control=None, assets=None) -> System:
    """A :class:`~conserve.System` from an MJCF model (see the module docstring for the mapping).

    Parameters
    ----------
    source : path of an .xml (or .urdf) file, an XML string, a ``mujoco.MjSpec`` or ``mujoco.MjModel``
    qpos : (nq,) MuJoCo's generalized coordinates of the initial configuration (default ``qpos0``;
        a keyframe: ``model.key_qpos[k]``)
    qvel : (nv,) initial generalized velocities (default 0)
    control : ``control(t, q, qdot) -> (nu,)`` MuJoCo's controls of all actuators (jax-traceable;
        q, qdot (k,) of the joints of the k mapped actuators, in actuator order and MuJoCo's
        coordinates, at the step's midpoint; a hinge's q is q(0) plus its angle in (−π, π]);
        default all zero
    assets : {file name: bytes} of the meshes an XML string refers to

    Returns
    -------
    System with ``system.imported``, an :class:`Imported` (the MjModel, where each MuJoCo body and
    joint went, what was not mapped, and ``qpos(sol)``)
    """
    mujoco = _mujoco()
    m = compiled(source, assets)
    d = mujoco.MjData(m)
    for what, value, n in (("qpos", qpos, m.nq), ("qvel", qvel, m.nv)):
        if value is not None:
            value = np.asarray(value, float)
            if value.shape != (n,) or not np.all(np.isfinite(value)):
                raise ModelError(f"from_mjcf: {what} must be {n} finite numbers (the model's n{what[1]}), "
                                 f"got shape {value.shape}.")
            getattr(d, what)[:] = value
    if qpos is None:
        d.qpos[:] = m.qpos0
    mujoco.mj_forward(m, d)
    return _Mapper(m, d, control).system()


def from_urdf(path, *, qpos=None, qvel=None, control=None) -> System:
    """A :class:`~conserve.System` from a URDF file, read by MuJoCo's URDF parser (the root link is
    fixed to the world, as MuJoCo reads URDF; meshes are looked up beside the file). Arguments and
    mapping as :func:`~conserve.from_mjcf`."""
    if not os.path.isfile(os.fspath(path)):
        raise ModelError(f"from_urdf: no file {os.fspath(path)!r}.")
    return from_mjcf(path, qpos=qpos, qvel=qvel, control=control)


class _Mapper:
    """One pass over a compiled MuJoCo model at the configuration of ``d`` (after mj_forward)."""

    def __init__(self, m, d, control):
        self.m, self.d, self.control = m, d, control
        self.mj = mujoco = _mujoco()
        self.unmapped, self.elements = [], []
        self.body_name = [_name(m, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(m.nbody)]
        self.joint_name = [_name(m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint") for j in range(m.njnt)]

    def system(self) -> System:
        self._bodies()
        self._joints()
        self._equalities()
        self._actuators()
        self._gravity()
        self._unmapped()
        system = System(self.elements)
        system.imported = Imported(self.m, {self.body_name[b]: self._owner_name(b) for b in range(self.m.nbody)},
                                   self.joint_maps, self.unmapped, self.frames)
        if self.unmapped:
            warnings.warn("from_mjcf: not mapped (conserve has no counterpart; the run goes without them):\n  - "
                          + "\n  - ".join(self.unmapped), ModelImportWarning, stacklevel=3)
        return system

    # --- bodies -------------------------------------------------------------------------
    def _owner(self, b):
        """The head of the weld group of MuJoCo body ``b`` (0: the world)."""
        return int(self.m.body_weldid[b])

    def _owner_name(self, b):
        h = self._owner(b)
        return "ground" if h == 0 else self.body_name[h]

    def _bodies(self):
        m, d = self.m, self.d
        groups = {}
        for b in range(1, m.nbody):
            groups.setdefault(self._owner(b), []).append(b)
        self.parts, self.frames = {0: ground}, {0: ("ground", np.zeros(3), np.eye(3))}
        for b in groups.get(0, []):  # welded to the world: frames in world axes
            self.frames[b] = ("ground", d.xpos[b].copy(), d.xmat[b].reshape(3, 3).copy())
        if any(m.body_mocapid[b] >= 0 for b in groups.get(0, [])):
            self.unmapped.append("mocap bodies (held fixed at their initial pose, part of the ground)")
        for head, members in groups.items():
            if head == 0:
                continue
            name = self.body_name[head]
            mass = float(sum(m.body_mass[b] for b in members))
            com = sum(m.body_mass[b] * d.xipos[b] for b in members) / mass
            J = np.zeros((3, 3))
            for b in members:
                Ri, r = d.ximat[b].reshape(3, 3), d.xipos[b] - com
                J += Ri @ np.diag(m.body_inertia[b]) @ Ri.T + m.body_mass[b] * (r @ r * np.eye(3) - np.outer(r, r))
            if len(members) == 1:
                R, inertia = d.ximat[head].reshape(3, 3).copy(), m.body_inertia[head].copy()
            else:
                inertia, R = np.linalg.eigh(0.5 * (J + J.T))
                R[:, 2] *= np.sign(np.linalg.det(R))
            velocity = np.zeros(6)
            self.mj.mj_objectVelocity(m, d, self.mj.mjtObj.mjOBJ_BODY, head, velocity, 0)  # [ω, v] at head's xipos
            omega = velocity[:3]
            v = velocity[3:] + np.cross(omega, com - d.xipos[head])
            for b in members:
                self.frames[b] = (name, R.T @ (d.xpos[b] - com), R.T @ d.xmat[b].reshape(3, 3))
            shapes = [self._shape(g, com, R) for b in members for g in range(m.body_geomadr[b],
                                                                              m.body_geomadr[b] + m.body_geomnum[b])]
            self.parts[head] = RigidBody(name, mass, inertia, position=com, orientation=R, velocity=v,
                                         angular_velocity=omega, shapes=[s for s in shapes if s])
            self.elements.append(self.parts[head])
            if any(m.body_gravcomp[b] for b in members):
                self.unmapped.append(f"body '{name}': gravity compensation (gravcomp)")

    def _shape(self, g, com, R):
        m, d = self.m, self.d
        kind = _GEOMS.get(int(m.geom_type[g]))
        if kind is None:
            return None
        pos, rot = R.T @ (d.geom_xpos[g] - com), R.T @ d.geom_xmat[g].reshape(3, 3)
        size = m.geom_size[g][:{"sphere": 1, "capsule": 2, "cylinder": 2}.get(kind, 3)]
        if kind != "mesh":
            return shape(kind, size, pos, rot, m.geom_rgba[g])
        k = int(m.geom_dataid[g])
        v0, nv, f0, nf = m.mesh_vertadr[k], m.mesh_vertnum[k], m.mesh_faceadr[k], m.mesh_facenum[k]
        return shape("mesh", (), pos, rot, m.geom_rgba[g], m.mesh_vert[v0:v0 + nv], m.mesh_face[f0:f0 + nf])

    # --- joints -------------------------------------------------------------------------
    def _joints(self):
        m, d = self.m, self.d
        self.joint_maps = {}
        self.coordinate_of = {}  # MuJoCo joint id -> (conserve joint, coordinate)
        for b in range(1, m.nbody):
            n = int(m.body_jntnum[b])
            if n == 0:
                continue
            ids = list(range(m.body_jntadr[b], m.body_jntadr[b] + n))
            types = [int(m.jnt_type[j]) for j in ids]
            names = [self.joint_name[j] for j in ids]
            body, parent = self.parts[b], self.parts[self._owner(int(m.body_parentid[b]))]
            at, axes = d.xanchor[ids[0]].copy(), [d.xaxis[j].copy() for j in ids]
            anchored = all(np.allclose(d.xanchor[j], at, atol=_TOL * (1 + np.abs(at).max())) for j in ids)
            name = self._unique("+".join(names), "joint")
            joint, coordinates = self._combination(b, types, names, body, parent, at, axes, anchored, name)
            for j, t in zip(ids, types):
                coordinate = coordinates.get(j)
                q0 = float(d.qpos[m.jnt_qposadr[j]]) if t in (SLIDE, HINGE) else None
                self.joint_maps[self.joint_name[j]] = JointMap(j, _KINDS[t], self.body_name[b],
                                                               None if joint is None else joint.name, coordinate, q0,
                                                               int(m.jnt_qposadr[j]))
                if coordinate is not None:
                    self.coordinate_of[j] = (joint, coordinate)
                self._passive(j, t, joint, coordinate, q0)
            if joint is not None:
                self.elements.append(joint)

    def _combination(self, b, types, names, body, parent, at, axes, anchored, name):
        """(conserve joint or None, {MuJoCo joint id: the conserve joint's coordinate it is}) of the
        joints of body b."""
        m = self.m
        ids = list(range(m.body_jntadr[b], m.body_jntadr[b] + len(types)))
        hinges = [k for k, t in enumerate(types) if t == HINGE]
        slides = [k for k, t in enumerate(types) if t == SLIDE]
        if types == [FREE]:
            return None, {}
        if types == [BALL]:
            return Spherical(parent, body, at=at, name=name), {}
        if types == [HINGE]:
            return Revolute(parent, body, at=at, axis=axes[0], name=name), {ids[0]: "angle"}
        if types == [SLIDE]:
            return Prismatic(parent, body, at=at, axis=axes[0], name=name), {ids[0]: "slide"}
        if len(types) == 2 and len(hinges) == 1 and len(slides) == 1 and abs(axes[0] @ axes[1]) > 1 - _TOL:
            h, s = ids[hinges[0]], ids[slides[0]]
            return (Cylindrical(parent, body, at=self.d.xanchor[h], axis=axes[hinges[0]], name=name),
                    {h: "angle", s: "slide"})
        if anchored and len(hinges) == 2 == len(types) and abs(axes[0] @ axes[1]) < _TOL:
            return Universal(parent, body, at=at, axes=(axes[0], axes[1]), name=name), {}
        if anchored and len(hinges) == 3 == len(types) and abs(np.linalg.det(np.array(axes))) > 1e-6:
            return Spherical(parent, body, at=at, name=name), {}
        if slides == list(range(len(types))) and len(types) in (2, 3) and \
                max(abs(axes[i] @ axes[k]) for i in range(len(axes)) for k in range(i)) < _TOL:
            return Translational(parent, body, at=at, axes=axes if len(axes) == 2 else None, name=name), {}
        if len(types) == 3 and len(hinges) == 1 and len(slides) == 2:
            n, u, w = axes[hinges[0]], axes[slides[0]], axes[slides[1]]
            if max(abs(n @ u), abs(n @ w), abs(u @ w)) < _TOL:
                return Planar(parent, body, at=self.d.xanchor[ids[hinges[0]]], normal=n, name=name), {}
        kinds = ", ".join(f"{nm} ({_KINDS[t]})" for nm, t in zip(names, types))
        raise ModelError(f"from_mjcf: body '{self.body_name[b]}' has the joints {kinds}, a combination with no "
                         "conserve joint (mapped: free; ball; hinge; slide; hinge + slide on one axis; two "
                         "perpendicular hinges or three hinges through one point; two or three perpendicular slides; "
                         "two perpendicular slides + a hinge normal to them). Split the joints over bodies with mass, "
                         "or edit the model (mujoco.MjSpec) before importing.")

    def _passive(self, j, t, joint, coordinate, q0):
        """The spring, damper and dry friction of MuJoCo joint j (a ModelImportWarning line where
        they have no conserve coordinate), and its unmapped properties."""
        m, name, off = self.m, self.joint_name[j], self._disabled
        dof = int(m.jnt_dofadr[j])
        k = 0.0 if off("SPRING") else float(m.jnt_stiffness[j])
        c = 0.0 if off("DAMPER") else float(m.dof_damping[dof])
        friction = 0.0 if off("FRICTIONLOSS") or off("CONSTRAINT") else float(m.dof_frictionloss[dof])
        if t in (SLIDE, HINGE) and (k or c or friction):
            if coordinate is None:
                self.unmapped.append(f"joint '{name}': stiffness/damping/frictionloss (its body's joints map to "
                                     f"{type(joint).__name__} '{joint.name}', which has no coordinate of its own)")
            else:
                rest = float(m.qpos_spring[m.jnt_qposadr[j]]) - q0
                self.elements.append(JointSpringDamper(joint, stiffness=k, damping=c, rest=rest, dry_friction=friction,
                                                       coordinate=coordinate, name=f"{name} passive"))
        elif t in (BALL, FREE) and (k or c or friction):
            self.unmapped.append(f"joint '{name}' ({_KINDS[t]}): stiffness/damping/frictionloss")
        if m.jnt_limited[j] and not (off("LIMIT") or off("CONSTRAINT")):
            self.unmapped.append(f"joint '{name}': limits (range {m.jnt_range[j].tolist()})")
        armature = m.dof_armature[dof:dof + {FREE: 6, BALL: 3}.get(t, 1)]
        if np.any(armature):
            self.unmapped.append(f"joint '{name}': armature {float(armature.max()):g} (reflected rotor inertia)")

    def _unique(self, name, what):
        """MuJoCo's ``name`` of a joint or equality, or ``"<name> <what>"`` where a body has it
        (MuJoCo keeps a name per kind of object, conserve one for all elements)."""
        return f"{name} {what}" if name in self.body_name else name

    def _disabled(self, flag):
        """True if the model's options disable ``flag`` ("CONTACT", "LIMIT", …: mjDSBL_<flag>)."""
        return bool(int(self.m.opt.disableflags) & int(getattr(self.mj.mjtDisableBit, "mjDSBL_" + flag)))

    # --- equality constraints -------------------------------------------------------------
    def _equalities(self):
        m, d, mj = self.m, self.d, self.mj
        if self._disabled("EQUALITY") or self._disabled("CONSTRAINT"):
            return
        for e in range(m.neq):
            name = self._unique(_name(m, mj.mjtObj.mjOBJ_EQUALITY, e, "equality"), "equality")
            kind = int(m.eq_type[e])
            if not m.eq_active0[e]:
                continue
            by_site = int(m.eq_objtype[e]) == int(mj.mjtObj.mjOBJ_SITE)
            if kind not in (int(mj.mjtEq.mjEQ_CONNECT), int(mj.mjtEq.mjEQ_WELD)) or by_site:
                self.unmapped.append(f"equality '{name}' ({mj.mjtEq(kind).name}"
                                     + (" between sites)" if by_site else ")"))
                continue
            b1, b2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
            a, b = self.parts[self._owner(b1)], self.parts[self._owner(b2)]
            if a is b:
                self.unmapped.append(f"equality '{name}': both bodies are one conserve body")
                continue
            if kind == int(mj.mjtEq.mjEQ_CONNECT):  # data: the anchor in body1's frame
                x = d.xpos[b1] + d.xmat[b1].reshape(3, 3) @ m.eq_data[e][0:3]
                self.elements.append(Spherical(a, b, at=x, name=name))
            else:  # weld, data: the anchor in body2's frame, then the relative pose MuJoCo holds
                x = d.xpos[b2] + d.xmat[b2].reshape(3, 3) @ m.eq_data[e][0:3]
                self.elements.append(Fixed(a, b, at=x, name=name))

    # --- actuators ------------------------------------------------------------------------
    def _actuators(self):
        m, mj = self.m, self.mj
        rows = []
        for i in range(m.nu):
            name = _name(m, mj.mjtObj.mjOBJ_ACTUATOR, i, "actuator")
            j = int(m.actuator_trnid[i][0])
            why = None
            if int(m.actuator_trntype[i]) != int(mj.mjtTrn.mjTRN_JOINT):
                why = "transmission other than a joint"
            elif j not in self.coordinate_of:
                why = f"joint '{self.joint_name[j]}' has no conserve coordinate"
            elif int(m.actuator_dyntype[i]) != int(mj.mjtDyn.mjDYN_NONE):
                why = "activation dynamics"
            elif int(m.actuator_gaintype[i]) not in (int(mj.mjtGain.mjGAIN_FIXED), int(mj.mjtGain.mjGAIN_AFFINE)) or \
                    int(m.actuator_biastype[i]) not in (int(mj.mjtBias.mjBIAS_NONE), int(mj.mjtBias.mjBIAS_AFFINE)):
                why = "gain or bias other than fixed/affine"
            if why:
                self.unmapped.append(f"actuator '{name}': {why}")
                continue
            fixed = int(m.actuator_gaintype[i]) == int(mj.mjtGain.mjGAIN_FIXED)
            gain = np.array(m.actuator_gainprm[i][:3]) * ([1.0, 0.0, 0.0] if fixed else 1.0)
            bias = np.array(m.actuator_biasprm[i][:3]) * (0.0 if int(m.actuator_biastype[i]) == 0 else 1.0)
            clamp = not self._disabled("CLAMPCTRL")
            ctrl = m.actuator_ctrlrange[i] if (m.actuator_ctrllimited[i] and clamp) else (-np.inf, np.inf)
            force = m.actuator_forcerange[i] if m.actuator_forcelimited[i] else (-np.inf, np.inf)
            joint, coordinate = self.coordinate_of[j]
            q0 = self.joint_maps[self.joint_name[j]].q0
            rows.append((i, name, joint, coordinate, q0, float(m.actuator_gear[i][0]), gain, bias, ctrl, force))
        idle = self.control is None and not any(np.any(r[7]) for r in rows)  # no controls, no bias: no force
        if rows and not idle and not self._disabled("ACTUATION"):
            self.elements.append(_actuator_controller(rows, m.nu, self.control))

    def _gravity(self):
        g = np.array(self.m.opt.gravity, float)
        if not self._disabled("GRAVITY") and np.any(g):
            self.elements.append(Gravity(g))

    def _unmapped(self):
        m = self.m
        if not (self._disabled("CONTACT") or self._disabled("CONSTRAINT")) and m.ngeom:
            collide = [g for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]]
            if len(collide) > 1:
                self.unmapped.append(f"contacts ({len(collide)} geoms may collide; disable with "
                                     "option/flag contact=\"disable\" to compare)")
        if m.ntendon:
            self.unmapped.append(f"{m.ntendon} tendons (their stiffness, damping, limits and actuators)")
        if m.nsensor:
            self.unmapped.append(f"{m.nsensor} sensors (use cs.sensors with a Controller)")
        if m.opt.density or m.opt.viscosity or np.any(m.opt.wind):
            self.unmapped.append("fluid forces (option density/viscosity/wind)")
        if getattr(m, "nflex", 0):
            self.unmapped.append(f"{m.nflex} flexes")


def _actuator_controller(rows, nu, control):
    """The Controller "actuators": MuJoCo's actuator forces on their joints' coordinates."""
    import jax.numpy as jnp

    sensor_of = {"angle": (sensors.joint_angle, sensors.joint_rate), "slide": (sensors.slide, sensors.slide_rate)}
    readings = {}
    for i, name, joint, coordinate, *_ in rows:
        value, rate = sensor_of[coordinate]
        readings[f"{name}.q"], readings[f"{name}.qdot"] = value(joint), rate(joint)
    index = np.array([r[0] for r in rows])
    q0, gear = np.array([r[4] for r in rows]), np.array([r[5] for r in rows])
    gain, bias = np.array([r[6] for r in rows]), np.array([r[7] for r in rows])
    ctrl, force = np.array([r[8] for r in rows], float), np.array([r[9] for r in rows], float)

    def law(t, r):
        q = q0 + jnp.stack([r[f"{row[1]}.q"] for row in rows])
        qdot = jnp.stack([r[f"{row[1]}.qdot"] for row in rows])
        u = jnp.zeros(nu) if control is None else jnp.asarray(control(t, q, qdot), float).reshape(nu)
        u = jnp.clip(u[index], ctrl[:, 0], ctrl[:, 1])
        length, velocity = gear * q, gear * qdot
        f = (gain[:, 0] + gain[:, 1] * length + gain[:, 2] * velocity) * u \
            + bias[:, 0] + bias[:, 1] * length + bias[:, 2] * velocity
        return gear * jnp.clip(f, force[:, 0], force[:, 1])

    actuators = [motor(joint, coordinate=coordinate) for _, _, joint, coordinate, *_ in rows]
    return Controller("actuators", law, sensors=readings, actuators=actuators, rate=None)
