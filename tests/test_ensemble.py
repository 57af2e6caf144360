"""Ensembles (cs.simulate_batch): one compiled run vmapped over members that differ in numbers."""

import sys
from dataclasses import replace

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve import problems
from conserve.errors import InconsistentInitialState
from conftest import compiles_nothing, relative_drift


def _spun(assembly, extra):
    """The assembly's initial state with the top's spin about its axis d3 raised by ``extra`` rad/s."""
    s = assembly.initial_state
    q, v = np.asarray(s.q).reshape(-1, 3), np.asarray(s.v).reshape(-1, 3)
    omega = 0.5 * np.sum(np.cross(q[1:4], v[1:4]), axis=0) + extra * q[3]
    return s._replace(v=jnp.asarray(np.cross(omega, q).ravel()))  # the tip at the origin stays fixed


def test_members_are_the_runs_alone_and_conserve_each():
    """Heavy tops of two densities and three spins: each member is its own run (the same discrete
    step, vectorised) up to what the Newton tolerance leaves open — a step's Δq to ~1e-17, which
    the velocities 2Δq/h magnify 2000-fold, and the fast top amplifies a 2e-16 change of its
    initial velocity ~10⁴-fold in 200 steps — and conserves energy and the vertical angular
    momentum to round-off."""
    members = [problems.HeavyTop(density=rho).system().assemble() for rho in (2700.0, 2700.0, 7800.0)]
    members[1] = replace(members[1], initial_state=_spun(members[1], 5.0))
    members[2] = replace(members[2], initial_state=_spun(members[2], -3.0))
    ensemble = cs.simulate_batch(members, 0.2, 1e-3, compile="optimized")  # Newton matrices by Gauss–Jordan
    assert len(ensemble) == 3 and not ensemble.failures and ensemble.stats["members"] == 3
    alones = []
    for assembly, sol in zip(members, ensemble):
        # alone: factors carried across steps as in the ensemble, but Jacobians formed when this
        # run needs one, not when any member does — another Newton path to the same tolerance; the
        # same code generation as the ensemble's, so that its rounding is not a second difference
        # for the fast top to amplify (unoptimized code: 1.1e-11 at step 200; optimized: 1.1e-12)
        alone = cs.simulate(assembly, 0.2, 1e-3, compile="optimized")
        alones.append(alone)
        assert len(sol) == len(alone) == 201
        assert np.max(np.abs(sol.q[:11] - alone.q[:11])) <= 1e-13 * np.max(np.abs(alone.q))
        assert np.max(np.abs(sol.q - alone.q)) <= 1e-11 * np.max(np.abs(alone.q))
        assert relative_drift(sol.energy.total) <= 1e-12
        assert relative_drift(sol.angular_momentum[:, 2]) <= 1e-12
    energy = ensemble.stack(lambda sol: sol.energy.total)
    assert energy.shape == (3, 201) and np.all(np.isfinite(energy))
    # compile="auto" counts an ensemble's work as its members' (not its stacked model's sizes)
    assert ensemble.stats["unknown_steps"] == sum(alone.stats["unknown_steps"] for alone in alones)
    assert ensemble.to_xarray().sizes["member"] == 3


def bob(z0):
    """A point mass dropped from z0 onto a potential that is NaN below z = 0."""
    bob = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, z0))
    well = cs.Potential([bob], invariants=lambda f: f.position[2], energy=lambda pi: 1e-3 * jnp.sqrt(pi[0]),
                        name="sqrt-well")
    return cs.System([bob, cs.Gravity(), well])


