"""Solution: part views, export round trips, one compilation per model structure."""

import pickle
import sys

import numpy as np
import pytest
from conftest import compiles_nothing
from scipy.spatial.transform import Rotation

import conserve as cs
from conserve import problems
from conserve.model.assembled import State
from conserve.problems import HeavyTop
from conserve.results.export import ARRAYS
from conserve.results.solution import diagnostics
from conserve.run.chunks import MAX_COMPILED, compiled_count


@pytest.fixture(scope="module")
def sol():
    return cs.simulate(HeavyTop().system(), t_end=0.2, dt=2e-3)


def test_part_view_kinematics(sol):
    top = sol["top"]
    R = top.rotation
    assert R.shape == (101, 3, 3)
    np.testing.assert_allclose(Rotation.from_quat(top.quaternion, scalar_first=True).as_matrix(), R,
                               atol=1e-12)
    quat = top.quaternion
    assert quat[0, 0] >= 0 and np.all(np.sum(quat[1:] * quat[:-1], axis=1) > 0)  # continuous in time
    np.testing.assert_allclose(np.einsum("nji,nj->ni", R, top.angular_velocity),
                               top.angular_velocity_body, atol=1e-12)
    # the initial state is the one given: Ω0 = ω_p e3 + ω_s d3
    p = HeavyTop()
    np.testing.assert_allclose(top.angular_velocity[0], p.omega_p * np.array([0, 0, 1.0]) + p.omega_s * R[0, :, 2],
                               rtol=1e-13)
    with pytest.raises(KeyError, match="parts: \\['top'\\]"):
        sol["wheel"]


def test_orientation_descriptions_agree():
    a = np.pi / 3
    Rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    from_q = cs.RigidBody("b", 1.0, (1, 1, 1), quaternion=(np.cos(a / 2), np.sin(a / 2), 0, 0))
    from_e = cs.RigidBody("b", 1.0, (1, 1, 1), euler=("ZXZ", (0.0, a, 0.0)))
    from_m = cs.RigidBody("b", 1.0, (1, 1, 1), orientation=Rx)
    for b in (from_q, from_e, from_m):
        np.testing.assert_allclose(b.rotation, Rx, atol=1e-15)


def test_save_load_round_trip(sol, tmp_path):
    sol.save(tmp_path / "run.npz")
    back = cs.Solution.load(tmp_path / "run.npz")
    for name in ("t", "q", "v", "multipliers", "newton_iterations"):
        np.testing.assert_array_equal(getattr(back, name), getattr(sol, name))
    np.testing.assert_array_equal(back.energy.total, sol.energy.total)
    np.testing.assert_array_equal(back["top"].rotation, sol["top"].rotation)
    assert back.constraint_rows == sol.constraint_rows


def test_a_solution_pickles_with_its_multipliers():
    """A Solution whose multipliers are still to be computed (on first read) travels by pickle (a
    worker's result, an error's partial solution) with them."""
    fresh = cs.simulate(HeavyTop().system(), t_end=0.02, dt=2e-3)
    back = pickle.loads(pickle.dumps(fresh))
    for name in ("q", "v", "multipliers"):
        np.testing.assert_array_equal(getattr(back, name), getattr(fresh, name))
    assert np.all(np.isfinite(back.multipliers)) and np.max(np.abs(back.multipliers)) > 0


def test_load_accepts_the_name_save_was_given(sol, tmp_path):
    sol.save(tmp_path / "run")
    np.testing.assert_array_equal(cs.Solution.load(tmp_path / "run").q, sol.q)


def test_version_1_files_still_load(sol, tmp_path):
    """Files written before ``substeps`` existed load with one sub-step per step."""
    import json

    sol.save(tmp_path / "run.npz")
    with np.load(tmp_path / "run.npz") as f:
        arrays = {k: f[k] for k in f.files if k != "substeps"}
    meta = json.loads(str(arrays["meta"]))
    arrays["meta"] = json.dumps({**meta, "format_version": 1})
    np.savez(tmp_path / "old.npz", **arrays)
    back = cs.Solution.load(tmp_path / "old.npz")
    np.testing.assert_array_equal(back.substeps, np.ones(len(sol) - 1))
    arrays["meta"] = json.dumps({**meta, "format_version": 99})
    np.savez(tmp_path / "new.npz", **arrays)
    with pytest.raises(cs.FileError, match="format version 99"):
        cs.Solution.load(tmp_path / "new.npz")


