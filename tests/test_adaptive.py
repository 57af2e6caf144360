"""Energy-consistent adaptive steps (``simulate(..., dt="adaptive", rtol, atol, saveat)``, issue 18):
every accepted node conserves exactly, the error follows the tolerance, steps follow the motion
(an eccentric orbit), save times are hit exactly, and at equal accuracy adaptive steps cost fewer
Newton solves than fixed ones where the motion's time scale varies."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve.problems import KeplerOrbit

ORBIT = KeplerOrbit()  # e = 0.9: speeds differ 19× between pericentre and apocentre


def orbit_error(sol):
    """Max over the nodes of the centre of mass's distance from the exact Kepler ellipse."""
    return np.max(np.linalg.norm(sol["satellite"].position - ORBIT.position(sol.t), axis=1))


def solves(sol):
    """Newton solves a run took: per adaptive attempt one (history estimate) or three (step doubling:
    one step, two half steps), one per fixed step."""
    per_attempt = {"history": 1, "doubling": 3}
    return per_attempt[sol.stats["error_estimate"]] * sol.stats["attempts"] if "attempts" in sol.stats \
        else sol.stats["steps"]


def assert_exact(sol, axes=(0, 1, 2)):
    E0 = abs(sol.energy.total[0])
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * E0
    assert np.max(sol.constraint_residual) <= 1e-12
    J = sol.angular_momentum
    for k in axes:
        assert np.max(np.abs(J[:, k] - J[0, k])) <= 1e-12 * max(np.max(np.abs(J)), 1.0)


@pytest.fixture(scope="module")
def orbits():
    """Adaptive runs over one period: rtol 1e-5 and 1e-7 with the default (history) error estimate,
    and 1e-7 by step doubling."""
    system = ORBIT.system().assemble()
    runs = {rtol: cs.simulate(system, ORBIT.period, "adaptive", rtol=rtol, atol=1e-3 * rtol) for rtol in (1e-5, 1e-7)}
    runs["doubling"] = cs.simulate(system, ORBIT.period, cs.Adaptive(rtol=1e-7, atol=1e-10, estimate="doubling"))
    return runs


def test_every_accepted_node_conserves_and_steps_follow_the_orbit(orbits):
    for sol in orbits.values():
        assert_exact(sol)  # central gravity about the origin: all of J
        assert sol.stats["accepted_steps"] > 0 and sol.stats["rejected_steps"] >= 0
        # step doubling: two half steps per attempt; the history estimate: one, and two in the first
        # attempt accepted (checked by step doubling: it has no history yet)
        steps = {"history": sol.stats["accepted_steps"] + 1, "doubling": 2 * sol.stats["accepted_steps"]}
        assert sol.stats["steps"] == steps[sol.stats["error_estimate"]] == len(sol) - 1
        assert sol.t[-1] == ORBIT.period
        # steps shrink where the satellite is fast: near pericentre (t ≈ 0, T) they are the smallest
        h = np.diff(sol.t)
        assert np.max(h) >= 10 * np.min(h)
        r = np.linalg.norm(sol["satellite"].position[:-1], axis=1)
        assert np.corrcoef(np.log(r), np.log(h))[0, 1] > 0.9  # h grows with the distance
        assert sol.rejected_attempts.shape == (sol.stats["rejected_steps"], 3)
        for t, h_try, err in sol.rejected_attempts:  # (a failed Newton solve: ∞)
            assert err > 1.0 and h_try > 0
        # the stats are a few numbers and names, not a record of every attempt
        assert all(x is None or isinstance(x, (str, int, float)) for x in sol.stats.values())