def test_a_failing_member_keeps_its_steps_and_the_others_run_on(monkeypatch):
    """Point masses falling onto a potential that is NaN below z = 0, stepped in groups of two
    members (the last group padded): the one dropped from 1 m fails at t ≈ 0.45 s, keeps every
    step before, and is recorded; the one from 1 µm fails in its first step and keeps its initial
    node; the ones from 5 m and 3 m, in either group, run to the end as they would alone."""
    chunks = sys.modules["conserve.run.chunks"]
    monkeypatch.setattr(chunks, "GROUP_BYTES", 2 * 8 * 3**2)  # 2 members of 3 unknowns
    assert chunks.members_per_group(3) == 2
    ensemble = cs.simulate_batch([bob(1.0), bob(5.0), bob(3.0), bob(1e-6), bob(2.0)], 0.6, 1e-3, chunk=64)
    assert list(ensemble.failures) == [0, 3]
    first_step = ensemble.failures[3]
    assert first_step.step == 0 and first_step.partial_solution is ensemble[3] and len(ensemble[3]) == 1
    assert ensemble[3]["bob"].position[0, 2] == 1e-6 and len(ensemble[4]) == 601
    error = ensemble.failures[0]
    assert isinstance(error, cs.ConvergenceError) and "member 0" in str(error) and 0.3 < error.time < 0.5
    failed, *others = ensemble.members[:3]
    assert error.partial_solution is failed and len(failed) == error.step + 1
    assert np.all(np.isfinite(failed.q)) and failed["bob"].position[-1, 2] >= 0.0
    assert relative_drift(failed.energy.total) <= 1e-10
    for z0, other in zip((5.0, 3.0), others):
        assert len(other) == 601
        alone = cs.simulate(bob(z0), 0.6, 1e-3, chunk=64)
        assert np.max(np.abs(other.q - alone.q)) <= 1e-14 * np.max(np.abs(alone.q))
    assert np.isnan(ensemble.stack(lambda sol: sol.q)[0, -1]).all()


def test_an_ensemble_writes_netcdf_that_reads_back_and_stacks_scalars(tmp_path):
    """Ensemble.to_netcdf (scipy's netCDF3 writer) reads back as the Dataset of to_xarray, NaN of a
    failed member's missing times and the members' ``failure`` included (before: the file of
    ``to_xarray().to_netcdf`` had zero-length dimensions, and reading it failed with a
    TypeError); stack takes a scalar per member."""
    xr = pytest.importorskip("xarray")
    ensemble = cs.simulate_batch([bob(1.0), bob(5.0), bob(1e-6)], 0.05, 1e-3, chunk=64)
    assert list(ensemble.failures) == [2] and len(ensemble[2]) == 1
    ds = ensemble.to_xarray()
    for path, write in ((tmp_path / "ensemble.nc", ensemble.to_netcdf), (tmp_path / "plain.nc", ds.to_netcdf)):
        write(path)
        with xr.open_dataset(path) as back:
            xr.testing.assert_identical(back.load(), ds)
    np.testing.assert_array_equal(ds["q"].values[1], ensemble[1].q)
    assert np.isnan(ds["q"].values[2, 1:]).all() and list(ds["failure"].values[:2]) == ["", ""]
    assert ds["failure"].values[2] == str(ensemble.failures[2]) and "member 2" in ds["failure"].values[2]
    final = ensemble.stack(lambda sol: sol.energy.total[-1])
    np.testing.assert_array_equal(final, [sol.energy.total[-1] for sol in ensemble])
    np.testing.assert_array_equal(ensemble.stack(lambda sol: np.float64(len(sol))), [51, 51, 1])
    with pytest.raises(ValueError, match="shape \\(\\) for member 0 but \\(51,\\) for member 1"):
        ensemble.stack(lambda sol: sol.t[-1] if sol is ensemble[0] else sol.t)


def test_an_ensemble_stopped_between_chunks_keeps_the_steps_it_took():
    """An error of the progress callback (or Ctrl-C) between chunks stops the ensemble with that
    error, which carries every member's finished steps: those of the member run alone."""
    def stop(done, total):
        if done == 128:
            raise RuntimeError("stopped by the progress callback")

    with pytest.raises(RuntimeError, match="stopped by the progress callback") as err:
        cs.simulate_batch([bob(1.0), bob(5.0)], 0.6, 1e-3, chunk=64, progress=stop)
    partial = err.value.partial_solution
    assert [len(sol) for sol in partial] == [129, 129] and not partial.failures
    alone = cs.simulate(bob(5.0), 0.6, 1e-3, chunk=64)
    assert np.max(np.abs(partial[1].q - alone.q[:129])) <= 1e-14 * np.max(np.abs(alone.q))