def test_saving_to_a_directory_is_refused(sol, tmp_path):
    """numpy would write "<directory>.npz" beside the directory; the error asks for a file name."""
    with pytest.raises(cs.FileError, match="is a directory; give a file name"):
        sol.save(tmp_path)
    assert not tmp_path.with_suffix(".npz").exists()


def test_xarray_and_netcdf_export(sol, tmp_path):
    xr = pytest.importorskip("xarray")
    ds = sol.to_xarray()
    assert ds.sizes["time"] == len(sol) and ds.sizes["step"] == len(sol) - 1
    np.testing.assert_array_equal(ds["position"].sel(part="top").values, sol["top"].position)
    np.testing.assert_array_equal(ds["orientation"].sel(body="top").values, sol["top"].quaternion)
    np.testing.assert_array_equal(ds["angular_momentum"].sel(axis="z").values, sol.angular_momentum[:, 2])
    assert ds["kinetic_energy"].attrs["units"] == "J" and ds["time"].attrs["units"] == "s"
    np.testing.assert_allclose(ds["step"].values, sol.t[:-1] + 0.5 * np.diff(sol.t))
    sol.to_netcdf(tmp_path / "run.nc")
    back = xr.open_dataset(tmp_path / "run.nc")
    np.testing.assert_array_equal(back["q"].values, sol.q)
    assert list(back["constraint_row"].values) == [f"{o}: {r}" for o, r in sol.constraint_rows]
    back.close()


def _read_csv(path):
    """{column name: (n,) floats} of a CSV file, read with the csv module."""
    import csv

    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    assert all(len(r) == len(header) for r in rows)
    return dict(zip(header, np.array(rows, float).T))


def test_every_export_reads_back_with_the_same_values(sol, tmp_path):
    """npz, CSV and netCDF of the heavy top (no rotors, joint coordinates, work or dissipation:
    dimensions of length 0) and of the spacecraft (rotors and motors) read back with the values
    written, exactly: the npz every array, diagnostic and record; the CSV every column; the netCDF
    (scipy's netCDF3 writer) the whole Dataset of to_xarray."""
    import json

    from conserve.results.export import csv_columns

    xr = pytest.importorskip("xarray")
    spacecraft = cs.simulate(problems.spacecraft(), t_end=0.02, dt=1e-2)
    for name, run in (("top", sol), ("spacecraft", spacecraft)):
        run.save(tmp_path / f"{name}.npz")
        back = cs.Solution.load(tmp_path / f"{name}.npz")
        for field in ARRAYS:
            np.testing.assert_array_equal(getattr(back, field), getattr(run, field), err_msg=field)
            assert getattr(back, field).dtype == getattr(run, field).dtype, field
        assert back.diagnostics.keys() == run.diagnostics.keys()
        for key, value in run.diagnostics.items():
            np.testing.assert_array_equal(back.diagnostics[key], value, err_msg=key)
        for record in ("layout", "stats"):  # as JSON (tuples are read back as lists)
            assert json.dumps(getattr(back, record), sort_keys=True) == json.dumps(getattr(run, record), sort_keys=True)

        run.to_csv(tmp_path / f"{name}.csv")
        written = csv_columns(run)
        read = _read_csv(tmp_path / f"{name}.csv")
        assert list(read) == list(written)
        for column, values in written.items():
            np.testing.assert_array_equal(read[column], values, err_msg=column)

        run.to_netcdf(tmp_path / f"{name}.nc")
        with xr.open_dataset(tmp_path / f"{name}.nc") as nc:
            xr.testing.assert_identical(nc.load(), run.to_xarray())
    assert spacecraft.to_xarray().sizes["rotor"] == 3 and "rotor" not in sol.to_xarray().sizes


def test_an_edited_solution_file_is_refused_and_older_files_load(sol, tmp_path):
    """A Solution file carries the sha256 of its contents: a file edited after it was written (a
    number changed, a record rewritten, the checksum removed) is refused with a FileError saying
    so; files of versions 1 and 2, written without a checksum, still load."""
    import json

    sol.save(tmp_path / "run.npz")
    with np.load(tmp_path / "run.npz") as f:
        arrays = {k: f[k] for k in f.files}
    q = arrays["q"].copy()
    q[5, 0] += 1e-9
    meta = json.loads(str(arrays["meta"]))
    edits = {"a coordinate": {**arrays, "q": q},
             "the stats": {**arrays, "meta": json.dumps({**meta, "stats": {**meta["stats"], "steps": 7}})},
             "no checksum": {k: a for k, a in arrays.items() if k != "checksum"}}
    for what, edited in edits.items():
        np.savez(tmp_path / "edited.npz", **edited)
        with pytest.raises(cs.FileError, match="edited.npz was changed after it was written"):
            cs.Solution.load(tmp_path / "edited.npz")
    for version in (1, 2):
        old = {k: a for k, a in arrays.items() if k != "checksum"}
        old["meta"] = json.dumps({**meta, "format_version": version})
        np.savez(tmp_path / "old.npz", **old)
        np.testing.assert_array_equal(cs.Solution.load(tmp_path / "old.npz").q, sol.q)


