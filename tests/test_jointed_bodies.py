"""Body–body spherical joints and point masses: internal constraint forces conserve everything."""

import numpy as np
import pytest
from conftest import relative_drift

import conserve as cs


def tumbling_pair():
    """Two bodies and a point mass joined by ball joints, flying free without gravity."""
    a = cs.RigidBody("a", mass=2.0, inertia=(0.3, 0.4, 0.5), position=(0.0, 0.0, 0.0),
                     velocity=(0.1, 0.0, 0.0), angular_velocity=(1.0, -2.0, 3.0))
    x_b = np.array([0.0, 0.0, 1.0])
    omega_b = np.array([0.5, 4.0, 0.0])
    # b's velocity makes the joint point at (0, 0, 0.5) move as a's point there does
    v_joint = a.velocity + np.cross(a.angular_velocity, [0.0, 0.0, 0.5])
    b = cs.RigidBody("b", mass=1.0, inertia=(0.2, 0.2, 0.1), position=x_b,
                     euler=("XYZ", (0.3, -0.2, 0.1)), angular_velocity=omega_b,
                     velocity=v_joint + np.cross(omega_b, x_b - [0.0, 0.0, 0.5]))
    tip = b.position + b.rotation @ [0.0, 0.0, 0.5]
    v_tip = b.velocity + np.cross(omega_b, tip - x_b)
    bob = cs.PointMass("bob", mass=0.5, position=tip, velocity=v_tip)
    return cs.System([a, b, bob, cs.Spherical(a, b, at=(0.0, 0.0, 0.5), name="shoulder"),
                      cs.Spherical(b, bob, at=tip, name="wrist")])


def test_free_flying_chain_conserves_energy_and_all_momenta():
    sol = cs.simulate(tumbling_pair(), t_end=20.0, dt=1e-2)
    assert relative_drift(sol.energy.total) <= 1e-10
    J, L = sol.angular_momentum, sol.linear_momentum
    assert np.max(np.abs(J - J[0])) <= 1e-10 * np.linalg.norm(J[0])
    assert np.max(np.abs(L - L[0])) <= 1e-10 * np.linalg.norm(L[0])
    assert np.max(sol.constraint_residual) <= 1e-10
    # the joints really work: a's and b's joint points coincide, the bob stays at b's tip
    a_view, b_view = sol["a"], sol["b"]
    shoulder_in_b = b_view.rotation[0].T @ (np.array([0.0, 0.0, 0.5]) - b_view.position[0])
    pa = a_view.position + a_view.rotation @ [0.0, 0.0, 0.5]
    pb = b_view.position + b_view.rotation @ shoulder_in_b
    assert np.max(np.abs(pa - pb)) <= 1e-10
    tip = b_view.position + b_view.rotation @ [0.0, 0.0, 0.5]
    assert np.max(np.abs(tip - sol["bob"].position)) <= 1e-10
    # and the motion is not trivial: the bodies swing relative to each other
    cos_rel = np.einsum("ni,ni->n", sol["a"].rotation[:, :, 2], sol["b"].rotation[:, :, 2])
    assert np.ptp(cos_rel) > 0.1


def test_pendulum_with_point_mass_under_gravity():
    """Body pinned to the ground with a bob at its end: energy and J·e3 conserved."""
    omega = np.array([0.0, 0.0, 3.0])
    rod = cs.RigidBody("rod", mass=1.0, inertia=(0.08, 0.08, 0.01), position=(0.4, 0.0, 0.0),
                       euler=("Y", [np.pi / 2]),  # d3 along +e1
                       velocity=np.cross(omega, [0.4, 0.0, 0.0]), angular_velocity=omega)
    bob = cs.PointMass("bob", mass=2.0, position=(0.8, 0.0, 0.0), velocity=np.cross(omega, [0.8, 0.0, 0.0]))
    system = cs.System([rod, bob, cs.Spherical(rod, cs.ground, at=(0.0, 0.0, 0.0), name="pivot"),
                        cs.Spherical(rod, bob, at=(0.8, 0.0, 0.0), name="end"), cs.Gravity()])
    sol = cs.simulate(system, t_end=10.0, dt=5e-3)
    assert relative_drift(sol.energy.total) <= 1e-10
    assert relative_drift(sol.angular_momentum[:, 2]) <= 1e-10
    assert np.max(sol.constraint_residual) <= 1e-10
    # the bob falls well below the pivot while spinning around e3
    assert sol["bob"].position[:, 2].min() < -0.3


