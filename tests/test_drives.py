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
    """τ = −λ; the mean of two consecutive steps' λ against τ(t_n) = I_p θ̈ + m g (L/2) cos θ at
    the node between them converges as Δt²."""
    errors = []
    for key in ("director", "fine"):
        sol = runs[key]
        row = [i for i, (owner, _) in enumerate(sol.constraint_rows) if owner == "servo"][0]
        tau = -0.5 * (sol.multipliers[1:, row] + sol.multipliers[:-1, row])
        t = sol.t[1:-1]
        exact = (J_ZZ + M * (L / 2) ** 2) * (-2.0 * np.sin(2 * t)) + M * G * (L / 2) * np.cos(0.5 * np.sin(2 * t))
        errors.append(np.max(np.abs(tau - exact)) / np.max(np.abs(exact)))
    assert errors[0] <= 1e-4
    assert abs(np.log2(errors[0] / errors[1]) - 2.0) <= 0.2, errors
    # the reduced backend's recovered multiplier is the same force
    row = [i for i, (owner, _) in enumerate(runs["reduced"].constraint_rows) if owner == "servo"][0]
    np.testing.assert_allclose(runs["reduced"].multipliers[:, row], runs["director"].multipliers[:, row],
                               rtol=0, atol=1e-8)


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
    ball = cs.Spherical(cs.ground, body, at=[0, 0, 0])
    with pytest.raises(ModelError, match="has coordinates none"):
        cs.JointDrive(ball, law)