def test_loading_a_directory_says_what_it_holds(tmp_path):
    """Solution.load of a directory: a FileError naming it (before: 'run.npz does not exist', of a
    file nobody named), for a checkpoint directory with how to continue or read it."""
    with pytest.raises(cs.FileError, match=r"empty is a directory, not a Solution file.*no \.npz file"):
        (tmp_path / "empty").mkdir()
        cs.Solution.load(tmp_path / "empty")
    body = cs.RigidBody("b", 1.0, (1.0, 1.0, 1.0), angular_velocity=(0.0, 0.0, 1.0))
    cs.simulate(cs.System([body]), 0.02, 1e-2, checkpoint=tmp_path / "run")
    for path in (tmp_path / "run", str(tmp_path / "run") + "/"):
        with pytest.raises(cs.FileError, match=r"is a checkpoint directory.*cs\.resume\("):
            cs.Solution.load(path)
    assert len(cs.resume(tmp_path / "run", cs.System([body]))) == 3  # what the message offers


def test_work_per_step_and_from_t0_are_named_so(tmp_path):
    """work_per_step (and the older name work_by_element) holds each step's work; cumulative_work
    its sum from t0 to each node, which the CSV writes under that name (likewise dissipation)."""
    run = cs.simulate(problems.spacecraft(), t_end=0.02, dt=1e-2)
    assert run.work_by_element.keys() == run.work_per_step.keys() == run.cumulative_work.keys() != set()
    run.to_csv(tmp_path / "run.csv")
    data = _read_csv(tmp_path / "run.csv")
    for name, per_step in run.work_per_step.items():
        assert per_step.shape == (len(run) - 1,) and run.cumulative_work[name].shape == (len(run),)
        np.testing.assert_array_equal(run.work_by_element[name], per_step)
        np.testing.assert_array_equal(run.cumulative_work[name], np.concatenate([[0.0], np.cumsum(per_step)]))
        np.testing.assert_array_equal(data[f"{name}.cumulative_work [J]"], run.cumulative_work[name])
    assert run.dissipation_by_element.keys() == run.dissipation_per_step.keys() == run.cumulative_dissipation.keys()
    for name, per_step in run.dissipation_per_step.items():
        np.testing.assert_array_equal(run.dissipation_by_element[name], per_step)
        np.testing.assert_array_equal(run.cumulative_dissipation[name], np.concatenate([[0.0], np.cumsum(per_step)]))
        np.testing.assert_array_equal(data[f"{name}.cumulative_dissipation [J]"], run.cumulative_dissipation[name])
    # the energy balance in these terms: E_n − E_0 = Σ cumulative work − Σ cumulative dissipation
    work = sum(run.cumulative_work.values())
    np.testing.assert_allclose(run.energy.total - run.energy.total[0], work, rtol=0,
                               atol=1e-12 * np.max(run.energy.kinetic))


def test_inertia_is_kept_as_given():
    J = [[2.0, 0.1, 0.0], [0.1, 3.0, 0.0], [0.0, 0.0, 4.0]]
    np.testing.assert_array_equal(cs.RigidBody("b", 1.0, J).inertia, J)
    np.testing.assert_array_equal(cs.RigidBody("b", 1.0, (1.0, 2.0, 2.5)).inertia, np.diag([1.0, 2.0, 2.5]))