def test_far_from_the_origin():
    """A pendulum pivoted 1e6 m from the origin: Newton's stopping test sees the round-off floor
    of |q| ~ 1e6 and still converges; energy is conserved to the same relative bound."""
    pivot = np.array([1e6, -2e5, 3e5])
    x_c = pivot + [0.0, 0.5, 0.0]
    omega = np.array([2.0, 0.0, 1.0])
    rod = cs.RigidBody("rod", mass=1.0, inertia=(0.02, 0.01, 0.02), position=x_c,
                       velocity=np.cross(omega, x_c - pivot), angular_velocity=omega)
    sol = cs.simulate(cs.System([rod, cs.Spherical(rod, cs.ground, at=pivot), cs.Gravity()]),
                      t_end=2.0, dt=1e-2)
    assert relative_drift(sol.energy.total) <= 1e-10
    tip = sol["rod"].position + sol["rod"].rotation @ [0.0, -0.5, 0.0]
    assert np.max(np.abs(tip - pivot)) <= 1e-9  # round-off of 1e6 m coordinates is ~1e-10


def test_ill_conditioned_newton_accepts_at_the_round_off_floor():
    """Thompson's wind turbine (5 t tower 60 m up, 300 kg blades): the director step's Newton
    matrix has condition ~1e13, so corrections stall near 1e-9 in a multiplier while the residual
    sits at round-off. Newton accepts there (default tol) and the step keeps its exact
    properties; a step far from converged is still refused (Newton(max_iterations=2))."""
    from conserve.problems import thompson_examples

    system = thompson_examples()["wind turbine"][0]
    sol = cs.simulate(system, t_end=0.05, dt=1e-3)
    assert relative_drift(sol.energy.total) <= 1e-10
    assert np.max(sol.constraint_residual) <= 1e-10
    assert np.max(sol.newton_iterations) < cs.Newton().max_iterations
    with pytest.raises(cs.ConvergenceError):
        cs.simulate(system, t_end=0.05, dt=1e-3, newton=cs.Newton(max_iterations=2))


def test_mass_matrix_products_are_kron_mu_by_either_path(monkeypatch):
    """M v = kron(μ, I3) v for rigid bodies (with a hybrid rotor's share), a point mass and the
    ground's borrowed directors, applied as one dense product (small models) and block by block
    (models over DENSE_MASS_BLOCKS blocks): the two paths agree with the matrix."""
    import conserve.model.assembled as assembled

    a = cs.RigidBody("a", 3.0, (0.4, 0.5, 0.6), euler=("XYZ", (0.3, -0.2, 0.1)))
    b = cs.RigidBody("b", 1.0, (0.1, 0.2, 0.25), position=(1.0, 0.2, 0.0))
    bob = cs.PointMass("bob", mass=0.7, position=(0.0, 0.0, -1.0))
    wheel = cs.Rotor("wheel", on=a, axis=(0, 0, 1), mass=0.5, axial_inertia=0.02, transverse_inertia=0.01,
                     spin_rate=10.0)
    model = cs.System([a, b, bob, wheel, cs.Spherical(a, bob, at=(0.0, 0.0, -1.0))]).assemble().model
    v = np.random.default_rng(0).standard_normal(3 * model.mu.shape[0])
    expected = np.kron(np.asarray(model.mu), np.eye(3)) @ v
    dense = np.asarray(model.mass_times(v))
    monkeypatch.setattr(assembled, "DENSE_MASS_BLOCKS", 0)
    blockwise = np.asarray(model.mass_times(v))
    for product in (dense, blockwise):
        assert np.max(np.abs(product - expected)) <= 1e-14 * np.max(np.abs(expected))