def test_the_first_steps_are_checked_too(orbits):
    """dt0 = T/8 on the eccentric orbit from its pericentre: the history estimate has no nodes to
    estimate the first steps' error from, so the first attempts are checked by step doubling and
    shrunk until they meet the tolerance (unchecked, steps of T/8 miss the orbit by more than its
    size); the run is then as accurate as one that starts small."""
    rtol, atol = 1e-7, 1e-10
    sol = cs.simulate(ORBIT.system(), ORBIT.period, cs.Adaptive(rtol=rtol, atol=atol, dt0=ORBIT.period / 8))
    assert_exact(sol)
    x, exact = sol["satellite"].position[1:3], ORBIT.position(sol.t[1:3])
    assert np.max(np.abs(x - exact) / (atol + rtol * np.abs(exact))) <= 10.0  # measured 1.8
    assert orbit_error(sol) <= 1.5 * orbit_error(orbits[1e-7])  # measured 1.0×
    t, h, err = sol.rejected_attempts[0]
    assert t == 0.0 and h == ORBIT.period / 8 and err > 1.0


def test_save_times_closer_than_round_off_are_one_node(orbits):
    """Save times a unit in the last place and 1e-13 of the span apart are one node, with a
    warning naming them: steps between them (4e-16 and 6e-13 s) would be round-off and would break
    the energy balance (by 1.5e-3 of the energy). Exact duplicates and a save time at t0 are the
    nodes asked for, without a warning."""
    T = ORBIT.period
    close = [T / 2, np.nextafter(T / 2, T), T / 2 + 1e-13 * T]
    with pytest.warns(UserWarning, match=r"saveat times closer than .* are one node"):
        sol = cs.simulate(ORBIT.system(), T, "adaptive", rtol=1e-7, atol=1e-10, saveat=close)
    np.testing.assert_array_equal(sol.t, [0.0, T / 2, T])
    assert_exact(sol)
    grid = np.linspace(0.0, T, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sol = cs.simulate(ORBIT.system(), T, "adaptive", rtol=1e-7, atol=1e-10, saveat=np.r_[grid, grid[1:3]])
    np.testing.assert_array_equal(sol.t, grid)
    assert_exact(sol)


def test_no_sliver_of_a_step_is_left_before_a_save_time():
    """A nearly free flight (its error estimate ~0) with steps capped at dt_max = 1/3 s − 1e-7 s:
    three steps of dt_max would leave a step of 3e-7 s before t_end = 1 s; the last stretch is
    taken as two equal steps instead."""
    satellite = cs.RigidBody("satellite", 1.0, (0.1, 0.2, 0.3), position=(1.0, 0.0, 0.0), velocity=(0.0, 1.0, 0.0))
    h_max = 1 / 3 - 1e-7
    sol = cs.simulate(cs.System([satellite, cs.CentralGravity(1e-12)]), 1.0, cs.Adaptive(dt0=h_max, dt_max=h_max))
    h = np.diff(sol.t)
    assert sol.t[-1] == 1.0 and np.max(h) <= h_max
    assert np.min(h) >= 0.25 * np.max(h), h
    assert_exact(sol)


def test_the_error_follows_the_tolerance(orbits):
    coarse, fine = orbit_error(orbits[1e-5]), orbit_error(orbits[1e-7])
    # a local error per unit step ∝ tol gives a global error ∝ tol^{2/3} for order 2
    assert 0.3 * 100 ** (2 / 3) <= coarse / fine <= 3 * 100 ** (2 / 3), (coarse, fine)


def test_adaptive_steps_beat_fixed_steps_on_an_eccentric_orbit(orbits):
    """At the accuracy of an adaptive run, a fixed step needs more Newton solves, with either error
    estimate (work measured as solves, not seconds: a test asserts no timings)."""
    system = ORBIT.system().assemble()
    for adaptive in (orbits[1e-7], orbits["doubling"]):
        target = orbit_error(adaptive)
        for dt in ORBIT.period / np.array([4000, 8000, 16000, 32000]):
            fixed = cs.simulate(system, ORBIT.period, dt)
            if orbit_error(fixed) <= target:
                break
        assert orbit_error(fixed) <= target
        assert solves(adaptive) < solves(fixed) / 2, (solves(adaptive), solves(fixed))
    # the history estimate needs no extra solves: fewer than step doubling for the same tolerance
    assert solves(orbits[1e-7]) < solves(orbits["doubling"]) / 1.5


def test_save_times_are_nodes_with_the_work_of_their_intervals():
    """P3a with motors: the nodes are the requested times exactly, each interval books its motors'
    work, and the energy balance holds at every saved node."""
    saveat = np.linspace(0.5, 5.0, 10)
    sol = cs.simulate(cs.problems.spacecraft(), 5.0, "adaptive", rtol=1e-6, atol=1e-9, saveat=saveat)
    np.testing.assert_array_equal(sol.t, np.concatenate([[0.0], saveat]))
    assert np.all(sol.substeps > 2)  # many energy-momentum steps per interval
    assert np.max(np.abs(sol.work)) > 1e-3  # the motors work
    assert_exact(sol)
    # the same motion as keeping every node, to the tolerance (landing on save times shifts the steps)
    full = cs.simulate(cs.problems.spacecraft(), 5.0, "adaptive", rtol=1e-6, atol=1e-9)
    assert np.max(np.abs(full.q[-1] - sol.q[-1])) <= 1e-5


def test_other_backends_and_orders_adapt_too():
    """The reduced backend and the order-4 composition (error estimate (y − ŷ)/(2⁴ − 1)) take
    adaptive steps with the same guarantees; their trajectories agree to the tolerance."""
    system = cs.problems.double_pendulum().assemble()
    runs = {(b, o): cs.simulate(system, 2.0, "adaptive", rtol=1e-7, atol=1e-9, backend=b, order=o)
            for b, o in (("director", 2), ("reduced", 2), ("director", 4))}
    reference = cs.simulate(system, 2.0, 2.5e-4, order=4)
    for sol in runs.values():
        assert_exact(sol, axes=(2,))
    error = {k: np.max(np.abs(sol.q[-1] - reference.q[-1])) for k, sol in runs.items()}
    assert np.max(np.abs(runs["reduced", 2].q[-1] - runs["director", 2].q[-1])) <= 1e-9
    assert error["director", 2] <= 1e-4 and error["director", 4] <= 1e-5, error  # measured 1.2e-5, 1.2e-7
    # order 4 takes far fewer (and larger) steps for the same tolerance
    assert runs["director", 4].stats["accepted_steps"] < runs["director", 2].stats["accepted_steps"] / 3


def test_a_run_that_cannot_meet_its_tolerance_fails_with_the_steps_kept():
    """The orbit from its apocentre with dt_min = 1e-3 s: near pericentre (t ≈ T/2) the tolerance
    asks for smaller steps, and the run stops with a ConvergenceError that says where and keeps
    every accepted node (conserving)."""
    r_a = ORBIT.a * (1 + ORBIT.e)
    v_a = np.sqrt(ORBIT.mu * (1 - ORBIT.e) / r_a)
    satellite = cs.RigidBody("satellite", 1.0, (0.1, 0.2, 0.3), position=(-r_a, 0, 0), velocity=(0, -v_a, 0))
    with pytest.raises(cs.ConvergenceError, match="below dt_min") as err:
        cs.simulate(cs.System([satellite, cs.CentralGravity(ORBIT.mu)]), ORBIT.period,
                    cs.Adaptive(rtol=1e-8, atol=1e-11, dt_min=1e-3))
    partial = err.value.partial_solution
    assert 0.3 * ORBIT.period <= err.value.time < 0.5 * ORBIT.period
    assert partial.t[-1] == err.value.time and len(partial) > 100
    assert_exact(partial)


def test_a_law_that_turns_nan_is_named_when_adaptive_steps_give_up():
    """(before: only "below dt_min", no word of NaN or of the law)"""
    plate = cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5), angular_velocity=(0.1, 0.2, 0.3))
    law = lambda t, state: jnp.where(t > 0.05, jnp.nan, 0.1) * jnp.ones(3)  # noqa: E731
    with pytest.raises(cs.ConvergenceError, match="every step size; not finite: the power of 'thrust'") as err:
        cs.simulate(cs.System([plate, cs.Torque(plate, law, name="thrust")]), 0.2, "adaptive")
    assert 0.04 <= err.value.partial_solution.t[-1] <= 0.06  # its last step's midpoint before 0.05 s
    # it gives up at the times' round-off (1e-9 of the span), without trying steps shorter than that
    tried = err.value.partial_solution.rejected_attempts[:, 1]
    assert np.min(tried) >= 1e-9 * 0.2 and "dt_min is the times' round-off" in str(err.value)


