"""Joint reaction forces and torques from the multipliers of a run (both backends).

The step's constraint force on the director coordinates is −Ḡᵀλ (Ḡ = G(q_{n+½}), an exact discrete
derivative of the quadratic joint constraints). On a rigid part with blocks (φ, d1, d2, d3) the virtual
work δφ·f_φ + Σ_k δd_k·f_k of a rigid variation δd_k = δα × d_k gives the resultant force
f_φ and the moment Σ_k d_k × f_k about the centre of mass φ, here at the step's midpoint. Moved
to the joint's attachment point and expressed in a chosen frame, these are the reaction force
and torque that the joint exerts on each of its two parts during step n → n+1. Like the
multipliers, they alternate about the continuous force from step to step (the index-3 midpoint
rule's parasitic mode), by O(Δt); the mean of two consecutive steps is O(Δt²) from the force at the
node between them.

A prescribed motion (:class:`conserve.JointDrive`) is an element of its own: its torque about
the joint axis (or force along it) is not part of the joint's reaction unless asked for
(``drives=True``); alone it is the joint sensor's ``drive`` (:class:`conserve.results.sensors.DriveLoad`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from ..backends.base import map_steps
from ..compilation.modes import jit_quick
from ..discrete.forces import constraint_force, increment_groups, part_wrench
from ..errors import ModelError
from ..model.bodies import Ground, RigidBody, ground
from ..model.joints import Joint
from ..model.system import as_assembly


class Reaction(NamedTuple):
    """Reactions of one joint per step, (N, 3) each (``t``: (N,) step midpoints, s).

    force_a, torque_a : force (N) on part a and torque (N m) about its attachment point ``at_a``
    force_b, torque_b : the same on part b, about ``at_b``
    Expressed in the frame asked for (world axes by default). For a joint on the ground, the
    ground's side follows from action = reaction (F_a = −F_b, the torques balance about each point).
    """

    t: np.ndarray
    force_a: np.ndarray
    torque_a: np.ndarray
    force_b: np.ndarray
    torque_b: np.ndarray


@jit_quick(mode="unoptimized")
def _wrenches(model, q0, q1, theta0, theta1, s0, s1, lam):
    """Generalised constraint forces −Ḡᵀλ (N, n_blocks, 3) of the steps, λ (N, n_c) kept rows; rows
    on joint coordinates (prescribed motions) act on q through the coordinates' exact discrete
    derivatives, −Σ_k (Ḡ_sᵀλ)_k ∇̄s_k, as in the step (:func:`conserve.discrete.scheme.equations`)."""
    def one(q0, q1, theta0, theta1, s0, s1, lam):
        gq, _, gs = constraint_force(model, q0, q1, theta0, theta1, s0, s1, lam)
        if not gs.size:
            return gq
        groups = model.coordinate_groups()
        cotangents = [gs[sl][:, None] * dsdpi
                      for (_, _, sl), (_, dsdpi) in zip(groups, increment_groups(model, q0, q1))]

        def invariants(q):
            Q = model.blocks(q)
            return [k.geometry.invariants(p, Q) for k, p, _ in groups]

        return gq + jax.vjp(invariants, 0.5 * (q0 + q1))[1](cotangents)[0]

    force = jax.vmap(one)(q0, q1, theta0, theta1, s0, s1, lam)
    return -force.reshape(force.shape[0], -1, 3)


def joint_reactions(system, solution, joint, frame="world", *, drives=False) -> Reaction:
    """Reaction force and torque of ``joint`` on its two parts at every step of ``solution``.

    Parameters
    ----------
    system : the System or Assembly that ``solution`` was computed from
    joint : one of its joints, or its name (any backend: the multipliers mean the same in both)
    frame : "world", "a" or "b" (the axes of that part at the step midpoint), or a part's name
    drives : False (default): the joint's constraint reaction only — a driven Revolute's torque
        about its axis is then 0, the drive's torque being the sensor ``sol.joint(name).drive``
        (:class:`conserve.results.sensors.DriveLoad`); True: with the load of the JointDrives on this joint
        included (the drive's torque about the axis or force along it, on b, and its reaction on
        a): everything the joint and its servo transmit, e.g. the torque a gimbal's bearing and
        motor put on a spacecraft's base.

    Returns
    -------
    Reaction : per step, in the frame asked for
    """
    assembly = as_assembly(system, "joint_reactions")
    model, layout = assembly.model, assembly.layout
    name = joint.name if isinstance(joint, Joint) else joint
    if not isinstance(name, str) or name not in layout.joints:
        raise ModelError(f"joint_reactions: {joint!r} is not a joint of this system; pass one of the "
                         f"Joint objects it was built from or a joint's name ({sorted(layout.joints)}).")
    # the joint's parts and attachment points, from its record (:meth:`~conserve.model.joints.Joint.record`)
    record = layout.joints[name]
    owners = {name} | (set(record.get("drives", {}).values()) if drives else set())
    rows = [i for i, (owner, _) in enumerate(layout.constraint_rows) if owner in owners]
    if not rows:
        raise ModelError(f"joint_reactions: joint '{name}' has no constraint rows in this system.")
    part_a, part_b = (ground if record[k] == "ground" else next(p for p in layout.parts if p.name == record[k])
                      for k in ("a", "b"))
    if len(solution) < 2:
        raise ModelError("joint_reactions: the solution has no step (reactions are per step).")
    keep = np.asarray(model.constraint_keep, dtype=np.int64)
    lam = np.zeros((len(solution) - 1, len(keep)))
    mine = np.isin(keep, rows)
    lam[:, mine] = solution.multipliers[:, keep[mine]]
    ends = lambda x: (x[:-1], x[1:])  # noqa: E731
    f = map_steps(lambda *a: _wrenches(model, *a), *ends(solution.q), *ends(solution.theta), *ends(solution.s), lam)
    qm = 0.5 * (solution.q[:-1] + solution.q[1:]).reshape(len(lam), -1, 3)

    def axes(part):
        """R (N, 3, 3): the part's axes at the step midpoints."""
        b = layout.frame(part)
        R = np.swapaxes(qm[:, b[1:]], 1, 2) if isinstance(part, RigidBody) else np.broadcast_to(np.eye(3), (len(qm), 3, 3))
        U, _, Vt = np.linalg.svd(R)  # the nearest rotation (the midpoint directors are not orthonormal)
        return U @ Vt

    def wrench(part, at):
        """(F, M about the attachment point, x of the point) on a part with coordinates."""
        b = layout.frame(part)
        if not isinstance(part, RigidBody):
            F = f[:, b[0]]
            return F, np.zeros_like(F), qm[:, b[0]]
        F, M = (np.asarray(x) for x in jax.vmap(part_wrench, (0, 0, None, None))(f, qm, b, at))
        return F, M, qm[:, b[0]] + np.einsum("nkc,k->nc", qm[:, b[1:]], at)  # the midpoint's material point

    at_a, at_b = (np.zeros(3) if record[k] is None else np.asarray(record[k], float) for k in ("at_a", "at_b"))
    if isinstance(part_a, Ground):
        Fb, Mb, xb = wrench(part_b, at_b)
        Fa, Ma = -Fb, -Mb - np.cross(xb - at_a, Fb)
    elif isinstance(part_b, Ground):
        Fa, Ma, xa = wrench(part_a, at_a)
        Fb, Mb = -Fa, -Ma - np.cross(xa - at_b, Fa)
    else:
        (Fa, Ma, _), (Fb, Mb, _) = wrench(part_a, at_a), wrench(part_b, at_b)
    named = {"a": part_a, "b": part_b}
    target = named.get(frame) or next((p for p in (part_a, part_b, *layout.parts) if p.name == frame), None)
    if frame != "world":
        if target is None:
            raise ModelError(f"joint_reactions: unknown frame {frame!r}; use 'world', 'a', 'b' or a part's name.")
        if not isinstance(target, Ground):
            R = axes(target)
            Fa, Ma, Fb, Mb = (np.einsum("nji,nj->ni", R, X) for X in (Fa, Ma, Fb, Mb))
    t = 0.5 * (solution.t[:-1] + solution.t[1:])
    return Reaction(t, Fa, Ma, Fb, Mb)