def test_initial_states_of_one_system_and_their_checks():
    """One system with a batch of initial states; a state off the joint is refused, naming the
    member and the joint, and so are a state with a NaN and a member of another structure; a
    member too fast for the step is warned of by its number."""
    assembly = problems.heavy_top().assemble()
    states = [_spun(assembly, w) for w in (0.0, 2.0)]
    ensemble = cs.simulate_batch(assembly, 0.01, 1e-3, initial_states=states)
    assert [len(sol) for sol in ensemble] == [11, 11]
    np.testing.assert_allclose(ensemble[1].v[0], states[1].v)
    with compiles_nothing():  # again, with the system built anew: every program is compiled already
        again = cs.simulate_batch(problems.heavy_top().assemble(), 0.01, 1e-3, initial_states=states)
    assert np.array_equal(again[1].q, ensemble[1].q)
    # a member that turns more than a radian per step is named, as simulate would warn for it alone
    fast = _spun(assembly, 900.0)  # |ω| ≈ 1041 rad/s: 1.04 rad per step
    with pytest.warns(cs.CoarseStepWarning, match=r"^member 1: simulate: at t0 these parts turn more than 1 rad "
                                                   r"per step: 'top' 1\.04 rad"):
        coarse = cs.simulate_batch(assembly, 0.01, 1e-3, initial_states=[states[0], fast])
    assert not coarse.failures
    off = states[1]._replace(q=states[1].q.at[0].add(1e-3))
    with pytest.raises(InconsistentInitialState, match=r"member 1: the initial positions violate 'tip'"):
        cs.simulate_batch(assembly, 0.01, 1e-3, initial_states=[states[0], off])
    moving = states[1]._replace(v=states[1].v.at[0].add(1e-3))
    with pytest.raises(InconsistentInitialState, match=r"member 1: the initial velocities violate 'tip'"):
        cs.simulate_batch(assembly, 0.01, 1e-3, initial_states=[states[0], moving])
    nan = states[1]._replace(v=states[1].v.at[4].set(jnp.nan))
    with pytest.raises(InconsistentInitialState, match=r"member 1: its initial state's v holds NaN"):
        cs.simulate_batch(assembly, 0.01, 1e-3, initial_states=[states[0], nan])
    with pytest.raises(cs.ModelError, match="another structure"):
        cs.simulate_batch([assembly, problems.free_body()], 0.01, 1e-3)


def test_members_built_alike_share_their_laws():
    """Spacecraft built by the same function share their motor laws (equal code and constants,
    though other function objects) and may differ in wheel inertia; a torque amplitude closed
    over by the laws makes another structure."""
    light, heavy = problems.spacecraft(wheel_axial=0.02), problems.spacecraft(wheel_axial=0.022)
    ensemble = cs.simulate_batch([light, heavy], 0.05, 1e-3)
    for system, sol in zip((light, heavy), ensemble):
        alone = cs.simulate(system, 0.05, 1e-3)
        assert np.max(np.abs(sol.q - alone.q)) <= 1e-13 * np.max(np.abs(alone.q))
        assert np.max(np.abs(sol.p - alone.p)) <= 1e-13 * np.max(np.abs(alone.p))
    assert abs(ensemble[0].p[-1, 0] - ensemble[1].p[-1, 0]) > 1e-3  # the inertias did differ
    with pytest.raises(cs.ModelError, match=r"member 1's laws .* differ"):
        cs.simulate_batch([light, problems.spacecraft(torque=0.07)], 0.01, 1e-3)


def _driven(gain):
    """P3a whose wheel motors read the amplitude from a Parameter (N m)."""
    amplitude = cs.Parameter("gain", gain)
    return problems.spacecraft(laws=[lambda t, i=i: amplitude.value * jnp.sin(2 * jnp.pi * t / 5 + i) for i in range(3)])


