"""The "ode" backend (Thompson's reduced ODE by solve_ivp): P6's reduced pendulum equation, the
energy balance with a damper, the EM schemes converging to it with order 2, also with loops,
ropes, coordinate relations, motors and loads."""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import fitted_order

import conserve as cs
from conserve import problems


def test_p6_pendulum_matches_the_reduced_equation_and_balances_energy():
    pendulum = problems.ThompsonPendulum()  # with the rotary spring-damper
    sol = cs.simulate(pendulum.system(), 3.0, 1e-2, backend="ode")
    assert np.max(np.abs(pendulum.beta(sol) - pendulum.reference(sol.t))) <= 1e-8
    assert np.all(sol.dissipation >= 0) and np.sum(sol.dissipation) > 0.1  # J: the damper works
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-8 * abs(sol.energy.total[0])
    assert np.all(np.isnan(sol.multipliers)) and sol.stats["backend"] == "ode"


def test_em_backends_converge_to_the_ode_with_order_two():
    system = problems.double_pendulum().assemble()
    ref = cs.simulate(system, 0.4, 1e-2, backend="ode", ode={"rtol": 1e-12, "atol": 1e-14})
    assert np.max(ref.constraint_residual) <= 1e-9  # not projected, but accurate
    for backend in ("director", "reduced"):
        dts = [5e-3, 2.5e-3, 1.25e-3]
        errors = [np.max(np.abs(cs.simulate(system, 0.4, h, backend=backend).q[::round(1e-2 / h)] - ref.q))
                  for h in dts]
        assert abs(fitted_order(dts, errors) - 2.0) <= 0.15


def _driven_slider_crank():
    """A loop with a joint motor, a velocity-dependent force and a body-axes torque."""
    system = problems.slider_crank(motor=lambda t, crank: 0.05 * jnp.sin(3.0 * t))
    parts = {p.name: p for p in system.parts()}
    system.add(cs.Force(parts["slider"], force=lambda t, state: -0.3 * state.velocity, name="drag"))
    system.add(cs.Torque(parts["rod"], lambda t, state: jnp.array([0.0, 0.0, 0.01 * jnp.cos(t)]), frame="body"))
    return system


NON_TREE = {"slider-crank: loop, joint motor, loads": (_driven_slider_crank, 0.4),
            "crane, hybrid winch: rope on the spin angle, joint and rotor motors":
                (lambda: problems.RotaryCrane().system("hybrid"), 0.4),
            "crane, body winch: coordinate relation, joint motors": (lambda: problems.RotaryCrane().system("body"), 0.4)}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if "crane" in n else n for n in NON_TREE])
def test_em_backends_converge_to_the_ode_with_non_tree_constraints_motors_and_loads(name):
    """Multipliers at the acceleration level keep loops, ropes and coordinate relations to the
    integrator's tolerance; motors and loads do the work the energy balance books; the director
    scheme converges to the ODE's solution with order 2."""
    make, t_end = NON_TREE[name]
    system = make().assemble()
    ref = cs.simulate(system, t_end, 1e-2, backend="ode", ode={"rtol": 1e-12, "atol": 1e-14})
    assert np.max(ref.constraint_residual) <= 1e-9
    assert np.max(np.abs(ref.work.sum(axis=0))) > 1e-3  # J: the motors and loads act
    assert np.max(np.abs(ref.energy_balance_error)) <= 1e-9 * np.max(np.abs(ref.energy.total))
    dts = [1e-2, 5e-3, 2.5e-3]
    errors = [np.max(np.abs(cs.simulate(system, t_end, h).q[::round(1e-2 / h)] - ref.q)) for h in dts]
    assert abs(fitted_order(dts, errors) - 2.0) <= 0.15


def test_a_failed_integration_keeps_the_nodes_it_reached():
    """The solver giving up half-way (simulated) leaves a SimulationError with the nodes up to there."""
    import scipy.integrate

    class GivesUp(scipy.integrate.DOP853):
        def _step_impl(self):
            if self.t >= 0.5 * self.t_bound:
                return False, "Required step size is less than spacing between numbers."
            return super()._step_impl()

    with pytest.raises(cs.SimulationError, match="GivesUp: Required step size") as err:
        cs.simulate(problems.ThompsonPendulum().system(), 1.0, 1e-2, backend="ode", ode={"method": GivesUp})
    partial = err.value.partial_solution
    assert 51 <= len(partial) < 101 and err.value.time == pytest.approx(partial.t[-1]) and partial.t[-1] >= 0.5
    assert np.max(np.abs(partial.energy_balance_error)) <= 1e-8 * abs(partial.energy.total[0])


def test_progress_is_called_and_a_stop_keeps_the_nodes():
    """progress after every chunk of nodes, as for the step backends (before: never called); an
    exception it raises stops the run and carries the nodes reached."""
    calls = []
    sol = cs.simulate(problems.ThompsonPendulum().system(), 0.5, 1e-2, backend="ode", chunk=20,
                      progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (50, 50) and all(b[0] - a[0] >= 20 for a, b in zip(calls, calls[1:-1]))

    class Stop(Exception):
        pass

    def stop(done, total):
        if done >= 20:
            raise Stop

    with pytest.raises(Stop) as err:
        cs.simulate(problems.ThompsonPendulum().system(), 0.5, 1e-2, backend="ode", chunk=20, progress=stop)
    np.testing.assert_array_equal(err.value.partial_solution.q, sol.q[:len(err.value.partial_solution)])
