"""Step failure recovery (on_failure="subdivide", issues 7 and 14) and runs stopped between chunks."""

import numpy as np
import pytest

import conserve as cs
from conserve import problems


@pytest.fixture(scope="module")
def top():
    return problems.HeavyTop().system().assemble()


def test_a_failed_step_is_retried_as_conserving_substeps(top):
    """With 4 Newton iterations a step of 0.05 s fails; subdivided it is 2^k steps of the same
    scheme: exact energy balance and constraints, and the nodes of a run at the sub-step."""
    newton = cs.Newton(max_iterations=4)
    with pytest.raises(cs.ConvergenceError, match="on_failure='subdivide'"):
        cs.simulate(top, 0.2, 0.05, newton=newton)
    sol = cs.simulate(top, 0.2, 0.05, newton=newton, on_failure="subdivide")
    k = int(sol.substeps[0])
    assert len(sol) == 5 and k > 1 and np.all(sol.substeps >= 2) and sol.stats["subdivided_steps"] == 4
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * abs(sol.energy.total[0])
    assert np.max(sol.constraint_residual) <= 1e-12
    fine = cs.simulate(top, 0.2, 0.05 / k)
    np.testing.assert_allclose(sol.q[1], fine.q[k], atol=1e-10)
    # without failures the recovering step is the plain one, bit for bit in quick code (unoptimized
    # code, compile="auto"'s for short runs, rounds a step differently inside another program)
    plain, recovering = (cs.simulate(top, 0.1, 1e-3, on_failure=how, compile="quick") for how in ("raise", "subdivide"))
    np.testing.assert_array_equal(recovering.q, plain.q)
    plain, recovering = (cs.simulate(top, 0.1, 1e-3, on_failure=how) for how in ("raise", "subdivide"))
    assert recovering.stats["compile"] == "unoptimized" and np.max(np.abs(recovering.q - plain.q)) <= 1e-10


def test_a_solve_that_reaches_round_off_only_at_its_last_iteration_is_not_called_singular(top):
    """With 3 iterations the sub-steps' residual reaches round-off only at the last one, too late for
    the chord that would confirm it: the error says so, not that the matrix is singular."""
    with pytest.raises(cs.ConvergenceError) as err:
        cs.simulate(top, 0.2, 0.05, newton=cs.Newton(max_iterations=3), on_failure="subdivide")
    history = err.value.residual_history
    roundoff = 1e-12 * max(history[0], 1.0)  # residuals are scaled to O(1) terms
    assert history[-1] <= roundoff and np.all(history[:-1] > roundoff)
    assert "at the last iteration" in str(err.value) and "singular" not in str(err.value)


def test_a_step_that_fails_even_subdivided_raises_with_the_partial_solution(top):
    with pytest.raises(cs.ConvergenceError, match="sub-steps") as err:
        cs.simulate(top, 0.2, 0.05, newton=cs.Newton(max_iterations=2), on_failure="subdivide", max_subdivisions=1)
    assert err.value.step == 0 and len(err.value.partial_solution) == 1


def test_deep_subdivision_keeps_its_arithmetic_finite():
    """max_subdivisions = 16 tries 2^16 sub-steps: the multipliers handed to them are scaled by
    (2^-16)², which overflowed int32 (65536² -> 0) and started Newton from NaN while the error
    claimed a retry. A step that succeeds only at h / 2^16 (and only from finite multipliers)
    must now be found there."""
    import jax
    import jax.numpy as jnp

    from dataclasses import dataclass

    from conserve.backends import Carry, StepBackend, Subdividing
    from conserve.discrete.scheme import StepRecord
    from conserve.model.assembled import State

    @dataclass(frozen=True)
    class Stub(StepBackend):
        """Converges only at h ≤ 2^-16 and only from finite multipliers."""

        def step(self, model, carry, t, h):
            ok = (h <= 2.0**-16 * (1 + 1e-12)) & jnp.all(jnp.isfinite(carry.multipliers))
            record = StepRecord(jnp.int32(1), ok, jnp.zeros(2), jnp.zeros(1) + h, jnp.zeros(0), jnp.int32(1),
                                carry.multipliers)
            return carry._replace(state=carry.state._replace(q=carry.state.q + h)), record

        def unknowns(self, model):
            return 0

    carry = Carry(State(*(jnp.zeros(k) for k in (3, 3, 0, 0, 0, 3))), jnp.ones(2))
    new, record = jax.jit(lambda c, h: Subdividing(Stub(), 16).step(None, c, 0.0, h))(carry, jnp.float64(1.0))
    assert bool(record.converged) and int(record.substeps) == 2**16
    assert np.all(np.asarray(new.multipliers) == 1.0) and float(record.work[0]) == pytest.approx(1.0)
    np.testing.assert_allclose(new.state.q, 1.0)


def test_a_run_stopped_between_chunks_keeps_the_steps_it_took(top):
    """Ctrl-C (a KeyboardInterrupt) or an error of the progress callback between chunks stops the run
    with that exception, which carries the finished chunks' steps: those of the run not stopped."""
    whole = cs.simulate(top, 0.3, 1e-3, chunk=64)

    def stop(done, total):
        if done == 128:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as err:
        cs.simulate(top, 0.3, 1e-3, chunk=64, progress=stop)
    partial = err.value.partial_solution
    assert len(partial) == 129 and partial.t[-1] == pytest.approx(0.128)
    np.testing.assert_array_equal(partial.q, whole.q[:129])
    np.testing.assert_array_equal(partial.multipliers, whole.multipliers[:128])
    assert np.max(np.abs(partial.energy_balance_error)) <= 1e-12 * abs(partial.energy.total[0])