def test_csv_columns(sol, tmp_path):
    """Every column carries its unit; values are the Solution's, the tip's sensors included."""
    import csv

    sol.to_csv(tmp_path / "run.csv")
    with open(tmp_path / "run.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    data = dict(zip(header, np.array(rows, float).T))
    assert len(rows) == len(sol)
    assert all(h.endswith("]") and " [" in h for h in header)
    np.testing.assert_array_equal(data["total_energy [J]"], sol.energy.total)
    np.testing.assert_array_equal(data["top.q_w [1]"], sol["top"].quaternion[:, 0])
    np.testing.assert_array_equal(data["top.omega_z [rad/s]"], sol["top"].angular_velocity[:, 2])


def test_csv_quotes_names_with_commas_and_newlines(tmp_path):
    """A part named 'arm, "left"\nside' is one quoted column name (before: the header split into
    three and the rows no longer matched it)."""
    import csv

    name = 'arm, "left"\nside'
    body = cs.RigidBody(name, 1.0, (1.0, 1.0, 1.0), velocity=(0.5, 0.0, 0.0))
    run = cs.simulate(cs.System([body]), 0.03, 1e-2)
    run.to_csv(tmp_path / "run.csv")
    with open(tmp_path / "run.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    assert len(rows) == len(run) and all(len(r) == len(header) for r in rows)
    column = [float(r[header.index(f"{name}.x_x [m]")]) for r in rows]
    np.testing.assert_array_equal(column, run[name].position[:, 0])


def test_summary_reports_the_momenta_the_symmetry_conserves():
    """A satellite at rest whose wheel momentum the core cancels has J0 at round-off: the drift
    is reported relative to the size of J's terms (before: relative to J0, 1.6e+01), only for the
    components the model's symmetry conserves, and says which; the heavy top conserves J·e3 only."""
    wheel_momentum = 0.02 * 100.0
    core = cs.RigidBody("core", mass=50.0, inertia=(4.0, 5.0, 6.0), angular_velocity=(0, 0, -wheel_momentum / 6.0))
    wheel = cs.Rotor("wheel", on=core, axis=(0, 0, 1), axial_inertia=0.02, transverse_inertia=0.012,
                     axial_momentum=wheel_momentum)
    run = cs.simulate(cs.System([core, wheel]), 0.2, 1e-2)
    assert np.linalg.norm(run.angular_momentum[0]) <= 1e-14
    text = run.summary()
    line = next(x for x in text.splitlines() if "angular momentum" in x)
    assert "conserved along all components" in line
    relative = float(line.split(" of its scale")[0].rsplit("= ", 1)[1])
    assert relative <= 1e-13
    top = cs.simulate(HeavyTop().system(), 0.02, 2e-3).summary()
    assert "angular momentum    conserved along e3 (symmetry under rotation about the origin)" in top
    assert "linear momentum     not conserved" in top
    # one body under central gravity: every J component, no L component (before, sampled at two
    # configurations, x × Rx passed as a translation symmetry and L "drifted" 32 % along it)
    body = cs.RigidBody("sat", mass=1.0, inertia=(0.1, 0.2, 0.3), position=(1.0, 0, 0), velocity=(0, 1.0, 0))
    orbit = cs.simulate(cs.System([body, cs.CentralGravity(1.0)]), 0.1, 1e-2)
    assert orbit.symmetries == {"angular_momentum": np.eye(3).tolist(), "linear_momentum": []}


def test_an_energy_of_zero_is_no_scale_for_its_errors():
    """A pendulum released at its pivot's height has E0 = 0: the summary states the energy error
    relative to the largest kinetic or |potential| energy reached, and says so (before: "1.78e+286
    of |E0|"); the conservation plot likewise (before: NaN and inf)."""
    from conserve.results.plotting import plot_conservation

    bob = cs.PointMass("bob", 1.0, position=(1.0, 0.0, 0.0))
    run = cs.simulate(cs.System([bob, cs.Distance(cs.ground, bob, points=((0, 0, 0), (1, 0, 0))), cs.Gravity()]),
                      0.3, 1e-2)
    assert run.energy.total[0] == 0.0
    scale = max(np.max(run.energy.kinetic), np.max(np.abs(run.energy.potential)))
    assert run.energy_scale == scale > 1.0
    line = next(x for x in run.summary().splitlines() if x.strip().startswith("energy"))
    assert "|E0|" not in line and f"of its scale {scale:.3g} J (the largest kinetic or |potential| energy" in line
    absolute, relative = (float(x.split()[0]) for x in line.split("max |E - E0| = ")[1].split(" = ")[:2])
    assert absolute == float(f"{np.max(np.abs(run.energy.total)):.2e}")
    assert relative <= 1e-14
    errors = plot_conservation(run).axes[0].lines[0].get_ydata()
    assert np.all(np.isfinite(errors)) and np.max(np.abs(errors)) <= 1e-14


def test_a_loaded_solution_knows_the_symmetries_of_its_model(tmp_path):
    """(before: saved without them unless read first, so the loaded summary judged the heavy top's
    J·e1 and J·e2, which gravity changes, as drift)"""
    sol = cs.simulate(HeavyTop().system(), 0.02, 2e-3)
    sol.save(tmp_path / "top.npz")
    loaded = cs.Solution.load(tmp_path / "top.npz")
    assert loaded.symmetries == sol.symmetries and loaded.symmetries["angular_momentum"] == [[0.0, 0.0, 1.0]]


def test_multipliers_are_the_pivot_force(sol):
    """λ of the tip joint is the force on the ground = −(reaction on the top): m a_c = m g − λ."""
    rows = [i for i, (owner, _) in enumerate(sol.constraint_rows) if owner == "tip"]
    lam = sol.multipliers[:, rows]
    x = sol["top"].position
    dt = sol.t[1] - sol.t[0]
    accel = (x[2:] - 2 * x[1:-1] + x[:-2]) / dt**2  # centred, at interior nodes
    p = HeavyTop()
    lam_node = 0.5 * (lam[1:] + lam[:-1])
    expected = p.mass * (np.array([0, 0, -p.g]) - accel)
    np.testing.assert_allclose(lam_node, expected, atol=1e-9 * np.max(np.abs(expected)))


def test_diagnostics_of_a_fast_run_are_those_of_unoptimized_code():
    """A run compiled for speed evaluates its nodes' diagnostics in blocks of quick code (its first
    node in a short one, the rest in chunk-long ones: ``conserve.results.solution.DIAGNOSTIC_BLOCKS``), a
    short run's in short blocks of unoptimized code: the same quantities to round-off, whatever the
    number of nodes (1,001 here: padded blocks)."""
    assembly = HeavyTop().system().assemble()
    sol = cs.simulate(assembly, 1.0, 1e-3, compile="quick")
    nodes = State(sol.q, sol.v, sol.s, sol.p, sol.theta, np.zeros_like(sol.q))
    plain = diagnostics(assembly.model, nodes, sol.t, "unoptimized")
    assert sol.diagnostics.keys() == plain.keys()
    for key, value in plain.items():
        scale = np.max(np.abs(value), initial=1.0)
        np.testing.assert_allclose(sol.diagnostics[key], value, rtol=0, atol=1e-14 * scale, err_msg=key)


def test_same_structure_compiles_once():
    """New initial states and parameters reuse the compiled step; only shapes matter."""
    cs.simulate(HeavyTop().system(), t_end=0.2, dt=2e-3)
    before = compiled_count()
    sol = cs.simulate(HeavyTop(density=7800.0, alpha0=0.4, omega_p=7.0).system(), t_end=0.2, dt=1e-3)
    assert compiled_count() == before
    assert sol.stats["compile_time"] == 0.0
    # another run length (diagnostics included) reuses it too
    for t_end in (0.202, 0.404):
        assert cs.simulate(HeavyTop().system(), t_end=t_end, dt=2e-3).stats["compile_time"] == 0.0
    assert compiled_count() == before
    # a system with laws built anew (new function objects computing the same) reuses its code;
    # laws that compute something else do not
    first = cs.simulate(problems.spacecraft(), t_end=0.02, dt=1e-2)
    with compiles_nothing():  # neither its assembly's checks nor its run
        again = cs.simulate(problems.spacecraft(), t_end=0.02, dt=1e-2)
    assert again.stats["compile_time"] == 0.0 and np.array_equal(again.q, first.q)
    assert cs.simulate(problems.spacecraft(torque=0.07), t_end=0.02, dt=1e-2).stats["compile_time"] > 0.0
    before = compiled_count()
    # a structure no other test uses: a body and two point masses
    parts = [cs.RigidBody("b", 1.0, (1, 1, 1)), cs.PointMass("p1", 1.0), cs.PointMass("p2", 2.0)]
    assert cs.simulate(cs.System(parts), t_end=0.05, dt=1e-2).stats["compile_time"] > 0.0
    assert compiled_count() == min(before + 1, MAX_COMPILED)


def test_the_compiled_cache_is_bounded(monkeypatch):
    """Old structures are dropped beyond MAX_COMPILED (each holds ~1000+ code mappings), the least
    recently used first (here with a bound of 3, so that five structures show it)."""
    monkeypatch.setattr(sys.modules["conserve.run.chunks"], "MAX_COMPILED", 3)
    systems = [cs.System([cs.PointMass(f"p{i}", 1.0) for i in range(k + 1)]) for k in range(5)]  # a new shape each
    for system in systems:
        cs.simulate(system, t_end=0.02, dt=1e-2)
    assert compiled_count() == 3
    assert cs.simulate(systems[-1], t_end=0.02, dt=1e-2).stats["compile_time"] == 0.0  # kept
    assert cs.simulate(systems[0], t_end=0.02, dt=1e-2).stats["compile_time"] > 0.0  # dropped: compiled again
    assert compiled_count() == 3
