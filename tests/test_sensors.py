"""Sensors for every joint and body point (issue 18): joint angles and slides with their rates
for joints without springs or motors, relative kinematics, reactions by joint name, and body
point accelerations — against the model's own tracked coordinates, finite differences (second
order in Δt), the constraints and the exact steady precession of the heavy top."""

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve import problems


@pytest.fixture(scope="module")
def crank():
    """The spatial slider-crank (revolute crank driven by a motor, spherical pin, universal joint,
    prismatic guide) at two step sizes."""
    system = problems.slider_crank(motor=lambda t, joint: 0.1 * jnp.sin(t))
    return system, {dt: cs.simulate(system, 0.5, dt) for dt in (1e-3, 5e-4)}


def test_joint_coordinates_equal_the_tracked_ones_and_the_geometry(crank):
    system, runs = crank
    sol = runs[1e-3]
    assert set(sol.joints) == {"crank bearing", "crank pin", "slider pin", "guide"}
    bearing, guide = sol.joint("crank bearing"), sol.joint("guide")
    # the motor's joint angle is tracked by the step with exact increments; the sensor reads q
    np.testing.assert_allclose(bearing.angle, sol.coordinates["crank motor"], rtol=0, atol=1e-12)
    assert bearing.slide is None and guide.angle is None
    # the guide slides along e1 from the slider's start
    slider = sol["slider"].position
    np.testing.assert_allclose(guide.slide, slider[:, 0] - slider[0, 0], rtol=0, atol=1e-12)
    # relative kinematics in a's axes: the bearing turns about e3 only, the pin's points coincide,
    # the prismatic guide does not turn
    np.testing.assert_allclose(bearing.angular_velocity[:, 2], bearing.angle_rate, rtol=0, atol=1e-9)
    turned = np.einsum("nij,kj->nik", bearing.rotation, bearing.rotation[0])  # R(t) R(0)ᵀ: about e3 only
    np.testing.assert_allclose(turned[:, 2, 2], 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.arctan2(turned[:, 1, 0], turned[:, 0, 0]),
                               np.angle(np.exp(1j * (bearing.angle - bearing.angle[0]))), rtol=0, atol=1e-12)
    assert np.max(np.abs(sol.joint("crank pin").position)) <= 1e-12
    assert np.max(np.abs(guide.rotation - np.eye(3))) <= 1e-12
    with pytest.raises(KeyError, match="no joint named 'elbow'"):
        sol.joint("elbow")


def test_joint_rates_match_finite_differences_to_second_order(crank):
    _, runs = crank
    gaps = {}
    for dt, sol in runs.items():
        bearing, guide = sol.joint("crank bearing"), sol.joint("guide")
        gaps[dt] = [np.max(np.abs(rate - np.gradient(value, sol.t, edge_order=2))[1:-1]) / np.max(np.abs(rate))
                    for value, rate in ((bearing.angle, bearing.angle_rate), (guide.slide, guide.slide_rate))]
    for coarse, fine in zip(gaps[1e-3], gaps[5e-4]):
        assert coarse <= 1e-4
        assert abs(np.log2(coarse / fine) - 2.0) <= 0.2


def test_reactions_by_joint_name_and_sensors_after_loading(crank, tmp_path):
    system, runs = crank
    sol = runs[1e-3]
    bearing = next(e for e in system.elements if getattr(e, "name", None) == "crank bearing")
    by_object = cs.joint_reactions(system, sol, bearing)
    by_view = sol.joint("crank bearing").reaction()
    np.testing.assert_array_equal(by_view.force_b, by_object.force_b)
    np.testing.assert_array_equal(by_view.torque_a, by_object.torque_a)
    sol.save(tmp_path / "run.npz")
    loaded = cs.Solution.load(tmp_path / "run.npz")
    np.testing.assert_array_equal(loaded.joint("guide").slide, sol.joint("guide").slide)
    with pytest.raises(AttributeError, match="loaded from a file"):
        loaded.joint("guide").reaction()


def test_body_point_accelerations_of_the_steady_precession():
    """The heavy top's centre of mass circles at Ω: a = −Ω² ρ (ρ its distance from the vertical
    axis), at every node including the first and last, converging as Δt²."""
    top = problems.HeavyTop()
    errors = []
    for dt in (1e-3, 5e-4):
        sol = cs.simulate(top.system(), 0.1, dt)
        point = sol[next(iter(sol.parts))].point()
        rho = point.position * [1.0, 1.0, 0.0]
        exact = -top.omega_p**2 * rho
        errors.append(np.max(np.abs(point.acceleration - exact)) / np.max(np.abs(exact)))
        np.testing.assert_allclose(point.position, sol[next(iter(sol.parts))].position, rtol=0, atol=0)
    assert errors[0] <= 1e-2
    assert abs(np.log2(errors[0] / errors[1]) - 2.0) <= 0.2, errors