def test_bad_adaptive_options_are_refused_by_name():
    system = cs.problems.heavy_top()
    for kwargs, match in [({"dt": 1e-3, "rtol": 1e-6}, "rtol and atol are the tolerances"),
                          ({"dt": "adaptve"}, "dt must be a number"),
                          ({"dt": "adaptive", "rtol": -1.0}, "rtol must be"),
                          ({"dt": "adaptive", "rtol": 0.0, "atol": 0.0}, "cannot both be 0"),
                          ({"dt": "adaptive", "saveat": [5.0]}, "saveat times must lie"),
                          ({"dt": "adaptive", "saveat": [-0.1]}, "saveat times must lie"),
                          ({"dt": 1e-3, "saveat": [0.5]}, "saveat is for adaptive"),
                          ({"dt": "adaptive", "checkpoint": "x"}, "do not checkpoint"),
                          ({"dt": "adaptive", "on_failure": "subdivide"}, "retry a failed step"),
                          ({"dt": "adaptive", "backend": "ode"}, "reference integrator")]:
        with pytest.raises(cs.ModelError, match=match):
            cs.simulate(system, 1.0, **kwargs)
    with pytest.raises(cs.ModelError, match="dt_min must not exceed dt_max"):
        cs.Adaptive(dt_min=1e-2, dt_max=1e-3)


