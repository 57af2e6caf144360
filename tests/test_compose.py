"""Orders 4 and 6 by symmetric composition of the energy-momentum step (``simulate(...,
order=4|6)``, issue 18): the observed orders of convergence are 4 and 6, and energy, momentum and
constraints stay exact at every node although some sub-steps go backwards in time."""

import sys
from pathlib import Path

import numpy as np
import pytest

import conserve as cs
from conserve import problems
from conserve.errors import ModelError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from chain_scaling import chain  # noqa: E402


def observed_orders(assembly, t_end, dts, error, order=4):
    """Observed orders between consecutive step sizes of runs of ``order``, against a reference
    of the same order at a quarter of the smallest step, and the runs themselves."""
    ref = cs.simulate(assembly, t_end, dts[-1] / 4, order=order)
    runs = [cs.simulate(assembly, t_end, dt, order=order) for dt in dts]
    errors = np.array([error(s, ref) for s in runs])
    return np.log(errors[:-1] / errors[1:]) / np.log(np.asarray(dts[:-1]) / np.asarray(dts[1:])), runs


def final_q(sol, ref):
    return np.max(np.abs(sol.q[-1] - ref.q[-1]))


def assert_conserving(sol, momentum_axes=()):
    """Energy balance ≤ 1e-12 relative, constraints ≤ 1e-12 at every node, the angular momentum
    along ``momentum_axes`` (indices) ≤ 1e-12 relative."""
    E0 = abs(sol.energy.total[0])
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * E0
    assert np.max(np.abs(sol.constraint_residual)) <= 1e-12
    for k in momentum_axes:
        J = sol.angular_momentum[:, k]
        assert np.max(np.abs(J - J[0])) <= 1e-12 * max(np.max(np.abs(sol.angular_momentum[0])), 1.0)


def test_heavy_top_converges_with_order_four_and_conserves():
    top = problems.heavy_top().assemble()
    orders, runs = observed_orders(top, 0.2, [0.004, 0.002, 0.001], final_q)
    assert np.all(np.abs(orders - 4.0) <= 0.2), orders
    for sol in runs:
        assert_conserving(sol, momentum_axes=(2,))  # gravity along z: J_z about the fixed tip
    assert runs[0].stats["steps"] == 50  # nodes every dt, not every sub-step
    # ten sub-steps of about Δt/10 per step: Newton iterations of ten order-2 steps of Δt/10
    plain = cs.simulate(top, 0.2, 0.0004)
    assert 0.8 * plain.newton_iterations.sum() <= runs[0].newton_iterations.sum() <= 1.5 * plain.newton_iterations.sum()


def test_node_velocities_converge_with_the_composed_order():
    """Every quantity at the nodes has the composition's order, the velocities too: a torque-free
    body against Euler–Poinsot's closed form (Jacobi's elliptic functions). Its angular velocity in
    body axes converges at order 4 (6), and so does the nodes' violation of the rigid-body velocity
    constraints d_i·d_j' + d_j·d_i' = 0 — the index-3 step's parasitic velocity component, which a
    composition of the plain step (instead of the doubled one) leaves at O(Δt²): ω at order 2.00."""
    body = problems.TorqueFreeBody(inertia=(1.0, 2.0, 3.0), omega0=(1.0, 0.0, 0.5))
    assembly = body.system().assemble()

    def errors(sol):
        d, rates = (x[:, 3:].reshape(len(sol.t), 3, 3) for x in (sol.q, sol.v))
        strain_rate = np.einsum("nik,njk->nij", d, rates)
        return (np.max(np.abs(sol["body"].angular_velocity_body - body.angular_velocity_body(sol.t))),
                np.max(np.abs(strain_rate + np.swapaxes(strain_rate, 1, 2))))

    for order, dts in ((4, [0.1, 0.05, 0.025]), (6, [0.25, 0.2, 0.125])):
        runs = [cs.simulate(assembly, 2.0, dt, order=order) for dt in dts]
        e = np.array([errors(sol) for sol in runs])
        observed = np.log(e[:-1] / e[1:]) / np.log(np.array(dts[:-1]) / np.array(dts[1:]))[:, None]
        assert np.all(np.abs(observed - order) <= 0.05 * order), (order, observed)
        for sol in runs:
            assert_conserving(sol, momentum_axes=(0, 1, 2))


def test_heavy_top_converges_with_order_six_and_conserves():
    """Order 6: Kahan–Li's nine stages of the doubled step (the step composed directly stays at
    order 4, see conserve.backends.compose)."""
    orders, runs = observed_orders(problems.heavy_top().assemble(), 0.2, [0.004, 0.002, 0.001], final_q, order=6)
    assert np.all(np.abs(orders - 6.0) <= 0.3), orders
    for sol in runs:
        assert_conserving(sol, momentum_axes=(2,))


@pytest.mark.slow
def test_spacecraft_and_chain_converge_with_order_four():
    """P3 with hybrid rotors and motors (wheel spin momenta included in the error) and a 4-link
    spherical chain under gravity."""
    def with_rotors(sol, ref):
        return final_q(sol, ref) + np.max(np.abs(sol.p[-1] - ref.p[-1]))

    sc = problems.spacecraft().assemble()
    orders, runs = observed_orders(sc, 2.0, [0.04, 0.02, 0.01], with_rotors)
    assert np.all(np.abs(orders - 4.0) <= 0.2), orders
    for sol in runs:
        assert_conserving(sol)  # motors do work: the balance E − E0 − W holds
    orders, runs = observed_orders(chain(4).assemble(), 1.0, [0.02, 0.01, 0.005], final_q)
    assert np.all(np.abs(orders - 4.0) <= 0.2), orders
    for sol in runs:
        assert_conserving(sol, momentum_axes=(2,))


@pytest.mark.slow
def test_spacecraft_and_chain_converge_with_order_six():
    orders, runs = observed_orders(problems.spacecraft().assemble(), 2.0, [0.5, 0.25, 0.125],
                                   lambda sol, ref: final_q(sol, ref) + np.max(np.abs(sol.p[-1] - ref.p[-1])), order=6)
    assert np.all(np.abs(orders - 6.0) <= 0.3), orders
    for sol in runs:
        assert_conserving(sol)
    orders, runs = observed_orders(chain(4).assemble(), 1.2, [0.06, 0.04, 0.03], final_q, order=6)
    assert np.all(np.abs(orders - 6.0) <= 0.3), orders
    for sol in runs:
        assert_conserving(sol, momentum_axes=(2,))


def test_composed_run_resumes_bit_for_bit(tmp_path):
    """A checkpointed order-4 run stopped after 8 of 24 steps resumes at order 4."""
    top = problems.heavy_top().assemble()
    whole = cs.simulate(top, 0.096, 0.004, order=4)

    def stop(n, total):
        if n == 8:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cs.simulate(top, 0.096, 0.004, order=4, checkpoint=tmp_path / "run", checkpoint_every=4, progress=stop)
    resumed = cs.resume(tmp_path / "run", top)
    np.testing.assert_array_equal(resumed.q, whole.q)


def test_orders_other_than_two_four_and_six_are_refused():
    top = problems.heavy_top()
    for order in (3, 8, True):
        with pytest.raises(ModelError, match="order must be 2 .* or 4 or 6"):
            cs.simulate(top, 0.01, 0.001, order=order)
    with pytest.raises(ModelError, match="reference integrator"):
        cs.simulate(top, 0.01, 0.001, order=4, backend="ode")
