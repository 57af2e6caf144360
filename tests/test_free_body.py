"""P2 free rigid body: every first integral conserved; the intermediate-axis flip."""

import numpy as np
import pytest
from conftest import relative_drift

import conserve as cs
from conserve.problems import free_body


@pytest.fixture(scope="module")
def sol():
    system = free_body(velocity=(0.3, -0.2, 0.1), position=(1.0, 2.0, 3.0))
    return cs.simulate(system, t_end=100.0, dt=1e-2)  # 10⁴ steps


def test_energy(sol):
    assert len(sol) == 10_001
    assert relative_drift(sol.energy.total) <= 1e-10


def test_every_component_of_angular_momentum(sol):
    J = sol.angular_momentum
    assert np.max(np.abs(J - J[0])) <= 1e-10 * np.linalg.norm(J[0])


def test_every_component_of_linear_momentum(sol):
    L = sol.linear_momentum
    assert np.max(np.abs(L - L[0])) <= 1e-10 * np.linalg.norm(L[0])
    np.testing.assert_allclose(L[0], [0.3, -0.2, 0.1], rtol=1e-15)


def test_body_keeps_rotating(sol):
    """Not a trivial motion: the attitude goes far from the initial one at some point."""
    R = sol["body"].rotation
    assert np.min(np.einsum("nii->n", R)) < 0.0  # rotated by more than 120°
    np.testing.assert_allclose(sol["body"].angular_velocity_body[0], [10.0, 20.0, 20.0], rtol=1e-14)


def test_discrete_momentum_is_the_physical_one(sol):
    """J = R J_c Ω + x × m v at the start: the director blocks carry the spin momentum."""
    Omega = np.array([10.0, 20.0, 20.0])
    expected = np.diag([6.0, 8.0, 3.0]) @ Omega + np.cross([1.0, 2.0, 3.0], [0.3, -0.2, 0.1])
    np.testing.assert_allclose(sol.angular_momentum[0], expected, rtol=1e-14)


def test_fast_tumbling_at_omega_h_five():
    """Off-axis spin with |ω| h = 5: the Cayley predictor (ω from the spin momentum) keeps Newton
    converging, and energy and momentum stay exact however coarse the step."""
    omega = np.array([50.0, 300.0, 400.0])
    dt = 5.0 / np.linalg.norm(omega)
    sol = cs.simulate(free_body(angular_velocity=omega), t_end=200 * dt, dt=dt)
    assert len(sol) == 201
    assert relative_drift(sol.energy.total) <= 1e-10
    J = sol.angular_momentum
    assert np.max(np.abs(J - J[0])) <= 1e-10 * np.linalg.norm(J[0])


def test_intermediate_axis_flip():
    """Dzhanibekov: spin about the intermediate axis reverses, |Ω2| returns to about 5."""
    sol = cs.simulate(free_body(inertia=(1.0, 2.0, 3.0), angular_velocity=(1e-3, 5.0, 1e-3)),
                      t_end=10.0, dt=1e-2)
    w2 = sol["body"].angular_velocity_body[:, 1]
    assert w2[0] == pytest.approx(5.0)
    assert np.min(w2) < -4.9  # flipped
    assert relative_drift(sol.energy.total) <= 1e-10