def test_euler_angles_in_degrees_in_and_out(crank):
    """``degrees=True`` gives the same body as radians; a part's Euler angles rebuild its rotation."""
    from scipy.spatial.transform import Rotation

    in_degrees = cs.RigidBody("a", 1.0, (1.0, 2.0, 3.0), euler=("ZXZ", (30.0, 45.0, 60.0)), degrees=True)
    in_radians = cs.RigidBody("a", 1.0, (1.0, 2.0, 3.0), euler=("ZXZ", np.radians((30.0, 45.0, 60.0))))
    np.testing.assert_allclose(in_degrees.rotation, in_radians.rotation, rtol=0, atol=1e-15)
    part = crank[1][1e-3]["rod"]
    for degrees in (False, True):
        angles = part.euler("ZYX", degrees=degrees)
        np.testing.assert_allclose(Rotation.from_euler("ZYX", angles, degrees=degrees).as_matrix(), part.rotation,
                                   rtol=0, atol=1e-12)
    np.testing.assert_allclose(part.euler("ZYX", degrees=True), np.degrees(part.euler("ZYX")), rtol=1e-14, atol=0)


def test_a_joint_angle_counts_turns_between_nodes_saved_far_apart():
    """A body spinning at 10 rad/s on a hinge, adaptive steps saved every 0.5 s (5 rad between
    nodes): the sensor's angle counts the turns as the tracked coordinate of the damper on it does
    (before: np.unwrap took each turn below π and read −13.0 rad for +49.8 at t = 5 s)."""
    w, d = 10.0, 0.4
    body = cs.RigidBody("b", mass=2.0, inertia=(0.1, 0.2, 0.3), position=[d, 0, 0], velocity=[0, w * d, 0],
                        angular_velocity=[0, 0, w])
    hinge = cs.Revolute(cs.ground, body, at=(0, 0, 0), axis=(0, 0, 1), name="hinge")
    system = cs.System([body, hinge, cs.JointSpringDamper(hinge, 0.0, 1e-3, name="damper")])
    sol = cs.simulate(system, 5.0, "adaptive", rtol=1e-6, atol=1e-9, saveat=np.arange(1, 11) * 0.5)
    np.testing.assert_allclose(sol.joint("hinge").angle, sol.coordinates["damper"], rtol=0, atol=1e-9)
    assert sol.joint("hinge").angle[-1] > 45.0


def test_rotation_conversions_agree_with_scipy():
    """conserve's own Euler, quaternion and rotation-vector conversions (conserve.kinematics.rotations,
    without scipy.spatial's import cost) equal scipy's Rotation to round-off, for every kind of
    Euler sequence (intrinsic and extrinsic, proper and Tait–Bryan, one to three axes), random
    rotations, the half turns (w = 0: the canonical sign) and tiny rotation vectors."""
    from scipy.spatial.transform import Rotation

    from conserve.kinematics.rotations import (euler_to_rotation, quaternion_to_rotation,
                                               rotation_to_quaternion, rotation_vector_to_rotation)

    rng = np.random.default_rng(3)
    for seq in ("X", "z", "XY", "zx", "ZXZ", "XYZ", "zyx", "ZYX", "xzx", "YXY", "yzy"):
        for angles in rng.uniform(-4.0, 4.0, (20, len(seq))):
            np.testing.assert_allclose(euler_to_rotation(seq, angles), Rotation.from_euler(seq, angles).as_matrix(),
                                       rtol=0, atol=2e-15)
    rotations = Rotation.random(500, random_state=4)
    half_turns = Rotation.from_rotvec(np.pi * np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [0.6, -0.8, 0]]))
    for r in (rotations, half_turns):
        q = r.as_quat(canonical=True, scalar_first=True)
        np.testing.assert_allclose(rotation_to_quaternion(r.as_matrix()), q, rtol=0, atol=1e-15)
        np.testing.assert_allclose(quaternion_to_rotation(q), r.as_matrix(), rtol=0, atol=2e-15)
    for rotvec in (*rng.normal(size=(50, 3)), [1e-9, -2e-9, 0.5e-9], [0.0, 0.0, 0.0]):
        np.testing.assert_allclose(rotation_vector_to_rotation(rotvec), Rotation.from_rotvec(rotvec).as_matrix(),
                                   rtol=0, atol=2e-15)
    for bad in ("XQ", "xYz", "XX", "XYZX", ""):
        with pytest.raises(ValueError):
            euler_to_rotation(bad, np.zeros(max(len(bad), 1)))
