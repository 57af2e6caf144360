"""Linearisation in minimal coordinates against classical small-oscillation results: a compound
pendulum, the stability of a free body spinning about each principal axis, and the nutation of a
heavy symmetric top about steady precession (a relative equilibrium, in the precessing frame)."""

import numpy as np
import pytest

import conserve as cs
from conserve.linearize import linearize

g = 9.81


@pytest.mark.parametrize("m, l, J", [(2.0, 0.5, 0.03), (0.7, 1.2, 0.4)])
def test_compound_pendulum_frequency(m, l, J):
    bar = cs.RigidBody("bar", m, (J, J, 0.01), position=(0.0, 0.0, -l))
    hinge = cs.Revolute(cs.ground, bar, at=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0))
    lin = linearize(cs.System([bar, hinge, cs.Gravity()]))
    assert lin.M.shape == (1, 1) and np.max(np.abs(lin.imbalance)) <= 1e-12
    np.testing.assert_allclose(lin.frequencies, [np.sqrt(m * g * l / (J + m * l**2))], rtol=1e-12)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_free_body_spin_stability(axis):
    """Spin Ω about principal axis k: wobble eigenvalues λ² = −Ω²(I_k − I_i)(I_k − I_j)/(I_i I_j),
    real (unstable) about the intermediate axis."""
    I, Om = np.array([1.0, 2.0, 3.0]), 2.0
    rate = np.zeros(3)
    rate[axis] = Om
    lin = linearize(cs.System([cs.RigidBody("b", 1.0, I)]), frame_rate=rate)
    assert np.max(np.abs(lin.imbalance)) <= 1e-12
    i, j = (k for k in range(3) if k != axis)
    lam2 = -Om**2 * (I[axis] - I[i]) * (I[axis] - I[j]) / (I[i] * I[j])
    expected = np.sqrt(complex(lam2))
    lam = lin.eigenvalues
    assert np.min(np.abs(lam - expected)) <= 1e-10 and np.min(np.abs(lam + expected)) <= 1e-10
    assert (np.max(lam.real) > 0.5) == (axis == 1)


def test_heavy_top_nutation_about_steady_precession():
    """A symmetric top (a carrier with a hybrid rotor for its spin) precessing steadily at Ω and
    tilt θ0: in the frame turning at Ω it rests, and its nutation frequency is √(U''(θ0)/A) with
    Routh's effective potential U = (p_φ − p3 cos θ)²/(2A sin²θ) + m g ℓ cos θ."""
    m_c, m_r, l, Ac, Cc, Jr, Jt = 1.0, 0.5, 0.3, 0.02, 0.004, 0.03, 0.016
    th0, Om = 0.6, 1.5
    c, s = np.cos(th0), np.sin(th0)
    R = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    m, A = m_c + m_r, Ac + Jt + (m_c + m_r) * l**2  # A about the fixed point
    p3 = (m * g * l + A * Om**2 * c) / Om  # steady precession: m g ℓ = Ω p3 − A Ω² cos θ0
    top = cs.RigidBody("top", m_c, (Ac, Ac, Cc), position=R @ [0.0, 0.0, l], orientation=R)
    spin = cs.Rotor("spin", top, axis=(0.0, 0.0, 1.0), mass=m_r, axial_inertia=Jr, transverse_inertia=Jt,
                    axial_momentum=p3 - Cc * Om * c)  # the carrier's own share: C_c Ω cos θ0
    system = cs.System([top, spin, cs.Spherical(cs.ground, top, at=(0.0, 0.0, 0.0)), cs.Gravity()])
    lin = linearize(system, frame_rate=(0.0, 0.0, Om))
    assert np.max(np.abs(lin.imbalance)) <= 1e-12
    p_phi = A * Om * s**2 + p3 * c

    def U(th):
        return (p_phi - p3 * np.cos(th))**2 / (2 * A * np.sin(th)**2) + m * g * l * np.cos(th)

    e = 1e-4
    nutation = np.sqrt((U(th0 + e) - 2 * U(th0) + U(th0 - e)) / e**2 / A)
    np.testing.assert_allclose(lin.frequencies, [nutation], rtol=1e-6)
    # off the steady precession rate it is no equilibrium of the frame
    assert np.max(np.abs(linearize(system, frame_rate=(0.0, 0.0, 1.1 * Om)).imbalance)) > 1e-3


def test_loops_are_refused():
    with pytest.raises(cs.ModelError, match="close loops"):
        linearize(cs.problems.slider_crank())
