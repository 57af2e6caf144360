"""Ensembles across processes (cs.simulate_batch(workers=k)): members split into contiguous
slices, each run by the in-process ensemble (or a loop of single runs) in a spawned process, merged
in member order. The laws of the members below are module-level functions: they pickle, so the
members can be sent to the workers."""

import importlib
import subprocess
import sys
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conftest import relative_drift

ensemble_module = importlib.import_module("conserve.run.ensemble")


def height(frame):
    """The invariant of the well: the bob's height z (m)."""
    return frame.position[2]


def well_energy(pi):
    """A potential NaN below z = 0 (J): a bob that reaches the floor fails its step."""
    return 1e-3 * jnp.sqrt(pi[0])


def bob(z0):
    """A point mass dropped from z0 (m) onto the well, its laws defined at module level."""
    mass = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, z0))
    return cs.System([mass, cs.Gravity(), cs.Potential([mass], invariants=height, energy=well_energy, name="well")])


def bob_with_lambdas(z0):
    """The same bob, its laws lambdas: they do not pickle."""
    mass = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, z0))
    well = cs.Potential([mass], invariants=lambda f: f.position[2], energy=lambda pi: 1e-3 * jnp.sqrt(pi[0]),
                        name="well")
    return cs.System([mass, cs.Gravity(), well])


HEIGHTS = (1.0, 5.0, 3.0, 1e-6, 2.0)  # the first fails at t ≈ 0.45 s, the fourth in its first step


def _check_against_one_process(parallel, t_end, singles=False):
    """The members of a workers=2 run against the in-process ensemble's (and, with ``singles``,
    against their single runs, looped by the workers in slices of one member each, handed out as
    the workers free up); every member carries its own Assembly."""
    alone = cs.simulate_batch([bob(z) for z in HEIGHTS], t_end, 1e-3, chunk=64, workers=1)
    assert len(parallel) == len(alone) == 5 and parallel.stats["workers"] == 2
    if singles:
        assert parallel.stats["slices"] == [(i, i + 1) for i in range(5)]
        assert len(parallel.stats["compile_times"]) in (1, 2)  # a worker that started late may have had none
    else:
        assert parallel.stats["slices"] == [(0, 3), (3, 5)] and len(parallel.stats["compile_times"]) == 2
    for member, z in zip(parallel, HEIGHTS):
        assert member.assembly.initial_state.q[2] == z and member.symmetries is not None
    assert list(parallel.failures) == list(alone.failures) == [0, 3]  # member 3 failed in the second worker
    assert "member 3:" in str(parallel.failures[3]) and parallel.failures[3].step == 0
    assert parallel.failures[3].partial_solution is parallel[3] and len(parallel[3]) == 1
    assert "member 0:" in str(parallel.failures[0]) and 0.3 < parallel.failures[0].time < 0.5
    for i, (a, b) in enumerate(zip(parallel, alone)):
        assert len(a) == len(b)
        assert np.max(np.abs(a.q - b.q)) <= 1e-14 * np.max(np.abs(b.q))
        assert relative_drift(a.energy.total) <= 1e-10
        assert a["bob"].position[0, 2] == HEIGHTS[i]
    for z, member in zip((5.0, 2.0), (parallel[1], parallel[4]) if singles else ()):
        single = cs.simulate(bob(z), t_end, 1e-3, chunk=64)
        assert len(member) == round(t_end / 1e-3) + 1 and np.max(np.abs(member.q - single.q)) <= 1e-14 * 5.0


def test_two_workers_give_the_members_of_one_process():
    """workers=2, the slices vmapped (a run shorter than LOOP_STEPS): the members equal the
    in-process ensemble's, failures recorded under their index in the whole ensemble, progress
    reported as the slices finish."""
    calls = []
    t_end = 0.49
    assert round(t_end / 1e-3) < ensemble_module.LOOP_STEPS
    parallel = cs.simulate_batch([bob(z) for z in HEIGHTS], t_end, 1e-3, chunk=64, workers=2,
                                 progress=lambda done, total: calls.append((done, total)))
    _check_against_one_process(parallel, t_end)
    assert calls == [(294, 490), (490, 490)] or calls == [(196, 490), (490, 490)]


