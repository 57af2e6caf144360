"""conserve.control.attitude: rotation parametrisations against scipy, the attitude errors' small- and large-angle
behaviour, the reaction wheel allocation's algebra, and the PD/PID law closing the loop on a rigid body."""

import conserve  # noqa: F401  (float64)
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from conserve.control.attitude import (
    WheelCluster,
    attitude_error,
    attitude_pd,
    hat,
    mrp_from_quaternion,
    mrp_from_rotation,
    quaternion_conjugate,
    quaternion_from_rotation,
    quaternion_multiply,
    rate_error,
    rotation_from_axis_angle,
    rotation_from_quaternion,
    vee,
)

KINDS = ("rotation", "quaternion", "mrp")
#: e(θ n) = (θ + c θ³ + O(θ⁵)) n for each kind: sin θ, 2 sin(θ/2), 4 tan(θ/4)
CUBIC = {"rotation": -1 / 6, "quaternion": -1 / 24, "mrp": 1 / 48}
MAGNITUDE = {"rotation": np.sin, "quaternion": lambda a: 2 * np.sin(a / 2), "mrp": lambda a: 4 * np.tan(a / 4)}
J = np.diag([10.0, 12.0, 8.0])  # kg m²
BETA = np.radians(54.74)  # the pyramid's wheel elevation


def unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def pyramid():
    phi = np.radians([0.0, 90.0, 180.0, 270.0])
    return WheelCluster(np.stack([np.cos(BETA) * np.cos(phi), np.cos(BETA) * np.sin(phi), np.full(4, np.sin(BETA))], 1))


def near_half_turns(rng):
    """Rotations by π and just below about random and coordinate axes (Shepperd's hard cases)."""
    axes = np.concatenate([unit(rng.normal(size=(4, 3))), np.eye(3), unit(np.array([[1.0, 1.0, 0.0]]))])
    return np.concatenate([Rotation.from_rotvec(axes * a).as_matrix() for a in (np.pi, np.pi - 1e-7, np.pi - 1e-3)])


def test_hat_vee_inverse():
    rng = np.random.default_rng(0)
    w, x, W = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 3, 3))
    np.testing.assert_allclose(vee(hat(w)), w, rtol=0, atol=1e-15)
    np.testing.assert_allclose(hat(vee(W)), 0.5 * (W - np.swapaxes(W, -1, -2)), rtol=0, atol=1e-15)
    np.testing.assert_allclose((hat(w) @ x[..., None])[..., 0], np.cross(w, x), rtol=0, atol=1e-14)


def test_rotation_from_axis_angle():
    rng = np.random.default_rng(1)
    axis = 3.0 * rng.normal(size=(8, 3))  # not normalised
    angle = np.array([0.0, 1e-9, 0.3, -1.2, 2.5, np.pi, 4.0, -6.0])
    R = np.asarray(rotation_from_axis_angle(axis, angle))
    np.testing.assert_allclose(np.swapaxes(R, -1, -2) @ R, np.broadcast_to(np.eye(3), R.shape), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)
    np.testing.assert_allclose((R @ unit(axis)[..., None])[..., 0], unit(axis), atol=1e-14)
    np.testing.assert_allclose(R, Rotation.from_rotvec(unit(axis) * angle[:, None]).as_matrix(), atol=1e-14)


def test_axis_angle_derivative_at_zero_angle():
    n = unit(np.array([1.0, -2.0, 0.5]))
    dR = jax.jacfwd(lambda a: rotation_from_axis_angle(n, a))(0.0)
    np.testing.assert_allclose(dR, hat(n), rtol=0, atol=1e-15)


def test_quaternion_round_trips_against_scipy():
    rng = np.random.default_rng(2)
    R = np.concatenate([Rotation.random(40, random_state=3).as_matrix(), near_half_turns(rng)])
    q = np.asarray(quaternion_from_rotation(R))
    reference = Rotation.from_matrix(R).as_quat()[:, [3, 0, 1, 2]]  # scipy: scalar last
    sign = np.sign(np.sum(q * reference, axis=1))[:, None]  # q and −q are the same rotation
    np.testing.assert_allclose(q, sign * reference, atol=1e-12)
    assert np.all(q[:, 0] >= 0)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-15)
    np.testing.assert_allclose(rotation_from_quaternion(q), R, atol=2e-15)


def test_quaternion_product_is_composition():
    p, q = Rotation.random(2, random_state=4).as_quat()[:, [3, 0, 1, 2]]
    np.testing.assert_allclose(rotation_from_quaternion(quaternion_multiply(p, q)),
                               rotation_from_quaternion(p) @ rotation_from_quaternion(q), atol=1e-15)
    np.testing.assert_allclose(quaternion_multiply(quaternion_conjugate(q), q), [1.0, 0.0, 0.0, 0.0], atol=1e-15)


