"""sweep(make_system, grid, t_end, dt, directory, executor=...) -> xarray.Dataset: a parameter
study whose members run anywhere and are stored one file per member.

Every member is ``make_system(**parameters)`` for one point of the grid, run by
:func:`conserve.simulate` (or, ``batch`` members at a time, by :func:`conserve.simulate_batch`)
and saved to ``directory`` as its own Solution file (written to a temporary name and renamed,
so a file is either complete or absent). A rerun skips every member whose file exists: a sweep
that was interrupted — a killed worker, a lost machine, Ctrl-C — goes on where it stopped, and
nothing finished is lost. The members run on any executor with ``submit`` (a
``concurrent.futures`` pool, or a ``dask.distributed.Client`` for many machines: ``Client()``
for a local cluster, ``Client("tcp://scheduler:8786")`` for one already running) or, without
one, in this process. The results are gathered from the files into one ``xarray.Dataset`` with
a ``member`` dimension and the parameters as its coordinates.

``make_system`` and the parameters travel to the workers by pickling: a module-level function
(e.g. ``conserve.problems.heavy_top``) and plain numbers or strings.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path

from ..compilation import resolved_mode
from ..ensemble import simulate_batch
from ..export import members_to_xarray
from ..errors import ConvergenceError, ModelError, SimulationError, is_count
from ..model.system import as_assembly
from ..simulate import planned_work, simulate
from ..solution import Solution


def sweep(make_system, grid, t_end, dt, directory, *, executor=None, batch=1, **options):
    """Run ``make_system(**parameters)`` for every point of ``grid`` and return the members as one
    ``xarray.Dataset`` (dimension ``member``; a coordinate per parameter).

    Parameters
    ----------
    make_system : function of the parameters returning a System (module-level: it is pickled)
    grid : {name: values} (every combination, in order) or a list of {name: value} members
    t_end, dt : s, as in :func:`conserve.simulate`
    directory : where each member's Solution is stored (``member-<hash>.npz``, the hash of its
        parameters); members already stored there are not run again. The sweep's settings
        (t_end, dt, options) are recorded there (``sweep.json``): a sweep with other settings is
        refused rather than handed the stored members (make_system is yours to keep the same)
    executor : None (run here) or any object with ``submit(fn, *args)`` returning a future with
        ``result()``: a ``concurrent.futures`` executor or a ``dask.distributed.Client``
    batch : members per task; more than one run as one vmapped ensemble
        (:func:`conserve.simulate_batch`: they must share a structure)
    options : passed to :func:`conserve.simulate` (backend, newton, …)

    A member whose step fails is stored with its steps up to the failure (``stats["failure"]``
    says why). A task that fails (a worker killed, an error in ``make_system``) does not stop the
    others; a SimulationError then lists the members not stored, and calling sweep again runs
    just those.
    """
    members = _members(grid)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _claim(directory, t_end, dt, options)
    todo = [m for m in members if not member_path(directory, m).exists()]
    if not (is_count(batch) and batch >= 1):
        raise ModelError(f"sweep: batch must be an integer ≥ 1, got {batch!r}.")
    tasks = [todo[i:i + batch] for i in range(0, len(todo), batch)]
    errors = []
    if executor is None:
        for task in tasks:
            run_members(make_system, task, t_end, dt, str(directory), options, len(members))
    else:
        futures = [executor.submit(run_members, make_system, task, t_end, dt, str(directory), options, len(members))
                   for task in tasks]
        for future in futures:
            try:
                future.result()
            except Exception as err:  # noqa: BLE001  (any task's failure: report, keep the others)
                errors.append(err)
    missing = [m for m in members if not member_path(directory, m).exists()]
    if missing:
        raise SimulationError(
            f"sweep: {len(missing)} of {len(members)} members were not stored ({missing[:3]}"
            f"{' …' if len(missing) > 3 else ''}; first error: {errors[0] if errors else 'none'}). The "
            f"{len(members) - len(missing)} stored in {directory} are kept: call sweep again to run the rest.")
    return gather(directory, members)


def run_members(make_system, members, t_end, dt, directory, options, n_members=1):
    """Run and store one task's members (in a worker): each alone, or all as one ensemble. Members
    stored already are skipped, so a task run twice (an executor recomputing a result lost with a
    worker, as dask does) rewrites nothing. ``n_members``: the whole sweep's, for compile="auto"."""
    members = [m for m in members if not member_path(directory, m).exists()]
    if not members:
        return
    if len(members) == 1:
        assembly = as_assembly(make_system(**members[0]), "sweep")
        try:
            solution = simulate(assembly, t_end, dt, **_sweep_code(assembly, t_end, dt, options, n_members))
            failure = None
        except ConvergenceError as err:
            solution, failure = err.partial_solution, str(err)
        _store(directory, members[0], solution, failure)
        return
    assemblies = [as_assembly(make_system(**m), "sweep") for m in members]
    ensemble = simulate_batch(assemblies, t_end, dt, **_sweep_code(assemblies[0], t_end, dt, options, n_members))
    for i, (m, solution) in enumerate(zip(members, ensemble)):
        failure = ensemble.failures.get(i)
        _store(directory, m, solution, None if failure is None else str(failure))


