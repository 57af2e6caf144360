"""P5 rotary crane with a hybrid or full-body winch drum: the stress variant's drop, and
conservation once the motors stop (the holding torque's work is in the energy balance)."""

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



def test_rope_on_a_full_body_drum():
    """The rope as a relation between tracked joint coordinates, ℓ − r α = L0: the same degrees
    of freedom as the hybrid winch, exact energy, the rope length equal to L0 + r α at every
    step, and the drop converging to g m/(m + J_a/r²) as the body drum's step shrinks."""
    crane = RotaryCrane(stress=True)
    assembly = crane.system("body").assemble()
    assert assembly.degrees_of_freedom == crane.system("hybrid").assemble().degrees_of_freedom == 4
    sol = cs.simulate(assembly, t_end=0.5, dt=5e-3)
    rope = np.linalg.norm(sol["load"].position - crane.tip, axis=1)
    np.testing.assert_allclose(rope, 1.5 + crane.radius * sol.coordinates["rope drum angle"], atol=1e-12)
    assert np.ptp(rope) > 0.9
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-10 * np.max(np.abs(sol.energy.kinetic))
    np.testing.assert_allclose(sol.angular_momentum[:, 2], 0.0, atol=1e-12)  # nothing turns it about e3
    z = sol["load"].position[:, 2]
    a = -2.0 * (z[-1] - z[0]) / 0.5**2
    assert a == pytest.approx(crane.drop_acceleration(), rel=1e-3)  # ωh ≤ 0.2


def test_a_field_on_listed_parts_also_pulls_their_hybrid_rotors():
    """Gravity(parts=[body]) acts on the hybrid rotor riding on the body too: the pair falls at
    exactly g (without the rotor's weight it would fall at g m/(m + m_rotor) = 0.8 g)."""
    body = cs.RigidBody("body", mass=4.0, inertia=(1.0, 1.0, 1.0))
    rotor = cs.Rotor("rotor", on=body, axis=(0, 0, 1), offset=(0.1, 0.0, 0.0), mass=1.0, axial_inertia=0.01,
                     transverse_inertia=0.006, spin_rate=30.0)
    sol = cs.simulate(cs.System([body, rotor, cs.Gravity(parts=[body])]), t_end=0.5, dt=1e-2)
    centre = (4.0 * sol["body"].position + 1.0 * (sol["body"].position + sol["body"].rotation @ [0.1, 0.0, 0.0])) / 5.0
    np.testing.assert_allclose(centre[:, 2] - centre[0, 2], -0.5 * 9.81 * sol.t**2, atol=1e-12)


def test_small_steps_converge():
    """Newton's unknowns all have a length or angle scale (the rotor momentum increment is scaled
    to the spin angle it causes), so round-off does not stall Newton at tiny steps: unscaled, the
    rope row's round-off reached Δp amplified by 2 J_a / h (3e-11 at h = 1e-5, above tolerance)."""
    sol = cs.simulate(RotaryCrane().system(), t_end=1e-3, dt=1e-5)
    assert np.all(sol.newton_iterations <= 4)
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-10 * np.max(np.abs(sol.energy.total))
