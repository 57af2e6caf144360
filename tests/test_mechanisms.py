"""Mechanisms from the catalogue: P6 Thompson's pendulum against its reduced equation, P7 the
double four-bar with redundant constraints, a spatial double pendulum and a slider-crank loop."""

import numpy as np
import pytest
from conftest import fitted_order, relative_drift

import conserve as cs
from conserve import problems


def test_thompson_pendulum_converges_to_the_reduced_equation():
    """P6 with the spring-damper: β(t) agrees with scipy's solution of
    (J_yy + mℓ²)β'' + bβ' + kβ + mgℓ sin β = 0, the error shrinking as Δt²."""
    p = problems.ThompsonPendulum()
    assembly = p.system().assemble()
    assert assembly.degrees_of_freedom == 1
    dts = 1e-2 * 2.0 ** -np.arange(4)
    errors = []
    for dt in dts:
        sol = cs.simulate(assembly, t_end=5.0, dt=dt)
        errors.append(np.max(np.abs(p.beta(sol) - p.reference(sol.t))))
        assert np.max(np.abs(sol.energy_balance_error)) <= 1e-10 * abs(sol.energy.total[0])
    assert abs(fitted_order(dts, errors) - 2.0) <= 0.1, errors
    assert errors[-1] < 1e-4


def test_thompson_pendulum_conserves_energy_without_the_spring_damper():
    p = problems.ThompsonPendulum(spring=False)
    sol = cs.simulate(p.system(), t_end=10.0, dt=1e-3)  # 10⁴ steps
    assert relative_drift(sol.energy.total) <= 1e-10
    assert np.max(sol.constraint_residual) <= 1e-10
    # the O(Δt²) phase error after ~6 periods is ~1e-4 rad (the order itself is tested above)
    np.testing.assert_allclose(p.beta(sol)[::100], p.reference(sol.t[::100]), atol=3e-4)


@pytest.fixture(scope="module")
def four_bar():
    return problems.double_four_bar().assemble()


def test_double_four_bar_redundancy_is_detected_and_named(four_bar):
    layout = four_bar.layout
    assert len(layout.constraint_rows) == 65 and four_bar.model.n_coordinates == 60
    assert len(layout.dropped_rows) == 6 and four_bar.degrees_of_freedom == 1
    owners = {layout.constraint_rows[i][0] for i in layout.dropped_rows}
    assert owners == {"crank1-coupler0", "crank2-coupler1"}  # the loop-closing joints
    with pytest.raises(cs.ModelError, match=r"6 of 65 .*crank1-coupler0"):
        problems.double_four_bar().assemble(redundant="raise")


def test_double_four_bar_conserves_energy_over_ten_thousand_steps(four_bar):
    sol = cs.simulate(four_bar, t_end=10.0, dt=1e-3)
    assert len(sol) == 10_001
    assert relative_drift(sol.energy.total) <= 1e-10
    assert np.max(sol.constraint_residual) <= 1e-10  # every row, the dropped ones included
    # it really moves: the cranks swing and stay parallel
    angles = [np.arctan2(sol[f"crank{i}"].rotation[:, 0, 0], -sol[f"crank{i}"].rotation[:, 1, 0]) for i in range(3)]
    assert np.ptp(angles[0]) > 0.3
    np.testing.assert_allclose(angles[1], angles[0], atol=1e-9)


def test_spatial_double_pendulum():
    """Two bodies, a tree without loops: eliminated along the tree with factors carried across
    steps (the director's choice for small trees whose factors it carries), and conserving."""
    sol = cs.simulate(problems.double_pendulum(), t_end=10.0, dt=5e-3)
    assert sol.stats["newton_matrix"] == "tree"
    assert relative_drift(sol.energy.total) <= 1e-10
    assert relative_drift(sol.angular_momentum[:, 2]) <= 1e-10  # gravity along e3, pivot at the origin
    assert np.max(sol.constraint_residual) <= 1e-10
    assert sol.layout["degrees_of_freedom"] == 4  # 3 (spherical) + 1 (revolute)


@pytest.mark.parametrize("driven", [False, True])
def test_slider_crank_loop(driven):
    motor = (lambda t, crank: 0.2 * (1.0 - crank.rate / 5.0)) if driven else None
    assembly = problems.slider_crank(motor=motor).assemble()
    assert assembly.degrees_of_freedom == 1 and not assembly.layout.dropped_rows
    sol = cs.simulate(assembly, t_end=2.0, dt=1e-3)
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-10 * np.max(np.abs(sol.energy.total))
    assert np.max(sol.constraint_residual) <= 1e-10
    x = sol["slider"].position
    np.testing.assert_allclose(x[:, 1:], np.tile([0.1, 0.3], (len(sol), 1)), atol=1e-10)  # on its guide
    assert np.ptp(x[:, 0]) > 0.3  # the crank turns the slider back and forth
    if driven:
        assert np.abs(sol.work_by_element["crank motor"]).sum() > 0.01
