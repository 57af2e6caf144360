"""Initial conditions in joint coordinates (``cs.set_joints``) and projected initial velocities
(``assemble(project_velocities=True)``), issue 18: a 5-link chain given by joint angles and
rates is the same chain given by its bodies' states; projections report what they change."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve import problems
from conserve.errors import InconsistentInitialState, ModelError

L, N = 0.5, 5
ANGLES = np.array([0.4, -0.7, 1.1, 0.3, -0.5])  # relative joint angles, rad
RATES = np.array([0.8, -1.5, 2.0, 0.6, -1.0])  # rad/s


def rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def chain(angles=np.zeros(N), rates=np.zeros(N), spring=False):
    """A planar chain of N bars hinged about e3, the first to the ground at the origin, posed by
    its bodies: relative angles and rates give each bar's orientation, centre and velocities."""
    absolute, omega = np.cumsum(angles), np.cumsum(rates)
    parts, joints, start, v_start = [], [], np.zeros(3), np.zeros(3)
    for k in range(N):
        e = rz(absolute[k])[:, 0]
        w = np.array([0.0, 0.0, omega[k]])
        centre = start + 0.5 * L * e
        bar = cs.RigidBody(f"bar{k}", mass=1.0 + 0.1 * k, inertia=(1e-3, 0.02, 0.02), position=centre,
                           orientation=rz(absolute[k]), velocity=v_start + np.cross(w, centre - start),
                           angular_velocity=w)
        joints.append(cs.Revolute(parts[-1] if parts else cs.ground, bar, at=start, axis=[0, 0, 1.0], name=f"j{k}"))
        parts.append(bar)
        start, v_start = start + L * e, v_start + np.cross(w, L * e)
    extra = [cs.JointSpringDamper(joints[2], stiffness=3.0, name="spring")] if spring else []
    return cs.System(parts + joints + extra + [cs.Gravity([0.0, -9.81, 0.0])])