def test_mrp_short_set():
    rng = np.random.default_rng(5)
    axis = unit(rng.normal(size=(6, 3)))
    angle = np.array([0.1, 1.0, 2.0, 3.0, np.pi, 5.0])  # the last one is 5 − 2π about −n
    R = Rotation.from_rotvec(axis * angle[:, None]).as_matrix()
    sigma = np.asarray(mrp_from_rotation(R))
    assert np.all(np.linalg.norm(sigma, axis=1) <= 1 + 1e-15)
    short = np.where(angle <= np.pi, angle, angle - 2 * np.pi)[:, None]
    np.testing.assert_allclose(sigma, np.tan(short / 4) * axis, atol=1e-14)
    q = Rotation.from_matrix(R).as_quat()[:, [3, 0, 1, 2]]
    np.testing.assert_allclose(mrp_from_quaternion(-q), sigma, atol=1e-14)  # either sign of q


@pytest.mark.parametrize("kind", KINDS)
def test_attitude_error_is_the_rotation_vector_to_third_order(kind):
    rng = np.random.default_rng(6)
    R_target = Rotation.random(random_state=7).as_matrix()
    n = unit(rng.normal(size=3))
    angle = np.array([1e-3, 1e-2])[:, None]
    R = R_target @ np.asarray(rotation_from_axis_angle(n, angle[:, 0]))  # the error R_targetᵀ R: θ about n (body)
    e = np.asarray(attitude_error(R, R_target, kind))
    assert np.max(np.abs(e[0] - angle[0] * n)) < 1e-9
    np.testing.assert_allclose((e[1] - angle[1] * n) / angle[1] ** 3, CUBIC[kind] * n, rtol=0,
                               atol=2e-3 * abs(CUBIC[kind]))  # the next term: O(θ²) relative
    np.testing.assert_allclose(attitude_error(R_target, R_target, kind), np.zeros(3), rtol=0, atol=1e-15)


@pytest.mark.parametrize("kind", KINDS)
def test_attitude_error_along_the_axis_at_100_degrees(kind):
    R_target = Rotation.random(random_state=8).as_matrix()
    n, angle = unit(np.array([0.3, -0.8, 0.5])), np.radians(100.0)
    e = np.asarray(attitude_error(R_target @ np.asarray(rotation_from_axis_angle(n, angle)), R_target, kind))
    np.testing.assert_allclose(e, MAGNITUDE[kind](angle) * n, rtol=0, atol=1e-14)


@pytest.mark.parametrize("kind", KINDS)
def test_attitude_error_derivative_at_zero_error(kind):
    R_target = Rotation.random(random_state=9).as_matrix()
    n = unit(np.array([1.0, 2.0, -2.0]))
    along = jax.grad(lambda a: attitude_error(R_target @ rotation_from_axis_angle(n, a), R_target, kind) @ n)(0.0)
    assert np.isfinite(along) and abs(along - 1.0) < 1e-14  # d(θ + O(θ³))/dθ


def test_rate_error_of_a_rotating_target():
    R, R_target = Rotation.random(2, random_state=10).as_matrix()
    omega, omega_target = np.array([0.1, -0.2, 0.3]), np.array([0.05, 0.0, -0.1])
    # the same angular velocities in inertial axes give no error
    np.testing.assert_allclose(rate_error(R.T @ R_target @ omega_target, R, R_target, omega_target), 0.0, atol=1e-16)
    np.testing.assert_allclose(rate_error(omega, R, R_target), omega, rtol=0, atol=0)


def test_wheel_allocation_pyramid():
    wheels, rng = pyramid(), np.random.default_rng(11)
    A, N = np.asarray(wheels.matrix), np.asarray(wheels.null_space)
    np.testing.assert_allclose(np.linalg.norm(A, axis=0), 1.0, atol=1e-15)
    np.testing.assert_allclose(N @ N, N, atol=1e-15)
    np.testing.assert_allclose(N, N.T, atol=1e-15)
    np.testing.assert_allclose(A @ N, 0.0, atol=1e-15)
    assert abs(np.trace(N) - 1.0) < 1e-14  # 4 wheels, 3 torques: a one-dimensional null space
    for torque in rng.normal(size=(5, 3)):
        u = np.asarray(wheels.allocate(torque))
        np.testing.assert_allclose(-A @ u, torque, rtol=0, atol=1e-14)
        momentum = rng.normal(size=4)
        managed = np.asarray(wheels.allocate(torque, momentum, momentum_target=0.5, gain=0.3))
        np.testing.assert_allclose(managed - u, -0.3 * N @ (momentum - 0.5), rtol=0, atol=1e-14)
        np.testing.assert_allclose(-A @ managed, torque, rtol=0, atol=1e-14)
        other = u + N @ rng.normal(size=4)  # every other solution: u plus a null vector, orthogonal to u
        np.testing.assert_allclose(-A @ other, torque, rtol=0, atol=1e-14)
        assert np.linalg.norm(other) > np.linalg.norm(u)
        np.testing.assert_allclose(other @ other, u @ u + (other - u) @ (other - u), rtol=1e-13)


