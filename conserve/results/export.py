"""Export of a :class:`~conserve.Solution`: npz (save/load, with a format version), CSV, an
``xarray.Dataset`` with named dimensions and units, netCDF.

A Solution needs no model to be read back: it stores the coordinate layout of its parts, so
``sol["top"].rotation`` works on a loaded file too. Loading reads arrays and JSON only (never
pickles): anything that is not a file :func:`save` wrote raises
:class:`~conserve.errors.FileError`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..errors import FileError
from .files import content_digest, json_record, load_npz

#: Version of the npz layout written by :func:`save` (2: ``substeps`` added; 3: a ``checksum`` of
#: the contents). Versions 1 and 2 still load (without a checksum to verify; version 1 with one
#: sub-step per step).
FORMAT_VERSION = 3


#: the node and step arrays a Solution file holds (the Solution's array fields)
ARRAYS = ("t", "q", "v", "s", "p", "theta", "multipliers", "newton_iterations", "work", "dissipation", "substeps")


def save(sol, path):
    """Write all arrays and metadata of ``sol`` to an .npz file (format version FORMAT_VERSION;
    ``.npz`` is appended to a name without it, as numpy does), with the sha256 of its contents
    (:func:`conserve.results.files.content_digest`) under ``checksum``, which :func:`read` verifies."""
    if Path(path).is_dir():  # numpy would write "<directory>.npz" beside it
        raise FileError(f"Solution.save: {path} is a directory; give a file name, e.g. {Path(path) / 'run.npz'}.")
    meta = {"format_version": FORMAT_VERSION, "layout": sol.layout, "stats": sol.stats}
    arrays = {"meta": json.dumps(meta), **{k: getattr(sol, k) for k in ARRAYS},
              **{f"diag_{k}": a for k, a in sol.diagnostics.items()}}
    np.savez(path, checksum=content_digest(arrays), **arrays)


def read(path) -> dict:
    """The fields of the Solution in a file written by :func:`save` (the ``.npz`` suffix may be
    omitted, as in save): its :data:`ARRAYS`, ``layout``, ``diagnostics`` and ``stats``, for
    ``Solution(**fields)`` (:meth:`conserve.Solution.load`). Anything else (corrupt, truncated,
    foreign, a newer format, a directory) raises :class:`~conserve.errors.FileError`, and so does a
    file whose contents no longer match its checksum (edited or damaged after it was written);
    nothing in the file is executed (no pickles)."""
    path = str(path)
    who = "Solution.load"
    _refuse_directory(Path(path), who)
    if not path.endswith(".npz"):
        path += ".npz"
    arrays = load_npz(path, who)
    meta = json_record(arrays, "meta", path, who)
    version = meta.get("format_version")
    if version not in (1, 2, FORMAT_VERSION):
        raise FileError(f"{who}: {path} has format version {version}; this conserve reads "
                        f"1…{FORMAT_VERSION} (written by a newer conserve? upgrade it).")
    if version >= 3:
        stored = str(arrays.pop("checksum", ""))
        if stored != content_digest(arrays):
            raise FileError(f"{who}: {path} was changed after it was written (its contents do not match the "
                            + ("checksum it carries" if stored else "checksum it lacks")
                            + ": edited or damaged); it was not loaded. Load an unchanged copy, or rerun the "
                            "simulation that wrote it.")
    try:
        fields = {k: arrays[k] for k in ARRAYS if k in arrays}
        fields.setdefault("substeps", np.ones(len(fields["newton_iterations"]), np.int32))
        layout = dict(meta["layout"])
        layout["parts"] = {k: tuple(v) for k, v in layout["parts"].items()}
        fields.update(layout=layout, diagnostics={k[5:]: a for k, a in arrays.items() if k.startswith("diag_")},
                      stats=dict(meta["stats"]))
        missing = [k for k in ARRAYS if k not in fields]
        if missing:
            raise KeyError(", ".join(missing))
        n = len(fields["t"])
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise FileError(f"{who}: {path} is not a complete conserve Solution ({type(err).__name__}: "
                        f"{err}).") from None
    if any(len(fields[k]) != n for k in ("q", "v", "s", "p", "theta")) or \
            any(len(fields[k]) != n - 1 for k in ("multipliers", "newton_iterations", "work")):
        raise FileError(f"{who}: {path} is inconsistent: its arrays do not have {n} nodes and {n - 1} steps.")
    return fields


def _refuse_directory(path: Path, who):
    """A FileError saying what the directory ``path`` holds and how to read it."""
    if not path.is_dir():
        return
    if (path / "run.npz").exists():
        raise FileError(f"{who}: {path} is a checkpoint directory (simulate(..., checkpoint=path)), not a Solution "
                        f"file; a checkpoint is continued with cs.resume({str(path)!r}, system), which returns the "
                        "run's Solution (a finished run's at once).")
    if (path / "sweep.json").exists():
        raise FileError(f"{who}: {path} is the directory of a sweep (cs.studies.sweep), not a Solution file; "
                        "calling sweep again with the same arguments returns its members (stored ones are not "
                        "run again), or load one member's file, member-<hash>.npz "
                        "(conserve.studies.sweep.member_path).")
    files = sorted(p.name for p in path.glob("*.npz"))
    raise FileError(f"{who}: {path} is a directory, not a Solution file; give the file sol.save wrote"
                    + (f", e.g. {path / files[0]} ({len(files)} .npz file(s) there)" if files else
                       " (there is no .npz file in it)") + ".")


def to_xarray(sol, keep_empty=False):
    """``sol`` as an ``xarray.Dataset`` (xarray is optional: ``pip install xarray``).

    Dimensions: ``time`` (N+1 nodes, s), ``step`` (N steps, labelled by t_{n+½}),
    ``coordinate`` (n_q, "part.block_axis" with blocks x, d1, d2, d3), ``part``, ``body``,
    ``axis`` (x, y, z), ``quaternion`` (w, x, y, z), ``constraint_row`` ("owner: equation"),
    ``joint_coordinate``, ``rotor``, ``work_element``, ``dissipation_element``. Every variable
    carries its ``units``; ``attrs`` hold the layout, stats and format version (JSON). A run with
    controllers adds their carry at the nodes, ``control.<name>.<what>`` (:meth:`conserve.Solution.controller`).
    Dimensions of length 0 (``rotor`` of a model without hybrid rotors, …) are left out with
    their variables (unless ``keep_empty``), so that the Dataset, and a concatenation of such
    Datasets (:func:`members_to_xarray`), writes a netCDF file that reads back: netCDF3, which
    xarray writes with scipy when netCDF4/h5netcdf are not installed, reads a length-0 dimension
    as the unlimited one and fails."""
    try:
        import xarray as xr
    except ImportError:
        raise ImportError("Solution.to_xarray needs xarray: pip install xarray (or use save/to_csv).") from None
    labels = []
    for name, (kind, _, n) in sol.parts.items():
        labels += [f"{name}.{b}_{c}" for b in ["x", "d1", "d2", "d3"][:n] for c in "xyz"]
    rigid = [n for n, (_, _, k) in sol.parts.items() if k == 4]
    xyz = ("axis",)
    data = {
        "q": (("time", "coordinate"), sol.q, "m (directors: 1)", "director coordinates"),
        "v": (("time", "coordinate"), sol.v, "m/s (directors: 1/s)", "director velocities"),
        "position": (("time", "part", *xyz), np.stack([sol[n].position for n in sol.parts], 1), "m",
                     "centre of mass"),
        "orientation": (("time", "body", "quaternion"),
                        np.stack([sol[n].quaternion for n in rigid], 1) if rigid else np.zeros((len(sol), 0, 4)),
                        "1", "unit quaternion of the body frame"),
        "joint_coordinates": (("time", "joint_coordinate"), sol.s, "rad or m", "tracked joint coordinates"),
        "rotor_momentum": (("time", "rotor"), sol.p, "kg m2/s", "axial angular momentum of hybrid rotors"),
        "rotor_angle": (("time", "rotor"), sol.theta, "rad", "spin angle of hybrid rotors"),
        "kinetic_energy": (("time",), sol.energy.kinetic, "J", "kinetic energy"),
        "potential_energy": (("time",), sol.energy.potential, "J", "potential energy"),
        "linear_momentum": (("time", *xyz), sol.linear_momentum, "kg m/s", "linear momentum"),
        "angular_momentum": (("time", *xyz), sol.angular_momentum, "kg m2/s", "angular momentum about the origin"),
        "constraint_residual": (("time",), sol.constraint_residual, "m or 1", "max |g| over all rows"),
        "multipliers": (("step", "constraint_row"), sol.multipliers, "N or N m (per row)",
                        "Lagrange multipliers at t_{n+1/2}"),
        "newton_iterations": (("step",), sol.newton_iterations, "1", "Newton iterations"),
        "substeps": (("step",), sol.substeps, "1", "sub-steps taken"),
        "work": (("step", "work_element"), sol.work, "J", "discrete work of motors and loads"),
        "dissipation": (("step", "dissipation_element"), sol.dissipation, "J", "energy removed by dampers"),
    }
    t_mid = 0.5 * (sol.t[1:] + sol.t[:-1])
    coords = {"time": ("time", sol.t, {"units": "s"}), "step": ("step", t_mid, {"units": "s"}),
              "coordinate": labels, "part": list(sol.parts), "body": rigid, "axis": list("xyz"),
              "quaternion": list("wxyz"), "constraint_row": [f"{o}: {r}" for o, r in sol.constraint_rows],
              "joint_coordinate": list(sol.layout["coordinate_names"]), "rotor": list(sol.layout["rotors"]),
              "work_element": list(sol.layout["work_names"]),
              "dissipation_element": list(sol.layout["dissipation_names"])}
    variables = {k: (dims, np.asarray(a), {"units": u, "long_name": ln}) for k, (dims, a, u, ln) in data.items()}
    for key, a in sol.diagnostics.items():  # the controllers' carry at the nodes (Solution.controller reads it)
        if key.startswith("control."):
            a = np.asarray(a, float)
            dims = ("time", *(f"{key}.axis{i}" for i in range(1, a.ndim)))
            variables[key] = (dims, a, {"units": "the law's", "long_name": f"controller carry at the nodes: {key}"})
    attrs = {"format_version": FORMAT_VERSION, "layout": json.dumps(sol.layout), "stats": json.dumps(sol.stats),
             "source": "conserve"}
    ds = xr.Dataset(variables, coords=coords, attrs=attrs)
    return ds if keep_empty else _without_empty(ds)


def members_to_xarray(solutions):
    """The :func:`to_xarray` Datasets of ``solutions`` (of one model structure: an ensemble's, a
    sweep's members) along a new dimension ``member``, joined on their times (a member with fewer
    nodes, one that failed, has NaN at the times it lacks); dimensions of length 0 in every member
    are left out as in :func:`to_xarray`. Each member's stats are the variable ``stats``
    (member,) (JSON), the attrs those the members share (layout, format version)."""
    import xarray as xr

    ds = xr.concat([to_xarray(sol, keep_empty=True) for sol in solutions], dim="member", join="outer")
    stats = [json.dumps(sol.stats) for sol in solutions]
    ds = ds.assign(stats=("member", stats, {"long_name": "the member's Solution.stats (JSON)"}))
    ds.attrs.pop("stats", None)
    return _without_empty(ds)


def _without_empty(ds):
    """``ds`` without its dimensions of length 0 and their variables."""
    return ds.drop_dims([d for d, n in ds.sizes.items() if n == 0])


def to_netcdf(sol, path):
    """Write :func:`to_xarray` to a netCDF file (needs xarray; without netCDF4/h5netcdf, scipy
    writes netCDF3); ``xarray.open_dataset(path)`` reads it back with the same values."""
    to_xarray(sol).to_netcdf(path)


def csv_columns(sol) -> dict:
    """{column name with its unit in brackets: (N+1,) values} of :func:`to_csv`, in its order."""
    cols = {"t [s]": sol.t, "kinetic_energy [J]": sol.energy.kinetic, "potential_energy [J]": sol.energy.potential,
            "total_energy [J]": sol.energy.total}
    for i, c in enumerate("xyz"):
        cols[f"linear_momentum_{c} [kg m/s]"] = sol.linear_momentum[:, i]
    for i, c in enumerate("xyz"):
        cols[f"angular_momentum_{c} [kg m^2/s]"] = sol.angular_momentum[:, i]
    cols["constraint_residual [m or 1]"] = sol.constraint_residual
    body_rotors = sol.layout.get("body_rotors", {})
    # a rotor is reported by its rotor columns alone, so both rotor models give the same columns
    bearings = {f"{r} joint": r for r in body_rotors}
    for name in sol.parts:
        if name in body_rotors:
            continue
        part = sol[name]
        for i, c in enumerate("xyz"):
            cols[f"{name}.x_{c} [m]"] = part.position[:, i]
        if part.rigid:
            for i, c in enumerate("wxyz"):
                cols[f"{name}.q_{c} [1]"] = part.quaternion[:, i]
        for i, c in enumerate("xyz"):
            cols[f"{name}.v_{c} [m/s]"] = part.velocity[:, i]
        if part.rigid:
            for i, c in enumerate("xyz"):
                cols[f"{name}.omega_{c} [rad/s]"] = part.angular_velocity[:, i]
    for name in list(sol.layout.get("rotors", [])) + list(body_rotors):
        rotor = sol.rotor(name)
        cols[f"{name}.angle [rad]"], cols[f"{name}.rate [rad/s]"] = rotor.angle, rotor.rate
        cols[f"{name}.axial_momentum [kg m^2/s]"] = rotor.momentum
    for name in sol.joints:
        if name in bearings:
            continue
        joint = sol.joint(name)
        for kind, unit in (("angle", "rad"), ("slide", "m")):
            if getattr(joint, kind) is not None:
                cols[f"{name}.{kind} [{unit}]"] = getattr(joint, kind)
                cols[f"{name}.{kind}_rate [{unit}/s]"] = getattr(joint, kind + "_rate")
    # element work and dissipation (a rotor's motor and bearing under the rotor's name) from t0 to
    # each node, and every rotor with a dissipation column (0 without friction)
    for name, w in sol.cumulative_work.items():
        cols[f"{name}.cumulative_work [J]"] = w
    dissipated = sol.cumulative_dissipation
    for name in list(sol.layout.get("rotors", [])) + list(body_rotors):
        dissipated.setdefault(name, np.zeros(len(sol)))
    for name, d in dissipated.items():
        cols[f"{name}.cumulative_dissipation [J]"] = d
    return cols


def to_csv(sol, path):
    """Time series with a header row, every column named with its unit in brackets
    (:func:`csv_columns`): t, energies, momenta, constraint residual; per part its position,
    quaternion (w, x, y, z; rigid bodies), velocity and angular velocity (``"<part>.x_x [m]"``
    …); per rotor its angle, relative rate and axial momentum; per joint with an angle or slide
    both and their rates (:meth:`conserve.Solution.joint`); per element the work done and the
    energy dissipated from t0 to the node (``"<name>.cumulative_work [J]"``,
    ``"<name>.cumulative_dissipation [J]"``: :attr:`conserve.Solution.cumulative_work`, not the
    per-step :attr:`~conserve.Solution.work_per_step`). A rotor has the same columns in the
    hybrid and the full-body model (the full-body rotor's part, bearing joint, motor and bearing damper appear
    only under the rotor's name). Written with the csv module, so names with commas, quotes or
    newlines are quoted (RFC 4180) and read back intact by any CSV reader; numbers in their
    shortest exact form."""
    cols = csv_columns(sol)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(cols)
        writer.writerows([repr(float(x)) for x in row] for row in np.column_stack(list(cols.values())))