def test_chain_given_by_angles_is_the_chain_given_by_bodies():
    by_bodies = chain(ANGLES, RATES).assemble().initial_state
    posed = cs.set_joints(chain(), {f"j{k}": a for k, a in enumerate(ANGLES)},
                          {f"j{k}": r for k, r in enumerate(RATES)})
    np.testing.assert_allclose(posed.initial_state.q, by_bodies.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(posed.initial_state.v, by_bodies.v, rtol=0, atol=1e-12)
    # it runs, conserving
    sol = cs.simulate(posed, 0.05, 1e-3)
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * np.max(np.abs(sol.energy.total))
    for k in range(N):
        assert abs(sol.joint(f"j{k}").angle[0] - ANGLES[k]) <= 1e-12
        assert abs(sol.joint(f"j{k}").angle_rate[0] - RATES[k]) <= 1e-12


def test_joints_not_named_keep_their_rates_and_angles_count_turns():
    """Setting only j2 to 7 rad (more than a turn) on a chain built bent and moving: the other
    joints keep the build configuration's angles (0: their axes were given in world axes there)
    and all keep their rates; the spring on j2 tracks 7 rad, not 7 − 2π."""
    built = chain(ANGLES, RATES, spring=True)
    posed = cs.set_joints(built, {"j2": 7.0})
    s = np.asarray(posed.initial_state.s)
    assert abs(s[0] - 7.0) <= 1e-12
    np.testing.assert_allclose(posed.model.coordinate_values(posed.initial_state.q)[0], 7.0 - 2 * np.pi, atol=1e-12)
    sol = cs.simulate(posed, 0.002, 1e-3)
    for k in (0, 1, 3, 4):
        assert abs(sol.joint(f"j{k}").angle[0]) <= 1e-12
    assert abs(sol.joint("j2").angle[0] - (7.0 - 2 * np.pi)) <= 1e-12
    for k in range(N):
        assert abs(sol.joint(f"j{k}").angle_rate[0] - RATES[k]) <= 1e-12


def test_bad_joint_coordinates_are_refused_clearly():
    with pytest.raises(ModelError, match="no joint named 'elbow'; joints: \\['j0'"):
        cs.set_joints(chain(), {"elbow": 0.1})
    with pytest.raises(ModelError, match="'tip' \\(Spherical\\) has no angle or slide"):
        cs.set_joints(problems.HeavyTop().system(), {"tip": 0.1})
    with pytest.raises(ModelError, match="must be finite"):
        cs.set_joints(chain(), rates={"j1": np.nan})
    with pytest.raises(ModelError, match="outside its kinematic tree \\(guide: kinematic loops"):
        cs.set_joints(problems.slider_crank(), {"crank bearing": 0.2})
    with pytest.warns(UserWarning, match="'j1' angle 90 rad is more than two turns .*np.radians\\(90\\)"):
        cs.set_joints(chain(), {"j1": 90})  # 90° meant: set as given (in rad), with a warning
    # an array where one angle is expected (before: numpy's "only 0-dimensional arrays can be converted")
    with pytest.raises(ModelError, match="the angle coordinate of joint 'j1' must be one number \\(rad\\), got "
                                         "array\\(\\[0.1, 0.2\\]\\) \\(shape \\(2,\\)\\); give each joint its "
                                         "own entry"):
        cs.set_joints(chain(), {"j1": np.array([0.1, 0.2])})
    with pytest.raises(ModelError, match="the angle rate of joint 'j1' must be one number \\(rad/s\\), got '1'"):
        cs.set_joints(chain(), rates={"j1": "1"})
    # traced angles: set_joints (numbers in, an Assembly out) points to cs.pose
    with pytest.raises(ModelError, match="traced by jax .* use cs.pose\\(assembly, coordinates, rates\\)"):
        jax.grad(lambda a: cs.set_joints(chain(), {"j1": a}).initial_state.q[0])(0.1)


def test_projected_velocities_satisfy_the_joints_and_report_the_change():
    good = problems.HeavyTop().system().assemble()
    body = good.layout.parts[0]
    x_c, omega = np.asarray(body.position), np.asarray(body.angular_velocity)
    np.testing.assert_allclose(np.cross(omega, x_c), np.asarray(good.initial_state.v)[:3], atol=1e-14)
    with pytest.raises(InconsistentInitialState):
        top_system(np.zeros(3)).assemble()
    with pytest.warns(UserWarning, match="projected onto the constraints: 'top' by .* kinetic energy"):
        projected = top_system(np.zeros(3)).assemble(project_velocities=True)
    assert "projected" in projected.report()
    v = np.asarray(projected.initial_state.v).reshape(-1, 3)
    d = np.asarray(projected.initial_state.q).reshape(-1, 3)[1:]
    w = 0.5 * np.sum(np.cross(d, v[1:]), axis=0)
    np.testing.assert_allclose(v[0], np.cross(w, x_c), atol=1e-12)  # the tip stays at rest
    # the nearest velocities in the kinetic-energy norm: less energy than the inconsistent ones
    model = projected.model
    T = lambda vv: 0.5 * float(vv @ np.kron(np.asarray(model.mu), np.eye(3)) @ vv)  # noqa: E731
    raw = np.concatenate([np.zeros(3), (np.cross(omega, d)).ravel()])
    assert T(np.asarray(projected.initial_state.v)) < T(raw)
    # consistent velocities are kept as they are, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = top_system(np.cross(omega, x_c)).assemble(project_velocities=True)
    np.testing.assert_array_equal(same.initial_state.v, good.initial_state.v)


def top_system(velocity):
    """P1's top with the given centre velocity and its own orientation and angular velocity."""
    system = problems.HeavyTop().system()
    body = next(e for e in system.elements if isinstance(e, cs.RigidBody))
    new = cs.RigidBody("top", mass=body.mass, inertia=body.inertia, position=body.position,
                       orientation=body.rotation, velocity=velocity, angular_velocity=body.angular_velocity)
    return cs.System([new, cs.Spherical(new, cs.ground, at=[0, 0, 0], name="tip"), cs.Gravity([0, 0, -9.81])])



def test_pose_is_a_pure_function_of_the_joint_angles_and_rates():
    """cs.pose: from numbers, the State of set_joints; inside jax.vmap a batch of poses, each the
    one set_joints gives; inside jax.grad the derivative of the posed state, and through
    cs.trajectory (forward mode) the derivative of where the lower bar is after 30 steps, with
    respect to the initial elbow angle and rate, against central differences of the same maps."""
    assembly = problems.double_pendulum().assemble()
    angle, rate = 0.5, 1.5
    state = cs.pose(assembly, {"elbow": angle}, {"elbow": rate})
    posed = cs.set_joints(assembly, {"elbow": angle}, {"elbow": rate}).initial_state
    for field in ("q", "v", "s", "p"):
        np.testing.assert_allclose(getattr(state, field), getattr(posed, field), rtol=0, atol=1e-14)
    angles = jnp.array([0.2, angle, -1.0])
    batch = jax.vmap(lambda a: cs.pose(assembly, {"elbow": a}, {"elbow": rate}))(angles)
    for k, a in enumerate(angles):
        member = cs.set_joints(assembly, {"elbow": float(a)}, {"elbow": rate}).initial_state
        np.testing.assert_allclose(batch.q[k], member.q, rtol=0, atol=1e-13)
        np.testing.assert_allclose(batch.v[k], member.v, rtol=0, atol=1e-12)
    model, eps = assembly.model, 1e-6
    x0, directions = jnp.array([angle, rate]), np.eye(2)

    def posed_energy(x):  # reverse mode through the pose alone
        start = cs.pose(assembly, {"elbow": x[0]}, {"elbow": x[1]})
        return cs.energy(model, start).total

    central = [(posed_energy(x0 + eps * e) - posed_energy(x0 - eps * e)) / (2 * eps) for e in directions]
    np.testing.assert_allclose(jax.grad(posed_energy)(x0), central, rtol=1e-6, atol=0)

    def foot_x(x):  # the lower bar's centre, x, after 30 steps
        start = cs.pose(assembly, {"elbow": x[0]}, {"elbow": x[1]})
        return cs.trajectory(model, start, 0.0, 1e-3, 30)[0].q[-1, 12]

    along = jax.jit(lambda x, e: jax.jvp(foot_x, (x,), (e,)))  # one program: values and derivatives
    slopes = np.array([along(x0, e)[1] for e in directions])
    central = np.array([(along(x0 + eps * e, e)[0] - along(x0 - eps * e, e)[0]) / (2 * eps) for e in directions])
    np.testing.assert_allclose(slopes, central, rtol=1e-6, atol=0)
    assert np.all(np.abs(slopes) > 1e-3)  # both matter
