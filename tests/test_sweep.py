"""Parameter sweeps (cs.studies.sweep): members stored one file each, on any executor, reruns
skip what is stored."""

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve.studies.sweep import member_path
from conftest import relative_drift

GRID = {"density": [2700.0, 5000.0], "omega_p": [10.0, 12.0]}
T_END, DT = 0.05, 1e-3


KILLED = {"density": 5000.0, "omega_p": 12.0}


def fragile(density, omega_p):
    """The heavy top, except that one member kills the worker process that builds it — once the
    other three members are stored (in $SWEEP_DIRECTORY), so that exactly they are finished."""
    if {"density": density, "omega_p": omega_p} == KILLED:
        directory, deadline = Path(os.environ["SWEEP_DIRECTORY"]), time.monotonic() + 300
        while len(list(directory.glob("member-*[0-9a-f].npz"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(3)
    return cs.problems.heavy_top(density=density, omega_p=omega_p)


def _finished(directory):
    """The three members other than KILLED, as stored files."""
    return {member_path(directory, {"density": d, "omega_p": w}) for d in GRID["density"] for w in GRID["omega_p"]
            if {"density": d, "omega_p": w} != KILLED}


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


def test_a_killed_worker_loses_no_finished_member_and_a_rerun_runs_only_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_DIRECTORY", str(tmp_path))
    with _pool() as pool, pytest.raises(cs.SimulationError, match="1 of 4 members were not stored"):
        cs.studies.sweep(fragile, GRID, T_END, DT, tmp_path, executor=pool)
    stored = sorted(tmp_path.glob("member-*.npz"))
    assert set(stored) == _finished(tmp_path)  # the finished members, and no half-written file
    for path in stored:  # what was stored is complete
        sol = cs.Solution.load(path)
        assert len(sol) == round(T_END / DT) + 1 and "failure" not in sol.stats
    killed = member_path(tmp_path, KILLED)
    assert not killed.exists()
    before = {p: p.stat().st_mtime_ns for p in stored}
    result = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path)
    assert result.sizes["member"] == 4 and killed.exists()
    assert {p: p.stat().st_mtime_ns for p in stored} == before  # the stored members were not run again


def test_a_sweep_with_other_settings_is_refused_not_handed_the_stored_members(tmp_path):
    """(before: the second sweep returned the first one's 51 nodes to t = 0.05 s as its own)"""
    grid = {"density": [2700.0]}
    cs.studies.sweep(cs.problems.heavy_top, grid, T_END, DT, tmp_path)
    with pytest.raises(cs.ModelError, match="holds the members of another sweep .*t_end 0.05.*now 0.1"):
        cs.studies.sweep(cs.problems.heavy_top, grid, 2 * T_END, DT, tmp_path)
    with pytest.raises(cs.ModelError, match="options"):
        cs.studies.sweep(cs.problems.heavy_top, grid, T_END, DT, tmp_path, backend="reduced")
    assert cs.studies.sweep(cs.problems.heavy_top, grid, T_END, DT, tmp_path).sizes["time"] == round(T_END / DT) + 1


def tilted(density, omega_p):
    """The heavy top of GRID's parameters, tilted by 45° instead of 60°: another model."""
    return cs.problems.HeavyTop(density=density, omega_p=omega_p, alpha0=np.pi / 4).system()


def test_a_sweep_of_another_model_is_refused_not_handed_the_stored_members(tmp_path):
    """The members stored carry their model's fingerprint: a make_system that builds another model
    for their parameters is refused (before: the tilted top's sweep returned the upright one's
    members as its own, 0.72 m off), and so is one whose members were stored without it (by
    their initial state); reading the sweep's directory as a Solution says what it is."""
    grid = {"density": [2700.0], "omega_p": [10.0]}
    first = cs.studies.sweep(cs.problems.heavy_top, grid, T_END, DT, tmp_path)
    with pytest.raises(cs.ModelError, match=r"holds members of another model: for the parameters "
                                            r"\{'density': 2700.0, 'omega_p': 10.0\}.*initial state differ"):
        cs.studies.sweep(tilted, grid, T_END, DT, tmp_path)
    path = member_path(tmp_path, grid_member := {"density": 2700.0, "omega_p": 10.0})
    stored = cs.Solution.load(path)
    del stored.stats["fingerprint"]  # as a sweep stored it before fingerprints
    stored.save(path)
    with pytest.raises(cs.ModelError, match="another model.*initial state differ"):
        cs.studies.sweep(tilted, grid, T_END, DT, tmp_path)
    again = cs.studies.sweep(cs.problems.heavy_top, [grid_member], T_END, DT, tmp_path)  # the same model: taken
    np.testing.assert_array_equal(again["q"].values, first["q"].values)
    with pytest.raises(cs.FileError, match="is the directory of a sweep"):
        cs.Solution.load(tmp_path)


def test_a_truncated_member_file_is_run_again(tmp_path):
    """A member file cut short (a disk filled, a copy interrupted) or edited is not counted as
    done: the sweep warns and runs that member again (before: the sweep failed reading it), and
    the result is the sweep's first one."""
    grid = {"density": [2700.0, 5000.0]}
    first = cs.studies.sweep(cs.problems.heavy_top, grid, T_END, DT, tmp_path)
    cut, kept = (member_path(tmp_path, {"density": d}) for d in grid["density"])
    cut.write_bytes(cut.read_bytes()[:1000])
    before = kept.stat().st_mtime_ns
    with pytest.warns(UserWarning, match=r"stored member \{'density': 2700.0\} cannot be read.*run again"):
        again = cs.studies.sweep(cs.problems.heavy_top, grid, T_END, DT, tmp_path)
    xr = pytest.importorskip("xarray")
    xr.testing.assert_identical(again.drop_vars("stats"), first.drop_vars("stats"))  # (stats: run times)
    assert kept.stat().st_mtime_ns == before and cs.Solution.load(cut).stats["parameters"] == {"density": 2700.0}


def dropped(z0):
    """A point mass dropped from z0 onto a potential that is NaN below z = 0 (z0 = 1e-6: its
    first step fails)."""
    bob = cs.PointMass("bob", mass=1.0, position=(0.0, 0.0, z0))
    well = cs.Potential([bob], invariants=lambda f: f.position[2], energy=lambda pi: 1e-3 * jnp.sqrt(pi[0]),
                        name="sqrt-well")
    return cs.System([bob, cs.Gravity(), well])


@pytest.mark.parametrize("batch", [1, 2])
def test_a_sweep_whose_members_failed_says_so(tmp_path, batch):
    """A member whose step fails is stored with its steps up to the failure, and the sweep raises
    a SimulationError naming it, carrying every member's Dataset (before: the sweep returned as
    if all had run); allow_failures=True returns that Dataset, whose ``failure`` says which and
    why; the failed member is not run again."""
    grid = {"z0": [1.0, 1e-6]}
    with pytest.raises(cs.SimulationError, match=r"the step of 1 of 2 members failed: \{'z0': 1e-06\}") as err:
        cs.studies.sweep(dropped, grid, T_END, DT, tmp_path, batch=batch)
    result = err.value.partial_solution
    assert result["failure"].values[0] == "" and "Newton" in result["failure"].values[1]
    assert np.isnan(result["q"].values[1, 1:]).all() and np.isfinite(result["q"].values[0]).all()
    failed = member_path(tmp_path, {"z0": 1e-6})
    before = failed.stat().st_mtime_ns
    allowed = cs.studies.sweep(dropped, grid, T_END, DT, tmp_path, batch=batch, allow_failures=True)
    xr = pytest.importorskip("xarray")
    xr.testing.assert_identical(allowed, result)
    assert failed.stat().st_mtime_ns == before
    allowed.to_netcdf(tmp_path / "sweep.nc")  # a sweep's Dataset reads back from netCDF
    with xr.open_dataset(tmp_path / "sweep.nc") as back:
        xr.testing.assert_identical(back.load(), allowed)


@pytest.mark.slow
def test_a_sweep_on_a_local_dask_cluster(tmp_path, monkeypatch):
    """dask.distributed, the multi-machine engine, on a local cluster of 2 worker processes: a
    worker killed by a member loses no finished member, the rerun on the cluster runs the rest,
    and the result is the in-process sweep's bit for bit."""
    import dask
    from dask.distributed import Client, LocalCluster

    here = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path / "here")
    monkeypatch.setenv("SWEEP_DIRECTORY", str(tmp_path / "there"))  # before the workers start
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        with pytest.raises(cs.SimulationError, match="members were not stored"):
            cs.studies.sweep(fragile, GRID, T_END, DT, tmp_path / "there", executor=client)
        stored = sorted((tmp_path / "there").glob("member-*.npz"))
        assert set(stored) == _finished(tmp_path / "there")
        before = {p: p.stat().st_mtime_ns for p in stored}
        there = cs.studies.sweep(cs.problems.heavy_top, GRID, T_END, DT, tmp_path / "there", executor=client)
    assert {p: p.stat().st_mtime_ns for p in stored} == before
    for name in ("q", "v", "multipliers"):
        assert np.array_equal(here[name].values, there[name].values)
