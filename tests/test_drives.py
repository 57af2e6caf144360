"""Prescribed motion (``cs.JointDrive``, issue 18): a servo-driven pendulum follows θ(t) to
round-off at every node with both backends and at order 4, its energy balance holds to round-off
with the drive's work counted, and the drive torque is the one the motion needs
(I_p θ̈ + m g (L/2) cos θ, to second order); bad laws and unsupported uses are refused clearly."""

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve.errors import InconsistentInitialState, ModelError

L, M, J_ZZ, G = 0.5, 1.0, 0.02, 9.81


def law(t):
    return 0.5 * jnp.sin(2.0 * t)


def servo_pendulum(rate=1.0, drive_law=law):
    """A bar hinged to the ground about e3 at the origin, gravity along −e2, its angle driven by
    ``drive_law`` (θ(0) = 0, θ'(0) = 1 rad/s); ``rate``: the bar's initial angular velocity."""
    bar = cs.RigidBody("bar", mass=M, inertia=(1e-3, J_ZZ, J_ZZ), position=[L / 2, 0, 0],
                       velocity=[0, rate * L / 2, 0], angular_velocity=[0, 0, rate])
    hinge = cs.Revolute(cs.ground, bar, at=[0, 0, 0], axis=[0, 0, 1.0], name="hinge")
    return cs.System([bar, hinge, cs.JointDrive(hinge, drive_law, name="servo"), cs.Gravity([0, -G, 0])])


@pytest.fixture(scope="module")
def runs():
    system = servo_pendulum().assemble()
    return {"director": cs.simulate(system, 2.0, 1e-2), "reduced": cs.simulate(system, 2.0, 1e-2, backend="reduced"),
            "order 4": cs.simulate(system, 2.0, 1e-2, order=4), "fine": cs.simulate(system, 2.0, 5e-3)}


def test_the_joint_follows_the_law_and_the_energy_balance_counts_the_drive(runs):
    for name, sol in runs.items():
        angle = sol.joint("hinge").angle
        assert np.max(np.abs(angle - 0.5 * np.sin(2.0 * sol.t))) <= 1e-12, name
        E = sol.energy.total
        assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * np.max(np.abs(E)), name
        # the drive does work: without it the balance would be off by what it put in
        assert np.max(np.abs(np.cumsum(sol.work_by_element["servo"]))) >= 0.1, name
        assert np.max(np.abs(sol.constraint_residual)) <= 1e-12, name


def test_the_drive_torque_is_what_the_prescribed_motion_needs(runs):
    """τ = −λ, read as the joint's sensor ``drive``; the mean of two consecutive steps' against
    τ(t_n) = I_p θ̈ + m g (L/2) cos θ at the node between them converges as Δt²."""
    errors = []
    for key in ("director", "fine"):
        sol = runs[key]
        row = [i for i, (owner, _) in enumerate(sol.constraint_rows) if owner == "servo"][0]
        drive = sol.joint("hinge").drive
        assert drive.names == {"angle": "servo"} and drive.force is None
        np.testing.assert_array_equal(drive.torque, -sol.multipliers[:, row])
        tau = 0.5 * (drive.torque[1:] + drive.torque[:-1])
        t = sol.t[1:-1]
        exact = (J_ZZ + M * (L / 2) ** 2) * (-2.0 * np.sin(2 * t)) + M * G * (L / 2) * np.cos(0.5 * np.sin(2 * t))
        errors.append(np.max(np.abs(tau - exact)) / np.max(np.abs(exact)))
    assert errors[0] <= 1e-4
    assert abs(np.log2(errors[0] / errors[1]) - 2.0) <= 0.2, errors
    # the reduced backend's recovered multiplier is the same force
    row = [i for i, (owner, _) in enumerate(runs["reduced"].constraint_rows) if owner == "servo"][0]
    np.testing.assert_allclose(runs["reduced"].multipliers[:, row], runs["director"].multipliers[:, row],
                               rtol=0, atol=1e-8)


W0, ALPHA, SPIN = 0.5, 2.0, 300.0  # gimbal rate (rad/s) at t = 0, its acceleration (rad/s²), wheel spin (rad/s)
I_FRAME, J_AXIAL, J_TRANSVERSE = (0.04, 0.03, 0.05), 0.02, 0.012  # kg m²


def gimbal(rate=W0):
    """A control-moment gyroscope on a fixed base: a gimbal frame hinged to the ground about e1 at
    the origin (its centre of mass), carrying a balanced wheel (hybrid rotor, axis e3 of the
    frame) spinning at SPIN; the gimbal angle is driven by θ(t) = W0 t + ½ ALPHA t²."""
    frame = cs.RigidBody("frame", 1.5, I_FRAME, angular_velocity=(rate, 0, 0))
    wheel = cs.Rotor("wheel", frame, axis=(0, 0, 1), mass=1.0, axial_inertia=J_AXIAL, transverse_inertia=J_TRANSVERSE,
                     spin_rate=SPIN)
    bearing = cs.Revolute(cs.ground, frame, at=(0, 0, 0), axis=(1, 0, 0), name="gimbal")
    return cs.System([frame, wheel, bearing,
                      cs.JointDrive(bearing, lambda t: W0 * t + 0.5 * ALPHA * t**2, name="gimbal servo")])


