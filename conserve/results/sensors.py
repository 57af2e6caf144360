"""Sensors of a finished run, for every joint and any body point: what a test rig would measure.

A joint's sensor (:meth:`conserve.Solution.joint`) reads the geometry the joint was built with
(kept as plain data in the Solution's layout, :meth:`conserve.model.joints.Joint.record`, so a loaded
file has it too)
and the node coordinates q and velocities v = q̇:

* joint coordinates: the ``angle`` (rad, right-handed about the axis; Revolute, Cylindrical) and the
  ``slide`` (m along the axis; Prismatic, Cylindrical) with their rates, whether or not a spring
  or motor acts on them. The angle is θ = atan2(b·e₂, b·e₁) (e₁, e₂ ⟂ n fixed in part a, b ⟂ n
  fixed in b: the geometry of :class:`conserve.model.coordinates.Angle`), unwrapped by its rate, so it counts
  turns; ``θ̇ = (π₁π̇₂ − π₂π̇₁)/|π|²`` with π = (b·e₁, b·e₂). The slide is s = u·(x_B − x_A).
* relative kinematics for every joint: ``rotation`` R_aᵀR_b (N+1, 3, 3), ``angular_velocity``
  R_aᵀ(ω_b − ω_a) (N+1, 3), and, for joints with attachment points, ``position``
  R_aᵀ(x_B − x_A) and its rate in a's axes ``velocity`` (N+1, 3), all in part a's axes.
* reactions (:func:`conserve.joint_reactions`) through ``reaction(frame)``.
* the load of a prescribed motion (:class:`conserve.JointDrive`) on the joint through ``drive``
  (:class:`DriveLoad`): the torque about the joint axis (N m) or force along it (N) that the
  drive applies to part b (−1 times it to part a) per step, τ = −λ of the drive's row, and its
  work τ Δs. Like the multipliers it alternates about the continuous load from step to step by
  O(Δt); the mean of two consecutive steps is the load at the node between them to O(Δt²).

Body points (:meth:`conserve.results.solution.PartView.point`): x = φ + X_i d_i, ẋ = φ̇ + X_i ḋ_i and the
acceleration by central differences of the node velocities (second order: the index-3 midpoint
velocities carry a component normal to the constraints that alternates in sign from node to
node, O(Δt²), which a difference over two steps cancels and a one-sided one turns into an O(Δt)
error; the first and last node's are extrapolated linearly from their neighbours'.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kinematics.frames import GROUND_BLOCKS
from ..kinematics.rotations import angular_velocity


class DriveLoad(NamedTuple):
    """What the prescribed motions (:class:`conserve.JointDrive`) on one joint apply, per step.

    * ``names``: {coordinate ("angle" or "slide"): the drive's name}
    * ``t`` (N,): the steps' midpoints, s
    * ``torque`` (N,): N m about the joint axis n on part b, right-handed about n as the joint
      angle (part a takes −torque about n); None if the angle is not driven
    * ``force`` (N,): N along n on part b (part a takes −force); None if the slide is not driven
    * ``work`` (N,): J, the drives' discrete work per step, torque Δθ + force Δs (what the energy
      balance counts: Σ work = the change of the system's energy caused by the drives)

    Each step's value is τ = −λ of the drive's constraint row s − θ(t) = 0 (:mod:`conserve.model.drives`),
    constant over the step, so torque · Δθ is the step's work exactly; it alternates about the
    continuous load by O(Δt) from step to step (the index-3 midpoint rule's parasitic mode), and
    the mean of two consecutive steps is the load at the node between them to O(Δt²). The joint's
    reaction (:func:`conserve.joint_reactions`) leaves it out unless asked (``drives=True``).
    """

    names: dict
    t: np.ndarray
    torque: np.ndarray | None
    force: np.ndarray | None
    work: np.ndarray


class JointView(NamedTuple):
    """Sensors of one joint over the N + 1 nodes (see the module docstring); coordinates a joint
    kind does not have are None; ``drives``: {coordinate: name} of the JointDrives on it."""

    name: str
    kind: str
    angle: np.ndarray | None
    angle_rate: np.ndarray | None
    slide: np.ndarray | None
    slide_rate: np.ndarray | None
    rotation: np.ndarray
    angular_velocity: np.ndarray
    position: np.ndarray | None
    velocity: np.ndarray | None
    solution: object
    drives: dict = {}

    def reaction(self, frame="world", drives=False):
        """The joint's reaction force and torque on both parts per step
        (:func:`conserve.joint_reactions`; needs the Solution's assembly, i.e. a run of this session);
        ``drives=True``: with the load of the JointDrives on it (:attr:`drive`) included."""
        from .reactions import joint_reactions

        if self.solution.assembly is None:
            raise AttributeError(f"joint '{self.name}': reactions need the model; this Solution was loaded from a "
                                 "file: use cs.joint_reactions(system, solution, joint) with the system it came from.")
        return joint_reactions(self.solution.assembly, self.solution, self.name, frame, drives=drives)

    @property
    def drive(self) -> DriveLoad | None:
        """The torque (N m, about the axis) and force (N, along it) that the JointDrives on this
        joint apply to part b per step, with their work (:class:`DriveLoad`); None if no drive acts
        on it. Read from the multipliers, so a loaded Solution has it too."""
        if not self.drives:
            return None
        sol = self.solution
        rows = {owner: i for i, (owner, _) in enumerate(sol.constraint_rows)}
        load = {kind: -np.asarray(sol.multipliers)[:, rows[name]] for kind, name in self.drives.items()}
        work = sum(sol.work_by_element[name] for name in self.drives.values())
        t = 0.5 * (sol.t[:-1] + sol.t[1:])
        return DriveLoad(dict(self.drives), t, load.get("angle"), load.get("slide"), np.asarray(work))


class Frames(NamedTuple):
    """Origins x, directors D (rows d_i) and their rates of a frame at every node."""

    x: np.ndarray  # (N+1, 3)
    D: np.ndarray  # (N+1, 3, 3)
    x_rate: np.ndarray
    D_rate: np.ndarray

    def vector(self, U):
        """(u, u̇) (N+1, 3) of a body-fixed vector U (3,)."""
        return np.einsum("i,nij->nj", U, self.D), np.einsum("i,nij->nj", U, self.D_rate)

    def point(self, X):
        """(x, ẋ) (N+1, 3) of a body point X (3,)."""
        u, u_rate = self.vector(X)
        return self.x + u, self.x_rate + u_rate

    def angular_velocity(self):
        """ω (N+1, 3), inertial (:func:`conserve.kinematics.rotations.angular_velocity`)."""
        return np.asarray(angular_velocity(self.D, self.D_rate))


def frames(q, v, frame) -> Frames:
    """The frame of block indices ``frame`` (4,) (into the extended block array: the ground's
    blocks appended) at every node of q, v (N+1, n_q)."""
    n = q.shape[0]
    Q = np.concatenate([q.reshape(n, -1, 3), np.broadcast_to(np.asarray(GROUND_BLOCKS), (n, 4, 3))], axis=1)
    V = np.concatenate([v.reshape(n, -1, 3), np.zeros((n, 4, 3))], axis=1)
    frame = np.asarray(frame)
    return Frames(Q[:, frame[0]], Q[:, frame[1:]], V[:, frame[0]], V[:, frame[1:]])


def unwrapped(angle, rate, t):
    """Angles (N+1,) counting turns, from their values in (−π, π] and their rates (rad/s) at the
    nodes' times t (s): the turn from one node to the next is the branch nearest the trapezoidal
    ½(ω_k + ω_{k+1})(t_{k+1} − t_k), right while the rate's change over an interval integrates to
    less than π. (``np.unwrap`` takes the turn below π, wrong for nodes saved far apart — adaptive
    runs with ``saveat``: a joint spinning at 10 rad/s saved every 0.5 s read −13 rad for +49.8.)"""
    if t is None or len(angle) < 2:
        return np.unwrap(angle)
    turn = np.diff(angle)
    estimate = 0.5 * (rate[1:] + rate[:-1]) * np.diff(t)
    turn = turn + 2.0 * np.pi * np.round((estimate - turn) / (2.0 * np.pi))
    return np.concatenate([angle[:1], angle[0] + np.cumsum(turn)])


def joint_view(name, record, solution) -> JointView:
    """The sensors of the joint ``name`` with ``record`` (:meth:`~conserve.model.joints.Joint.record`)
    over a Solution."""
    a, b = frames(solution.q, solution.v, record["frame_a"]), frames(solution.q, solution.v, record["frame_b"])
    Ra = np.swapaxes(a.D, 1, 2)  # columns d_i: world = R_a · (a's axes)
    in_a = lambda w: np.einsum("nji,nj->ni", Ra, w)  # noqa: E731
    rotation = np.einsum("nji,njk->nik", Ra, np.swapaxes(b.D, 1, 2))
    omega_a = a.angular_velocity()
    relative_rate = in_a(b.angular_velocity() - omega_a)
    position = velocity = angle = angle_rate = slide = slide_rate = None
    if record["at_a"] is not None:
        (xa, xa_rate), (xb, xb_rate) = a.point(np.asarray(record["at_a"])), b.point(np.asarray(record["at_b"]))
        r, r_rate = xb - xa, xb_rate - xa_rate
        position, velocity = in_a(r), in_a(r_rate - np.cross(omega_a, r))
    if "angle" in record:
        g = {k: np.asarray(x) for k, x in record["angle"].items()}
        (e1, e1_rate), (e2, e2_rate), (w, w_rate) = a.vector(g["e1"]), a.vector(g["e2"]), b.vector(g["b"])
        dot = lambda x, y: np.einsum("ni,ni->n", x, y)  # noqa: E731
        p1, p2 = dot(w, e1), dot(w, e2)
        p1_rate, p2_rate = dot(w_rate, e1) + dot(w, e1_rate), dot(w_rate, e2) + dot(w, e2_rate)
        angle_rate = (p1 * p2_rate - p2 * p1_rate) / (p1**2 + p2**2)
        angle = unwrapped(np.arctan2(p2, p1), angle_rate, getattr(solution, "t", None))
    if "slide" in record:
        u, u_rate = a.vector(np.asarray(record["slide"]["u"]))  # a slide has points: r, ṙ from above
        slide = np.einsum("ni,ni->n", u, r)
        slide_rate = np.einsum("ni,ni->n", u_rate, r) + np.einsum("ni,ni->n", u, r_rate)
    return JointView(name, record["kind"], angle, angle_rate, slide, slide_rate, rotation, relative_rate,
                     position, velocity, solution, dict(record.get("drives", {})))


class PointHistory(NamedTuple):
    """A body point over the N + 1 nodes: ``position`` (m), ``velocity`` (m/s), ``acceleration``
    (m/s², central differences of the velocities), each (N+1, 3), inertial axes."""

    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray


def point_history(t, frame: Frames, X) -> PointHistory:
    """The body point X (3,) of a part's ``frame`` at the nodes t (N+1,)."""
    x, x_rate = frame.point(np.asarray(X, float))
    if len(t) < 4:
        return PointHistory(x, x_rate, np.gradient(x_rate, t, axis=0) if len(t) > 1 else np.full_like(x, np.nan))
    a = np.gradient(x_rate, t, axis=0)  # central inside
    a[0], a[-1] = 2 * a[1] - a[2], 2 * a[-2] - a[-3]  # extrapolated (not one-sided: see the module docstring)
    return PointHistory(x, x_rate, a)