def test_wheel_cluster_is_a_pytree_and_scale_free():
    wheels, torque = pyramid(), np.array([0.1, -0.05, 0.02])
    scaled = WheelCluster(3.0 * np.asarray(wheels.axes))
    np.testing.assert_allclose(jax.jit(WheelCluster.allocate)(scaled, torque), wheels.allocate(torque), atol=1e-15)


def test_wheel_axes_must_span_3d():
    with pytest.raises(ValueError, match="rank 2"):
        WheelCluster([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [1.0, -1.0, 0.0]])
    with pytest.raises(ValueError, match="shape"):
        WheelCluster([1.0, 0.0, 0.0])


def rigid_body_rhs(law, wheels):
    """Euler's equations of a bus (inertia J, body axes) with reaction wheels of axial momenta h (wheel k's
    motor torque u_k: ḣ_k = u_k, on the bus −u_k a_k), quaternion kinematics; without wheels the commands
    are the body torque."""
    A = np.zeros((3, 0)) if wheels is None else np.asarray(wheels.matrix)

    def rhs(t, x):
        q, omega, h = x
        readings = {"attitude": rotation_from_quaternion(q / jnp.linalg.norm(q)), "rate": omega, "h": h}
        commands, _ = law(t, readings, jnp.zeros(3))
        u, torque = (jnp.zeros(0), commands) if wheels is None else (commands, -A @ commands)
        omega_dot = jnp.linalg.solve(J, torque - jnp.cross(omega, J @ omega + A @ h))
        return 0.5 * quaternion_multiply(q, jnp.concatenate([jnp.zeros(1), omega])), omega_dot, u

    return rhs, A


def rk4(rhs, x, dt, steps):
    def step(x, t):
        k1 = rhs(t, x)
        k2 = rhs(t + dt / 2, jax.tree.map(lambda a, k: a + dt / 2 * k, x, k1))
        k3 = rhs(t + dt / 2, jax.tree.map(lambda a, k: a + dt / 2 * k, x, k2))
        k4 = rhs(t + dt, jax.tree.map(lambda a, k: a + dt * k, x, k3))
        x = jax.tree.map(lambda a, b, c, d, e: a + dt / 6 * (b + 2 * c + 2 * d + e), x, k1, k2, k3, k4)
        return x, x

    return jax.jit(lambda x: jax.lax.scan(step, x, dt * jnp.arange(steps)))(x)


@pytest.mark.parametrize("kind, wheels", [("rotation", None), ("quaternion", None), ("mrp", pyramid())])
def test_pd_brings_a_rigid_body_to_the_target(kind, wheels):
    R_target = Rotation.from_euler("ZYX", [40.0, -20.0, 10.0], degrees=True).as_matrix()
    law = attitude_pd(R_target, kp=2.0, kd=8.0, kind=kind, wheels=wheels, wheel_momentum="h", momentum_gain=0.2)
    rhs, A = rigid_body_rhs(law, wheels)
    R0 = R_target @ np.asarray(rotation_from_axis_angle([1.0, 2.0, 3.0], np.radians(30.0)))
    omega0 = np.array([0.01, -0.02, 0.015])
    h0 = np.array([0.3, -0.1, 0.2, 0.05])[:A.shape[1]]  # N m s
    x0 = (jnp.asarray(Rotation.from_matrix(R0).as_quat()[[3, 0, 1, 2]]), jnp.asarray(omega0), jnp.asarray(h0))
    (q, omega, h), history = rk4(rhs, x0, dt=0.05, steps=1200)  # 60 s
    R = np.asarray(rotation_from_quaternion(q / jnp.linalg.norm(q)))
    assert Rotation.from_matrix(R_target.T @ R).magnitude() < 1e-3
    assert np.linalg.norm(omega) < 1e-3
    if wheels is not None:  # the wheels took the bus's momentum: R (J ω + A h) is constant
        momenta = jax.vmap(rotation_from_quaternion)(history[0]) @ (history[1] @ J + history[2] @ A.T)[..., None]
        H0 = R0 @ (J @ omega0 + A @ h0)
        np.testing.assert_allclose(momenta[..., 0], np.broadcast_to(H0, (1200, 3)), rtol=0, atol=1e-9)
        N = np.asarray(wheels.null_space)  # N h obeys d(N h)/dt = −0.2 N h, whatever the bus torque
        assert np.linalg.norm(N @ h0) > 0.1
        np.testing.assert_allclose(N @ h, np.exp(-0.2 * 60.0) * N @ h0, rtol=0, atol=1e-10)


