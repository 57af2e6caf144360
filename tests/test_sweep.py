"""Parameter sweeps (cs.studies.sweep): members stored one file each, on any executor, reruns
skip what is stored."""

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import conserve as cs
from conserve.studies.sweep import member_path
from conftest import relative_drift

GRID = {"density": [2700.0, 5000.0], "omega_p": [10.0, 12.0]}
T_END, DT = 0.05, 1e-3


def fragile(density, omega_p):
    """The heavy top, except that one member kills the worker process that builds it."""
    if density == 5000.0 and omega_p == 12.0:
        os._exit(3)
    return cs.problems.heavy_top(density=density, omega_p=omega_p)


def _pool():
    return ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))


def test_a_sweep_on_worker_processes_is_the_sweep_in_this_process_bit_for_bit(tmp_path):
    here = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path / "here")
    with _pool() as pool:
        there = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path / "there", executor=pool)
    assert here.sizes["member"] == 4 and list(here["density"].values) == [2700.0, 2700.0, 5000.0, 5000.0]
    assert list(here["omega_p"].values) == [10.0, 12.0, 10.0, 12.0]
    for name in ("q", "v", "multipliers"):
        assert np.array_equal(here[name].values, there[name].values)
    for k in range(4):  # each member is its own heavy top, conserving
        alone = cs.simulate(cs.problems.heavy_top(density=GRID["density"][k // 2], omega_p=GRID["omega_p"][k % 2]),
                            T_END, DT)
        assert np.array_equal(here["q"].values[k], alone.q)
        assert relative_drift(alone.energy.total) <= 1e-13


def test_a_killed_worker_loses_no_finished_member_and_a_rerun_runs_only_the_rest(tmp_path):
    with _pool() as pool, pytest.raises(cs.SimulationError, match="members were not stored"):
        cs.studies.sweep(fragile, GRID, T_END, DT, tmp_path, executor=pool)
    stored = sorted(tmp_path.glob("member-*.npz"))
    assert 1 <= len(stored) <= 3 and not list(tmp_path.glob("*.partial.npz"))  # no half-written file
    for path in stored:  # what was stored is complete
        sol = cs.Solution.load(path)
        assert len(sol) == round(T_END / DT) + 1 and "failure" not in sol.stats
    killed = member_path(tmp_path, {"density": 5000.0, "omega_p": 12.0})
    assert not killed.exists()
    before = {p: p.stat().st_mtime_ns for p in stored}
    result = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path)
    assert result.sizes["member"] == 4 and killed.exists()
    assert {p: p.stat().st_mtime_ns for p in stored} == before  # the stored members were not run again


@pytest.mark.slow
def test_a_sweep_on_a_local_dask_cluster(tmp_path):
    """dask.distributed, the multi-machine engine, on a local cluster of 2 worker processes: a
    worker killed by a member loses no finished member, the rerun on the cluster runs the rest,
    and the result is the in-process sweep's bit for bit."""
    import dask
    from dask.distributed import Client, LocalCluster

    here = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path / "here")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        with pytest.raises(cs.SimulationError, match="members were not stored"):
            cs.studies.sweep(fragile, GRID, T_END, DT, tmp_path / "there", executor=client)
        stored = sorted((tmp_path / "there").glob("member-*.npz"))
        assert 1 <= len(stored) <= 3
        before = {p: p.stat().st_mtime_ns for p in stored}
        there = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path / "there", executor=client)
    assert {p: p.stat().st_mtime_ns for p in stored} == before
    for name in ("q", "v", "multipliers"):
        assert np.array_equal(here[name].values, there[name].values)
