"""Every force element: exact discrete energy balance E_{n+1} − E_n = W_n − D_n, dampers never
add energy, and momentum is conserved where the element is internal or symmetric."""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import relative_drift

import conserve as cs
from conserve.model.custom import UserConstraint, UserPotential

X_HINGE, AXIS = np.array([0.6, 0.0, 0.0]), np.array([0.0, 0.3, 1.0]) / np.hypot(0.3, 1.0)


def pair(relative_rate=6.0, b_position=(1.2, 0.1, 0.0)):
    """Body b moving relative to a at `relative_rate` about AXIS through X_HINGE, a tumbling."""
    wa, va = np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.0, -0.05])
    a = cs.RigidBody("a", 3.0, (0.4, 0.5, 0.6), velocity=va, angular_velocity=wa)
    wb = wa + relative_rate * AXIS
    xb = np.array(b_position)
    vb = va + np.cross(wa, X_HINGE) + np.cross(wb, xb - X_HINGE)
    b = cs.RigidBody("b", 1.0, (0.1, 0.2, 0.25), position=xb, euler=("XYZ", (0.2, -0.1, 0.3)),
                     velocity=vb, angular_velocity=wb)
    return a, b


def check_balance(sol, rtol=1e-10):
    scale = np.max(np.abs(sol.energy.total)) + np.max(np.abs(sol.energy.kinetic))
    step_error = np.diff(sol.energy.total) - (sol.work.sum(axis=1) - sol.dissipation.sum(axis=1))
    assert np.max(np.abs(step_error)) <= 1e-13 * scale * 10  # per step: round-off
    assert np.max(np.abs(sol.energy_balance_error)) <= rtol * scale
    assert np.all(sol.dissipation >= 0.0)


def check_momenta(sol):
    J, L = sol.angular_momentum, sol.linear_momentum
    assert np.max(np.abs(J - J[0])) <= 1e-10 * np.linalg.norm(J[0])
    assert np.max(np.abs(L - L[0])) <= 1e-10 * np.linalg.norm(L[0])


def test_rotational_spring_damper_winds_past_pi():
    a, b = pair(relative_rate=25.0, b_position=X_HINGE + 0.3 * AXIS)  # b spins about its own axis
    hinge = cs.Revolute(a, b, at=X_HINGE, axis=AXIS, name="hinge")
    spring = cs.JointSpringDamper(hinge, stiffness=0.05, damping=0.002, name="torsion")
    sol = cs.simulate(cs.System([a, b, hinge, spring]), t_end=4.0, dt=5e-3)
    angle = sol.coordinates["torsion"]
    assert np.max(np.abs(angle)) > 6 * np.pi  # several turns: the energy knows the winding
    check_balance(sol)
    check_momenta(sol)
    D = sol.dissipation_by_element["torsion"]
    assert D.sum() > 1e-3 * sol.energy.total[0]  # the damper really works
    # energy never increases for a passive system
    assert np.all(np.diff(sol.energy.total) <= 1e-13 * sol.energy.total[0])


def test_revolute_motor_is_internal():
    a, b = pair()
    hinge = cs.Revolute(a, b, at=X_HINGE, axis=AXIS, name="hinge")
    motor = cs.JointMotor(hinge, lambda t, joint: 0.5 * jnp.sin(3 * t) - 0.05 * joint.rate, name="motor")
    sol = cs.simulate(cs.System([a, b, hinge, motor]), t_end=3.0, dt=5e-3)
    W = sol.work_by_element["motor"]
    assert np.abs(W).sum() > 1e-2 * sol.energy.total[0]
    check_balance(sol)
    check_momenta(sol)


def test_prismatic_motor_and_spring():
    a, b = pair(relative_rate=0.0, b_position=(1.0, 0.0, 0.0))
    b.velocity = b.velocity + 0.4 * AXIS  # sliding along the axis
    slider = cs.Prismatic(a, b, at=X_HINGE, axis=AXIS, name="slider")
    push = cs.JointMotor(slider, lambda t, joint: 2.0 * jnp.cos(2 * t), name="push")
    spring = cs.JointSpringDamper(slider, stiffness=5.0, damping=0.3, name="spring")
    sol = cs.simulate(cs.System([a, b, slider, push, spring]), t_end=3.0, dt=5e-3)
    assert np.ptp(sol.coordinates["push"]) > 0.05
    np.testing.assert_array_equal(sol.coordinates["push"], sol.coordinates["spring"])
    check_balance(sol)
    check_momenta(sol)


