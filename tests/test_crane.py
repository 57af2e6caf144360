"""P5 rotary crane with a hybrid winch drum: the stress variant's drop, and conservation once the
motors stop (the holding torque's work is in the energy balance)."""

import numpy as np
import pytest

import conserve as cs
from conserve.problems import RotaryCrane


def test_stress_variant_drop_acceleration():
    crane = RotaryCrane(stress=True)
    assembly = crane.system().assemble()
    assert assembly.degrees_of_freedom == 4  # slew, drum, load on its rope (2)
    sol = cs.simulate(assembly, t_end=1.0, dt=1e-2)
    z = sol["load"].position[:, 2]
    a = crane.drop_acceleration()
    assert a == pytest.approx(7.848, abs=1e-3)
    np.testing.assert_allclose(z, z[0] - 0.5 * a * sol.t**2, atol=1e-6)
    assert sol.rotor("drum").rate[-1] == pytest.approx(a * 1.0 / crane.radius, rel=1e-6)  # ≈ 78 rad/s
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-10 * np.max(np.abs(sol.energy.kinetic))


def test_crane_conserves_after_the_motors_stop():
    sol = cs.simulate(RotaryCrane().system(), t_end=10.0, dt=1e-2)
    E = sol.energy.total
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-10 * np.max(np.abs(E))
    J3 = sol.angular_momentum[sol.t >= 2.0, 2]  # slew motor off: nothing turns the crane about e3
    assert np.max(np.abs(J3 - J3[0])) <= 1e-10 * np.max(np.abs(J3))
    assert np.max(sol.constraint_residual) <= 1e-10
    assert np.ptp(sol.angular_momentum[:, 2]) > 1.0  # the slew motor did spin it up
    assert np.ptp(sol.rotor("drum").angle) > 1.0  # and the winch moved the load




def test_a_field_on_listed_parts_also_pulls_their_hybrid_rotors():
    """Gravity(parts=[body]) acts on the hybrid rotor riding on the body too: the pair falls at
    exactly g (without the rotor's weight it would fall at g m/(m + m_rotor) = 0.8 g)."""
    body = cs.RigidBody("body", mass=4.0, inertia=(1.0, 1.0, 1.0))
    rotor = cs.Rotor("rotor", on=body, axis=(0, 0, 1), offset=(0.1, 0.0, 0.0), mass=1.0, axial_inertia=0.01,
                     transverse_inertia=0.006, spin_rate=30.0)
    sol = cs.simulate(cs.System([body, rotor, cs.Gravity(parts=[body])]), t_end=0.5, dt=1e-2)
    centre = (4.0 * sol["body"].position + 1.0 * (sol["body"].position + sol["body"].rotation @ [0.1, 0.0, 0.0])) / 5.0
    np.testing.assert_allclose(centre[:, 2] - centre[0, 2], -0.5 * 9.81 * sol.t**2, atol=1e-12)
