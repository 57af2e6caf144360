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
    """Not a trivial motion: the attitude changes a lot while |Ω| stays bounded."""
    R = sol["body"].rotation
    assert np.min(np.einsum("ii->", R[-1])) < 2.5  # far from the initial attitude at some point
    np.testing.assert_allclose(sol["body"].angular_velocity_body[0], [10.0, 20.0, 20.0], rtol=1e-14)


def test_intermediate_axis_flip():
    """Dzhanibekov: spin about the intermediate axis reverses, |Ω2| returns to about 5."""
    sol = cs.simulate(free_body(inertia=(1.0, 2.0, 3.0), angular_velocity=(1e-3, 5.0, 1e-3)),
                      t_end=10.0, dt=1e-2)
    w2 = sol["body"].angular_velocity_body[:, 1]
    assert w2[0] == pytest.approx(5.0)
    assert np.min(w2) < -4.9  # flipped
    assert relative_drift(sol.energy.total) <= 1e-10