def test_translational_spring_damper_between_free_bodies():
    a, b = pair(relative_rate=2.0)
    spring = cs.SpringDamper(a, b, points=([0.2, 0.1, 0.0], [1.3, 0.2, 0.1]), stiffness=40.0, damping=0.5,
                             rest_length=0.8, name="spring")
    sol = cs.simulate(cs.System([a, b, spring]), t_end=3.0, dt=2e-3)
    assert np.ptp(sol.coordinates["spring"]) > 0.05
    check_balance(sol)
    check_momenta(sol)


def test_point_force_and_torque_do_their_discrete_work():
    body = cs.RigidBody("body", 2.0, (0.3, 0.4, 0.5), angular_velocity=(1.0, 2.0, 0.5))
    push = cs.Force(body, force=lambda t, state: jnp.array([jnp.sin(t), 0.0, 1.0]), at_body=(0.1, 0.2, 0.0),
                    frame="body", name="push")
    brake = cs.Torque(body, lambda t, s: -0.1 * s.angular_velocity, name="brake")
    sol = cs.simulate(cs.System([body, push, brake]), t_end=4.0, dt=1e-2)
    check_balance(sol)
    assert sol.work_by_element["brake"].sum() < 0 < sol.work_by_element["push"].sum()
    # the linear momentum changes by the impulse of the force: ΔL = Σ h F̄ (force in body axes)
    assert np.linalg.norm(sol.linear_momentum[-1]) > 0.5


def test_central_gravity_keeps_the_orbit_integrals():
    sat = cs.RigidBody("sat", 1.0, (0.1, 0.2, 0.25), position=(1.0, 0.0, 0.0), velocity=(0.0, 1.1, 0.1),
                       angular_velocity=(0.5, 0.1, 2.0))
    sol = cs.simulate(cs.System([sat, cs.CentralGravity(mu=1.0)]), t_end=20.0, dt=1e-2)
    assert relative_drift(sol.energy.total) <= 1e-10
    J = sol.angular_momentum
    assert np.max(np.abs(J - J[0])) <= 1e-10 * np.linalg.norm(J[0])
    r = np.linalg.norm(sol["sat"].position, axis=1)
    assert np.ptp(r) > 0.1  # an eccentric orbit, not a circle


def test_user_potential_from_invariants_conserves_momentum():
    """Two tethers of one pair of functions (one kind) between the same bodies."""
    a, b = pair(relative_rate=1.0)

    def invariants(fa, fb):
        return jnp.sum((fa.point([0.2, 0, 0]) - fb.point([0, 0.1, 0])) ** 2)

    def energy(pi):
        return 10.0 * (jnp.sqrt(pi[0]) - 0.7) ** 2

    tethers = [cs.Potential(parts, invariants=invariants, energy=energy, name=f"tether{i}")
               for i, parts in enumerate(([a, b], [b, a]))]
    assembly = cs.System([a, b, *tethers]).assemble()
    assert sum(isinstance(k, UserPotential) for k in assembly.model.potential_kinds) == 1
    sol = cs.simulate(assembly, t_end=3.0, dt=5e-3)
    assert relative_drift(sol.energy.total) <= 1e-10
    check_momenta(sol)
    assert np.ptp(sol.energy.potential) > 1e-3