def test_an_adaptive_run_stopped_by_its_progress_callback_keeps_its_nodes(orbits):
    """An error of the progress callback after the first chunk stops the run with that error, which
    carries the nodes kept so far: those of the run not stopped."""
    def stop(done, total):
        raise RuntimeError("stopped by the progress callback")

    with pytest.raises(RuntimeError, match="stopped by the progress callback") as err:
        cs.simulate(ORBIT.system(), ORBIT.period, "adaptive", rtol=1e-5, atol=1e-8, progress=stop)
    partial, whole = err.value.partial_solution, orbits[1e-5]
    n = len(partial)
    assert n > 100
    np.testing.assert_array_equal(partial.t, whole.t[:n])
    np.testing.assert_array_equal(partial.q, whole.q[:n])


@pytest.mark.slow
def test_adaptive_order_four_through_a_whip_keeps_the_energy_a_random_walk():
    """A 10-link chain released from horizontal whips its end round; adaptive order-4 steps shrink
    there. Composed of the plain step (whose velocities carry an O(Δt²) parasitic component), the
    error estimate drove the steps down to 2.6e-5 s and the energy fell in one-sided jumps (the ten
    largest summing to −1.2e-10 J, |E − E0| up to 8.7e-11 J); composed of the doubled step, the
    error is the random walk of round-off, ~ε·(largest energy)·√(sub-steps) ≈ 1e-11 J."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from chain_scaling import chain

    sol = cs.simulate(chain(10, tilt=np.pi / 2, spin=0.0), 10.0, "adaptive", rtol=1e-8, atol=1e-11, order=4)
    jumps = np.diff(sol.energy.total)
    assert np.max(np.abs(sol.energy.total - sol.energy.total[0])) <= 4e-11  # 1.6e-13 of the 243 J scale
    assert abs(np.sum(np.sort(jumps)[:10])) <= 4e-11 and np.sum(np.sort(jumps)[-10:]) <= 4e-11
