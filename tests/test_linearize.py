"""Linearisation in minimal coordinates against classical small-oscillation results: a compound
pendulum, the stability of a free body spinning about each principal axis, and the nutation of a
heavy symmetric top about steady precession (a relative equilibrium, in the precessing frame)."""

import numpy as np
import pytest

import conserve as cs
from conserve.studies.linearize import linearize

g = 9.81


@pytest.mark.parametrize("m, l, J", [(2.0, 0.5, 0.03), (0.7, 1.2, 0.4)])
def test_compound_pendulum_frequency(m, l, J):
    bar = cs.RigidBody("bar", m, (J, J, 0.01), position=(0.0, 0.0, -l))
    hinge = cs.Revolute(cs.ground, bar, at=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0))
    lin = linearize(cs.System([bar, hinge, cs.Gravity()]))
    assert lin.M.shape == (1, 1) and np.max(np.abs(lin.imbalance)) <= 1e-12
    np.testing.assert_allclose(lin.frequencies, [np.sqrt(m * g * l / (J + m * l**2))], rtol=1e-12)


def test_a_configuration_off_the_joints_is_refused_by_name():
    """Minimal coordinates about a q the hinge does not admit describe no configuration (before: a
    frequency was returned for a pendulum centre moved from 0.5 to 0.7 m below the pin)."""
    bar = cs.RigidBody("bar", 2.0, (0.03, 0.03, 0.01), position=(0.0, 0.0, -0.5))
    system = cs.System([bar, cs.Revolute(cs.ground, bar, at=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0), name="pin"),
                        cs.Gravity()])
    q = np.asarray(system.assemble().initial_state.q).copy()
    q[2] = -0.7
    with pytest.raises(cs.ModelError, match="'pin' by up to 0.2"):
        linearize(system, q=q)


def test_damped_pendulum_eigenvalues():
    """A hinge damper c (N m s/rad) and spring k (N m/rad): (J + m l²) θ'' + c θ' + (m g l + k) θ = 0,
    eigenvalues −c/(2J_O) ± i sqrt((m g l + k)/J_O − (c/2J_O)²)."""
    m, l, J, c, k = 2.0, 0.5, 0.03, 0.4, 1.5
    bar = cs.RigidBody("bar", m, (J, J, 0.01), position=(0.0, 0.0, -l))
    hinge = cs.Revolute(cs.ground, bar, at=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0))
    lin = linearize(cs.System([bar, hinge, cs.JointSpringDamper(hinge, stiffness=k, damping=c), cs.Gravity()]))
    J_O = J + m * l**2
    np.testing.assert_allclose(lin.D, [[c]], rtol=1e-12)
    expected = -c / (2 * J_O) + 1j * np.sqrt((m * g * l + k) / J_O - (c / (2 * J_O))**2)
    np.testing.assert_allclose(np.sort_complex(lin.eigenvalues), [np.conj(expected), expected], rtol=1e-12)


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


def test_parallelogram_four_bar_frequency():
    """A loop: two hanging cranks (bars, mass m, length ℓ) carry a coupler (mass M) that
    translates on a circle, ω² = g (m ℓ + M ℓ) / (2 J_O + M ℓ²), J_O the crank's inertia about
    its pivot. The loop-closing joint is cut (and redundant in 3-D); its multipliers enter K."""
    from conserve.problems import _bar

    m, M, l, d, r = 1.0, 3.0, 0.8, 1.2, 0.01
    down = np.array([0.0, -l, 0.0])
    crank1, crank2 = _bar("crank1", [0, 0, 0], down, mass=m, radius=r), _bar("crank2", [d, 0, 0], down + [d, 0, 0], mass=m, radius=r)
    coupler = _bar("coupler", down, down + [d, 0, 0], mass=M, radius=r)
    z = (0.0, 0.0, 1.0)
    system = cs.System([crank1, crank2, coupler, cs.Gravity((0.0, -g, 0.0)),
                        cs.Revolute(cs.ground, crank1, at=(0, 0, 0), axis=z),
                        cs.Revolute(cs.ground, crank2, at=(d, 0, 0), axis=z),
                        cs.Revolute(crank1, coupler, at=down, axis=z),
                        cs.Revolute(crank2, coupler, at=down + [d, 0, 0], axis=z)])
    assembly = system.assemble()
    tree = assembly.model.tree
    assert assembly.degrees_of_freedom == 1 and tree.loop_rows
    lin = linearize(assembly)
    # the loop coordinate chosen by pivoted QR is one of the tree joints' angles
    assert lin.coordinates[0] in {f"{link.name}[0]" for link in tree.links}
    J_O = m * (l**2 / 3 + r**2 / 4)
    assert lin.M.shape == (1, 1) and np.max(np.abs(lin.imbalance)) <= 1e-10
    np.testing.assert_allclose(lin.frequencies, [np.sqrt(g * (m * l + M * l) / (2 * J_O + M * l**2))], rtol=1e-10)


def test_a_rope_on_a_hybrid_winch_is_refused():
    with pytest.raises(cs.ModelError, match="spin angle"):
        linearize(cs.problems.RotaryCrane().system("hybrid"))