@pytest.mark.parametrize("with_invariants", [False, True])
def test_user_constraint_keeps_energy(with_invariants):
    """Beads on spheres of radius 1 written as a non-quadratic constraint, two elements of one
    pair of functions: one kind (one copy of code in the step)."""
    beads = [cs.PointMass(f"bead{i}", 1.0 + i, position=x, velocity=v)
             for i, (x, v) in enumerate((((1.0, 0.0, 0.0), (0.0, 1.0, 0.5)), ((0.0, 0.6, 0.8), (0.3, 0.4, -0.3))))]
    if with_invariants:  # g = √π − 1 with π = |x|²: energy and momentum about the origin exact
        def residual(pi):
            return jnp.sqrt(pi[0]) - 1.0

        def invariants(f):
            return jnp.sum(f.position**2)
    else:  # g = |x|⁴ − 1, discrete gradient in the coordinates: energy exact
        def residual(f):
            return jnp.sum(f.position**2) ** 2 - 1.0
        invariants = None
    spheres = [cs.Constraint([b], residual=residual, rows=1, invariants=invariants, name=f"sphere{i}")
               for i, b in enumerate(beads)]
    assembly = cs.System([*beads, *spheres, cs.Gravity()]).assemble()
    assert sum(isinstance(k, UserConstraint) for k in assembly.model.constraint_kinds) == 1
    sol = cs.simulate(assembly, t_end=3.0, dt=1e-2)
    assert relative_drift(sol.energy.total) <= 1e-10
    assert np.max(sol.constraint_residual) <= 1e-10
    if with_invariants:
        assert relative_drift(sol.angular_momentum[:, 2]) <= 1e-10


def _constant(c, shape=()):
    """A law of a constant c (a factory: equal constants make laws that compute the same)."""
    if shape:
        return lambda t, state: jnp.array([0.0, 0.0, c])
    return lambda t, joint: c


def test_elements_with_laws_of_their_own_share_one_kind_and_each_runs_its_own():
    """Loads and joint motors whose laws differ (closures with constants of their own, in any
    order) are one kind each, so the compiled step does not grow by a copy per element, and each
    element runs its own law: point masses pushed by constant forces c fall as z = c t²/(2m)
    (exact: the midpoint rule integrates a constant force exactly), and wheels on hinges driven
    by constant torques c turn by c t²/(2J) (to the scheme's O(h²))."""
    pushes = (1.0, 2.0, 1.0, 3.0)  # three distinct laws, one used twice (not next to each other)
    masses = [cs.PointMass(f"m{i}", mass=0.5 + i, position=(i, 0.0, 0.0)) for i in range(4)]
    loads = [cs.Force(m, force=_constant(c, (3,)), name=f"push{i}") for i, (m, c) in enumerate(zip(masses, pushes))]
    torques = (0.5, -1.0, 0.5)
    wheels = [cs.RigidBody(f"w{i}", 1.0, (0.1, 0.1, 0.2), position=(0.0, 2.0 * i, 1.0)) for i in range(3)]
    hinges = [cs.Revolute(cs.ground, w, at=w.position, axis=(0, 0, 1), name=f"hinge{i}") for i, w in enumerate(wheels)]
    motors = [cs.JointMotor(h, _constant(c), name=f"motor{i}") for i, (h, c) in enumerate(zip(hinges, torques))]
    assembly = cs.System([*masses, *loads, *wheels, *hinges, *motors]).assemble()
    model = assembly.model
    assert len(model.load_kinds) == 1 and len(model.load_kinds[0].force_fn.laws) == 3
    assert len(model.coordinate_kinds) == 1 and len(model.coordinate_kinds[0].motor.laws) == 2
    T = 0.5
    sol = cs.simulate(assembly, t_end=T, dt=1e-2)
    for i, (m, c) in enumerate(zip(masses, pushes)):
        np.testing.assert_allclose(sol[m.name].position[-1, 2], c * T**2 / (2 * m.mass), rtol=1e-12)
    for motor, c in zip(motors, torques):
        np.testing.assert_allclose(sol.coordinates[motor.name][-1], c * T**2 / (2 * 0.2), rtol=1e-3)
    check_balance(sol)


def test_uniform_gravity_discrete_gradient_is_exact_for_any_step():
    """U = −m π is linear: its discrete gradient is −m however small Δπ, with a zero derivative
    (Gonzalez's generic quotient divided round-off by |Δπ|² there, and Newton's Jacobian blew up)."""
    import jax

    from conserve.model.forces import UniformGravity

    p, a = {"mass": np.float64(2.0)}, np.array([3.0])
    for step in (0.0, 1e-13, 3e-6, 1.0):
        b = a + step
        assert np.array_equal(np.asarray(UniformGravity().discrete_gradient(p, a, b)), [-2.0])
        assert np.all(np.asarray(jax.jacfwd(lambda y: UniformGravity().discrete_gradient(p, a, y))(b)) == 0)