@pytest.mark.slow
def test_workers_looping_single_runs_and_a_stop_keeping_finished_slices():
    """workers=2 for a run of LOOP_STEPS steps or more (each worker loops single runs): the same
    members; a progress callback that raises stops the run with the finished slice's members."""
    t_end = 0.6
    assert round(t_end / 1e-3) >= ensemble_module.LOOP_STEPS
    _check_against_one_process(cs.simulate_batch([bob(z) for z in HEIGHTS], t_end, 1e-3, chunk=64, workers=2), t_end,
                               singles=True)

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as stopped:
        cs.simulate_batch([bob(z) for z in HEIGHTS], t_end, 1e-3, chunk=64, workers=2, progress=stop)
    partial = stopped.value.partial_solution
    kept = partial.stats["member_index"]
    assert len(kept) == 1 and len(partial) == 1  # the first slice finished: one member
    assert set(partial.failures) == {0, 3} & set(kept)
    for i, member in zip(kept, partial):
        assert member["bob"].position[0, 2] == HEIGHTS[i]


def test_members_that_do_not_pickle_are_refused_for_explicit_workers():
    """Laws that are lambdas cannot reach a worker: workers=2 says which and how to fix it (before
    any process starts)."""
    with pytest.raises(cs.ModelError, match=r"workers=2 .*lambda.*module level.*workers=1"):
        cs.simulate_batch([bob_with_lambdas(z) for z in (1.0, 2.0)], 0.01, 1e-3, workers=2)
    with pytest.raises(cs.ModelError, match="workers must be"):
        cs.simulate_batch([bob(z) for z in (1.0, 2.0)], 0.01, 1e-3, workers=0)


def test_auto_workers_fall_back_to_one_process_with_one_warning(monkeypatch):
    """workers=None on a large enough ensemble (here: any) of unpicklable members runs them in this
    process, warning once why and how to fix it; a small ensemble stays in this process silently."""
    monkeypatch.setattr(ensemble_module, "WORKER_WORK", 0)
    monkeypatch.setattr(ensemble_module, "usable_cores", lambda: 2)
    monkeypatch.setattr(ensemble_module, "_warned", set())
    members = [bob_with_lambdas(z) for z in (1.0, 2.0)]
    with pytest.warns(UserWarning, match=r"one process, not 2.*lambda.*module level.*workers=1") as caught:
        first = cs.simulate_batch(members, 0.01, 1e-3)
    assert len([w for w in caught if "one process" in str(w.message)]) == 1
    assert "workers" not in first.stats and len(first) == 2 and not first.failures
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        again = cs.simulate_batch(members, 0.01, 1e-3)
    assert np.array_equal(again[1].q, first[1].q)


def test_auto_workers_keep_a_small_ensemble_in_this_process():
    """workers=None below WORKER_WORK unknown-steps: no process is started."""
    ensemble = cs.simulate_batch([bob(z) for z in (1.0, 2.0)], 0.01, 1e-3)
    assert "workers" not in ensemble.stats and len(ensemble) == 2


SCRIPT = """
import warnings
import conserve as cs
import conserve.run.ensemble as ensemble
from conserve.run.workers import unguarded_main_script
ensemble.WORKER_WORK, ensemble.usable_cores = 0, lambda: 2  # any ensemble would go to two processes
members = [cs.problems.free_body(angular_velocity=(1.0, w, 0.5)) for w in (0.1, 0.2)]
print("top level:", unguarded_main_script() is not None)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ensemble_ = cs.simulate_batch(members, 0.01, 1e-3)
print("warned:", any("outside an `if __name__" in str(w.message) for w in caught), "members:", len(ensemble_))
try:
    cs.simulate_batch(members, 0.01, 1e-3, workers=2)
except cs.ModelError as err:
    print("refused:", "if __name__" in str(err))


def main():
    print("guarded:", unguarded_main_script() is None)


if __name__ == "__main__":
    main()
"""


def test_a_script_without_a_main_guard_keeps_its_ensemble_in_one_process(tmp_path):
    """A spawned worker imports the main script: called from a script's top level outside
    ``if __name__ == "__main__":``, workers=None runs the ensemble in this process with a warning
    (no worker re-runs the script), workers=2 is refused; a call under the guard is recognised."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, check=True,
                         cwd=tmp_path).stdout
    assert "top level: True" in out and "warned: True members: 2" in out
    assert "refused: True" in out and "guarded: True" in out