def test_a_parameter_read_by_laws_is_a_number_of_the_model():
    """A motor gain as cs.Parameter: assembly finds it (model.parameters); members built with
    other gains share their laws and form an ensemble, each member its own run; two different
    parameters of one name are refused."""
    assembly = _driven(0.05).assemble()
    assert set(assembly.model.parameters) == {"gain"} and float(assembly.model.parameters["gain"]) == 0.05
    ensemble = cs.simulate_batch([_driven(0.05), _driven(0.08)], 0.2, 1e-2)
    for gain, sol in zip((0.05, 0.08), ensemble):
        alone = cs.simulate(_driven(gain), 0.2, 1e-2)
        assert np.max(np.abs(sol.q - alone.q)) <= 1e-13 and np.max(np.abs(sol.p - alone.p)) <= 1e-13
        assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * abs(sol.energy.total[0])
    assert np.max(np.abs(ensemble[0].p - ensemble[1].p)) > 1e-3  # the gains did differ
    a, b = cs.Parameter("gain", 1.0), cs.Parameter("gain", 2.0)
    twice = problems.spacecraft(laws=[lambda t: a.value * t, lambda t: b.value * t, lambda t: 0.0 * t])
    with pytest.raises(cs.ModelError, match="two Parameters are named 'gain'"):
        twice.assemble()


def test_every_members_terms_shape_the_newton_matrix():
    """The Newton matrix's structure is found for all members at once and with the model's
    parameters: a spring across a 4-bar chain whose stiffness is a cs.Parameter, slack (0) in one
    member and stiff in the other, couples bars the joints' tree does not, and the stiff member
    takes the same steps — Newton iterations and positions — whichever member comes first (found
    from the first member alone, or with the Parameter's own value, the chain was eliminated along
    its tree and the stiff member needed more iterations)."""
    direction = np.array([np.sin(0.3), 0.0, -np.cos(0.3)])
    points = [0.5 * k * direction for k in range(5)]
    bars = [problems._bar(f"bar{k}", points[k], points[k + 1], omega=(0.0, 0.0, 1.0), pivot=np.zeros(3))
            for k in range(4)]
    joints = [cs.Spherical(cs.ground if k == 0 else bars[k - 1], bars[k], at=points[k]) for k in range(4)]

    def spring(k):  # N/m, from the first bar's centre to the last's, relaxed at the start (1.5 m)
        stiffness = cs.Parameter("stiffness", k)
        return cs.System([*bars, *joints, cs.Gravity(), cs.Potential(
            [bars[0], bars[3]], invariants=lambda a, b: jnp.sum((a.position - b.position) ** 2)[None],
            energy=lambda pi: 0.5 * stiffness.value * (jnp.sqrt(pi[0]) - 1.5) ** 2, name="spring")])

    slack_first, stiff_first = (cs.simulate_batch([spring(k) for k in ks], 0.05, 1e-3) for ks in ((0.0, 1e8),
                                                                                                  (1e8, 0.0)))
    assert not slack_first.failures and not stiff_first.failures
    assert slack_first[1].stats["newton_matrix"] == stiff_first[0].stats["newton_matrix"] != "tree"
    assert np.array_equal(slack_first[1].newton_iterations, stiff_first[0].newton_iterations)
    assert np.max(np.abs(slack_first[1].q - stiff_first[0].q)) <= 1e-13
    assert relative_drift(slack_first[1].energy.total) <= 1e-12


def test_members_that_leave_rows_dropped_as_redundant_are_warned_once():
    """A point mass between two collinear rods (one row dropped as redundant at the start): the
    members that move leave it, the one at rest does not; one ConstraintWarning for the ensemble
    names the first such member and how many more."""
    import warnings

    mass = cs.PointMass("m", mass=1.0, position=(1.0, 0.0, 0.0), velocity=(0.0, 1.0, 0.0))
    rods = [cs.Distance(cs.ground, mass, points=(anchor, (1.0, 0.0, 0.0)), name=name)
            for anchor, name in (((0.0, 0.0, 0.0), "rod1"), ((2.0, 0.0, 0.0), "rod2"))]
    assembly = cs.System([mass, *rods]).assemble()
    s = assembly.initial_state
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        states = [s._replace(v=0 * s.v), s, s._replace(v=0.5 * s.v)]
        ensemble = cs.simulate_batch(assembly, 0.5, 1e-2, initial_states=states)
    left = [w for w in caught if w.category is cs.ConstraintWarning]
    assert len(left) == 1 and str(left[0].message).startswith("simulate_batch: member 1 (and 1 more of 3):")
    assert "'rod2'" in str(left[0].message)
    assert np.max(ensemble[0].constraint_residual) <= 1e-12 < 0.1 <= np.max(ensemble[1].constraint_residual)