def test_a_gimbal_drive_torque_is_j_alpha_and_the_base_torque_is_gyroscopic():
    """The gimbal's angular momentum about the origin is H = I θ̇ e1 + p a(θ) (I = I_frame,1 + J_t
    about the gimbal axis, p = J_a Ω the wheel's constant axial momentum, a(θ) its turning axis), so
    the drive's torque about the axis is I θ̈ = I α and the base takes −dH/dt = −(I α e1 + p θ̇ e1 × a)
    from the bearing and the servo together (``reaction(drives=True)``; without the drive the
    bearing's torque about its axis is 0): both, as the mean of two consecutive steps, to second
    order in Δt. Per step the drive's work τ Δθ is its power integrated, the energy change, to
    round-off, and the base torque is the change of the angular momentum over h exactly."""
    I_axis = I_FRAME[0] + J_TRANSVERSE
    e1 = np.array([1.0, 0.0, 0.0])
    errors = {"drive": [], "base": []}
    for h in (1e-2, 5e-3):
        sol = cs.simulate(gimbal(), 0.5, h)
        view = sol.joint("gimbal")
        drive = view.drive
        assert drive.names == {"angle": "gimbal servo"} and drive.force is None
        node = lambda x: 0.5 * (x[1:] + x[:-1])  # noqa: E731
        errors["drive"].append(np.max(np.abs(node(drive.torque) - I_axis * ALPHA)) / (I_axis * ALPHA))
        t = sol.t[1:-1]
        theta, rate = W0 * t + 0.5 * ALPHA * t**2, W0 + ALPHA * t
        axis = np.stack([np.zeros_like(t), -np.sin(theta), np.cos(theta)], axis=1)
        p = J_AXIAL * SPIN
        base = -(I_axis * ALPHA * e1 + p * rate[:, None] * np.cross(e1, axis))
        full, bearing = view.reaction(drives=True), view.reaction()
        errors["base"].append(np.max(np.abs(node(full.torque_a) - base)) / np.max(np.abs(base)))
        # the bearing alone transmits no torque about its axis; the servo adds the drive's (its
        # discrete gradient acts at the step's midpoint, whose directors are orthonormal to O(Δt²))
        assert np.max(np.abs(bearing.torque_b[:, 0])) <= 1e-9 * np.max(np.abs(bearing.torque_b))
        np.testing.assert_allclose(full.torque_b[:, 0], drive.torque, rtol=1e-4)
        # Newton–Euler per step: ΔH/h is the torque of the bearing and servo on the gimbal
        dH = np.diff(sol.angular_momentum, axis=0) / h
        np.testing.assert_allclose(full.torque_b, dH, rtol=0, atol=1e-10 * np.max(np.abs(dH)))
        # the power integrated: Σ τ Δθ = the drive's work = the energy change
        E = sol.energy.total
        np.testing.assert_allclose(drive.torque * np.diff(view.angle), drive.work, rtol=0, atol=1e-13 * np.max(E))
        assert abs(np.sum(drive.work) - (E[-1] - E[0])) <= 1e-12 * np.max(np.abs(E))
        assert abs((E[-1] - E[0]) - 0.5 * I_axis * ((W0 + ALPHA * 0.5) ** 2 - W0**2)) <= 1e-3 * (E[-1] - E[0])
    for key, (coarse, fine) in errors.items():
        assert coarse <= 1e-3, (key, coarse)
        assert abs(np.log2(coarse / fine) - 2.0) <= 0.2, (key, coarse, fine)


def test_a_drive_is_checked_at_the_runs_start():
    """A law that fits the joint at t0 = 1 s only (θ = 0.5 sin 2(t − 1)) runs from there and is
    followed (before: refused at assembly, which checked it at t = 0)."""
    shifted = servo_pendulum(drive_law=lambda t: 0.5 * jnp.sin(2.0 * (t - 1.0)))
    sol = cs.simulate(shifted, 1.2, 1e-2, t0=1.0)
    assert np.max(np.abs(sol.joint("hinge").angle - 0.5 * np.sin(2.0 * (sol.t - 1.0)))) <= 1e-12
    with pytest.raises(InconsistentInitialState, match="'servo': at t0 = 0 s its joint's coordinate differs"):
        cs.simulate(shifted, 0.1, 1e-2)
    # an ensemble checks its members at its t0 too (before: refused any drive at t0 ≠ 0)
    members = [shifted.assemble()] * 2
    for member in cs.simulate_batch(members, 1.2, 1e-2, t0=1.0):
        assert np.max(np.abs(member.joint("hinge").angle - 0.5 * np.sin(2.0 * (member.t - 1.0)))) <= 1e-12
    with pytest.raises(InconsistentInitialState, match="member 0: the initial positions violate 'servo'"):
        cs.simulate_batch(members, 0.1, 1e-2)