def _sweep_code(assembly, t_end, dt, options, n_members):
    """``options`` with compile="auto" resolved by the whole sweep's work, ``n_members`` times this
    member's run (their compiled code is shared: many short runs pay for quick code), so every
    member runs the same code however the sweep is batched, spread or resumed."""
    if options.get("compile", "auto") != "auto":
        return options
    work = planned_work(assembly.model, t_end, dt, **{k: options[k] for k in ("backend", "newton", "order", "t0")
                                                      if k in options}, who="sweep")
    return {**options, "compile": resolved_mode("auto", None if work is None else n_members * work)}


def gather(directory, members):
    """The stored members as one ``xarray.Dataset`` along ``member``, the parameters as
    coordinates (a failed member's missing times are NaN)."""
    result = members_to_xarray([Solution.load(member_path(directory, m)) for m in members])
    return result.assign_coords({name: ("member", [m[name] for m in members]) for name in members[0]})


def _claim(directory, t_end, dt, options):
    """Record the sweep's settings in ``directory`` (``sweep.json``), or refuse if the members
    stored there were run with others (a different t_end, dt or option): they would be returned as
    this sweep's."""
    def named(x):  # functions and classes by name (their repr holds an address), the rest by repr
        return f"{getattr(x, '__module__', '')}.{x.__qualname__}" if hasattr(x, "__qualname__") else repr(x)

    settings = {"t_end": repr(t_end), "dt": named(dt),
                "options": {k: named(v) for k, v in sorted(options.items())}}
    path = directory / "sweep.json"
    if path.exists():
        stored = json.loads(path.read_text())
        differ = [k for k in settings if stored.get(k) != settings[k]]
        if differ:
            raise ModelError(f"sweep: {directory} holds the members of another sweep (its "
                             + "; ".join(f"{k} {stored.get(k)}, now {settings[k]}" for k in differ)
                             + "): give this sweep its own directory, or remove that one to run again.")
        return
    partial = path.with_name(f"sweep.{os.getpid()}.partial.json")
    partial.write_text(json.dumps(settings, sort_keys=True))
    os.replace(partial, path)


def member_path(directory, member) -> Path:
    """The file of one member: ``member-<sha256 of its parameters, 16 hex>.npz``."""
    key = hashlib.sha256(json.dumps(member, sort_keys=True).encode()).hexdigest()[:16]
    return Path(directory) / f"member-{key}.npz"


def _store(directory, member, solution, failure):
    """Save atomically (a temporary name, then renamed): a file is complete or absent."""
    solution.stats["parameters"] = member
    if failure is not None:
        solution.stats["failure"] = failure
    path = member_path(directory, member)
    partial = path.with_name(path.stem + f".{os.getpid()}.partial.npz")
    solution.save(partial)
    os.replace(partial, path)


def _members(grid):
    """The list of {name: value} members of a grid (every combination) or of a list of members,
    checked to be JSON numbers, strings or booleans (they name the files and travel to workers)."""
    if isinstance(grid, dict):
        names = list(grid)
        members = [dict(zip(names, values)) for values in itertools.product(*(list(grid[n]) for n in names))]
    else:
        members = [dict(m) for m in grid]
    if not members:
        raise ModelError("sweep: the grid has no members.")
    clean = []
    for m in members:
        if set(m) != set(members[0]):
            raise ModelError(f"sweep: every member needs the parameters {sorted(members[0])}, got {sorted(m)}.")
        m = {k: v.item() if hasattr(v, "item") else v for k, v in m.items()}  # numpy scalars as Python's
        if not all(isinstance(v, (bool, int, float, str)) for v in m.values()):
            raise ModelError(f"sweep: parameters must be numbers, strings or booleans, got {m}.")
        clean.append(m)
    return clean