def off_target():
    R_target = Rotation.from_rotvec([0.2, 0.1, -0.3]).as_matrix()
    R = R_target @ Rotation.from_rotvec([0.05, -0.1, 0.08]).as_matrix()
    return R_target, {"attitude": jnp.asarray(R), "rate": jnp.array([0.01, 0.02, -0.03])}


def test_pid_integrates_the_error_and_stops_when_saturated():
    R_target, readings = off_target()
    e = attitude_error(readings["attitude"], R_target)
    z = jnp.array([0.3, -0.2, 0.1])
    law = attitude_pd(R_target, kp=2.0, kd=np.array([8.0, 9.0, 7.0]), ki=0.5, period=0.1)
    commands, new_z = law(0.0, readings, z)
    np.testing.assert_allclose(new_z - z, 0.1 * e, rtol=0, atol=1e-16)
    np.testing.assert_allclose(commands, -2.0 * e - np.array([8.0, 9.0, 7.0]) * readings["rate"] - 0.5 * z,
                               rtol=0, atol=1e-15)
    clipped = attitude_pd(R_target, kp=2.0, kd=8.0, ki=0.5, period=0.1, limit=0.05)
    commands, new_z = clipped(0.0, readings, z)
    assert np.max(np.abs(commands)) == 0.05
    np.testing.assert_array_equal(new_z, z)  # conditional integration: no command saturated, no integration
    for period in (None, 0.0, -0.1):
        with pytest.raises(ValueError, match="period"):
            attitude_pd(R_target, kp=2.0, kd=8.0, ki=0.5, period=period)


def test_pd_gain_forms_and_parameters():
    R_target, readings = off_target()
    e = attitude_error(readings["attitude"], R_target, "mrp")
    by_vector = attitude_pd(R_target, np.array([1.0, 2.0, 3.0]), 4.0, kind="mrp")(0.0, readings, jnp.zeros(3))[0]
    by_matrix = attitude_pd(R_target, np.diag([1.0, 2.0, 3.0]), 4.0 * np.eye(3), kind="mrp")(0.0, readings,
                                                                                              jnp.zeros(3))[0]
    np.testing.assert_allclose(by_matrix, by_vector, rtol=0, atol=1e-16)

    class Gain:  # a conserve Parameter's interface: read at each call
        value = 1.0

    kp = Gain()
    law = attitude_pd(R_target, kp, 0.0, kind="mrp")
    kp.value = 3.0
    np.testing.assert_allclose(law(0.0, readings, jnp.zeros(3))[0], -3.0 * e, rtol=0, atol=1e-16)


def test_pd_through_wheels_gives_the_body_torque():
    R_target, readings = off_target()
    wheels = pyramid()
    h = jnp.array([0.2, -0.1, 0.4, 0.3])
    readings = {**readings, "h": h, **{f"h{k}": h[k] for k in range(4)}}
    body = attitude_pd(lambda t: R_target, 2.0, 8.0)(0.0, readings, jnp.zeros(3))[0]
    u = {}
    for momentum in (None, "h", ("h0", "h1", "h2", "h3")):
        law = attitude_pd(lambda t: R_target, 2.0, 8.0, wheels=wheels, wheel_momentum=momentum, momentum_gain=0.5)
        u[momentum] = law(0.0, readings, jnp.zeros(3))[0]
        assert u[momentum].shape == (4,)
        np.testing.assert_allclose(-wheels.matrix @ u[momentum], body, rtol=0, atol=1e-15)
    np.testing.assert_allclose(u["h"] - u[None], -0.5 * wheels.null_space @ h, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(u[("h0", "h1", "h2", "h3")], u["h"])


def test_pd_under_jit_and_grad():
    R_target, readings = off_target()
    e = attitude_error(readings["attitude"], R_target)

    def first_command(kp):
        return attitude_pd(R_target, kp, 8.0, ki=0.5, period=0.1, limit=10.0)(0.0, readings, jnp.zeros(3))[0][0]

    value, slope = jax.jit(jax.value_and_grad(first_command))(2.0)
    assert np.isfinite(slope) and abs(slope + e[0]) < 1e-15  # ∂τ/∂kp = −e
    assert abs(value - first_command(2.0)) < 1e-15