def test_set_joints_poses_a_driven_joint_at_its_law():
    """set_joints on a system with a drive (before: refused as "constraints outside its kinematic
    tree", while the drive's own error recommended set_joints): the bar, built at rest, is posed at
    law(t0) and law'(t0) (t0 = 1 s: 0.5 sin 2 rad, cos 2 rad/s), and the run from there follows
    the law with the energy balance exact; a value against the law is refused naming the drive."""
    posed = cs.set_joints(servo_pendulum(rate=0.0), t0=1.0)
    sol = cs.simulate(posed, 1.2, 1e-2, t0=1.0)
    hinge = sol.joint("hinge")
    assert abs(hinge.angle[0] - 0.5 * np.sin(2.0)) <= 1e-12 and abs(hinge.angle_rate[0] - np.cos(2.0)) <= 1e-12
    assert np.max(np.abs(hinge.angle - 0.5 * np.sin(2.0 * sol.t))) <= 1e-12
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * np.max(np.abs(sol.energy.total))
    with pytest.raises(InconsistentInitialState, match="cs.set_joints\\(system, t0=0\\) poses every driven joint"):
        cs.simulate(servo_pendulum(rate=0.0), 0.1, 1e-2)  # what the drive's error recommends
    with pytest.raises(ModelError, match="joint 'hinge' angle is prescribed by the drive 'servo' \\(0.454648713413 at "
                                         "t0 = 1.0, asked 0.3\\); leave it out"):
        cs.set_joints(servo_pendulum(rate=0.0), {"hinge": 0.3}, t0=1.0)
    same = cs.set_joints(servo_pendulum(rate=0.0), {"hinge": 0.5 * np.sin(2.0)}, t0=1.0)  # the law's value: fine
    np.testing.assert_allclose(same.initial_state.q, posed.initial_state.q, rtol=0, atol=1e-14)


def test_bad_drives_are_refused_clearly():
    with pytest.raises(InconsistentInitialState, match="'servo': at t0 = 0 s its joint's rate differs from the drive "
                                                       "law's rate by -1"):
        cs.simulate(servo_pendulum(rate=0.0), 0.1, 1e-2)
    system = servo_pendulum()
    with pytest.raises(InconsistentInitialState, match="'servo': at t0 = 1 s its joint's coordinate differs"):
        cs.simulate(system, 1.1, 1e-2, t0=1.0)
    with pytest.raises(ModelError, match="backend 'ode': prescribed motions"):
        cs.simulate(system, 0.1, 1e-2, backend="ode")
    with pytest.raises(ModelError, match="drive law"):
        servo_pendulum(drive_law=lambda t: jnp.ones(3)).assemble()
    body = cs.RigidBody("b", 1.0, (1.0, 1.0, 1.0))
    ball = cs.Spherical(cs.ground, body, at=[0, 0, 0], name="ball")
    with pytest.raises(ModelError, match="'ball' is a Spherical joint, which has no angle or slide to act on; joint "
                                         "springs, motors and drives act on the angle of a Revolute"):
        cs.JointDrive(ball, law)


def test_two_drives_on_one_coordinate_are_refused_by_name():
    """Two laws for one joint angle (before: the second drive's row was dropped as redundant, its
    law ignored, and a run only warned of "a singular pose"); a drive whose joint is not in the
    system is refused too (before: it drove the relative angle of two unjoined parts)."""
    bar = cs.RigidBody("bar", mass=M, inertia=(1e-3, J_ZZ, J_ZZ), position=[L / 2, 0, 0],
                       velocity=[0, L / 2, 0], angular_velocity=[0, 0, 1.0])
    hinge = cs.Revolute(cs.ground, bar, at=[0, 0, 0], axis=[0, 0, 1.0], name="hinge")
    twice = cs.System([bar, hinge, cs.JointDrive(hinge, law, name="servo"),
                       cs.JointDrive(hinge, lambda t: 0.5 * jnp.sin(2.0 * t) + t**2, name="second servo")])
    with pytest.raises(ModelError, match="joint 'hinge': its angle is prescribed by two drives, 'servo' and "
                                         "'second servo'; a coordinate follows one law. Remove one"):
        twice.assemble()
    with pytest.raises(ModelError, match="'servo': it drives joint 'hinge', which is not in the system; add the joint"):
        cs.System([bar, cs.JointDrive(hinge, law, name="servo")]).assemble()
