"""sweep(make_system, grid, t_end, dt, directory, executor=...) -> xarray.Dataset: a parameter
study whose members run anywhere and are stored one file per member.

Every member is ``make_system(**parameters)`` for one point of the grid, run by
:func:`conserve.simulate` (or, ``batch`` members at a time, by :func:`conserve.simulate_batch`)
and saved to ``directory`` as its own Solution file (written to a temporary name and renamed,
so a file is either complete or absent), with the fingerprint of its model
(:mod:`conserve.run.fingerprint`). A rerun skips every member stored there, after checking that
``make_system`` still builds that model (a directory of another model is refused), and runs a
member whose file cannot be read (truncated, damaged, edited) again: a sweep that was
interrupted — a killed worker, a lost machine, Ctrl-C — goes on where it stopped, and nothing
finished is lost. The members run on any executor with ``submit`` (a
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
import warnings
from pathlib import Path

import numpy as np

from ..compilation.modes import resolved_mode
from ..errors import ConvergenceError, FileError, ModelError, SimulationError, is_count
from ..model.system import as_assembly
from ..results.export import members_to_xarray
from ..results.solution import Solution, layout_record
from ..run.ensemble import simulate_batch
from ..run.fingerprint import fingerprint
from ..run.options import planned_work
from ..run.simulate import simulate


def sweep(make_system, grid, t_end, dt, directory, *, executor=None, batch=1, allow_failures=False, **options):
    """Run ``make_system(**parameters)`` for every point of ``grid`` and return the members as one
    ``xarray.Dataset`` (dimension ``member``; a coordinate per parameter; ``failure`` (member,):
    why a member's step failed, "" for one that ran to t_end).

    Parameters
    ----------
    make_system : function of the parameters returning a System (module-level: it is pickled)
    grid : {name: values} (every combination, in order) or a list of {name: value} members
    t_end, dt : s, as in :func:`conserve.simulate`
    directory : where each member's Solution is stored (``member-<hash>.npz``, the hash of its
        parameters, with the fingerprint of its model, :mod:`conserve.run.fingerprint`); members
        stored there are not run again. The sweep's settings (t_end, dt, options) are recorded
        there (``sweep.json``): a sweep with other settings is refused rather than handed the
        stored members, and so is one whose ``make_system`` builds another model for a stored
        member's parameters (another structure, number, initial state or law code), since the
        stored members would be returned as its own. A stored file that cannot be read
        (truncated, damaged or edited: :class:`~conserve.errors.FileError`) is run again, with a
        warning.
    executor : None (run here) or any object with ``submit(fn, *args)`` returning a future with
        ``result()``: a ``concurrent.futures`` executor or a ``dask.distributed.Client``
    batch : members per task; more than one run as one vmapped ensemble
        (:func:`conserve.simulate_batch`: they must share a structure)
    allow_failures : False: members whose step failed raise (below); True: they are returned,
        with their ``failure``
    options : passed to :func:`conserve.simulate` (backend, newton, …)

    Raises
    ------
    SimulationError
        if a member's step failed (unless ``allow_failures``): such a member is stored with its
        steps up to the failure (``stats["failure"]`` says why) and the error lists the failed
        members; ``err.partial_solution`` holds the Dataset of all members. Also if a task failed
        (a worker killed, an error in ``make_system``): the others go on, the error lists the
        members not stored, and calling sweep again runs just those.
    ModelError
        if ``directory`` holds members of another sweep (other settings, or another model from
        ``make_system``).
    """
    members = _members(grid)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _claim(directory, t_end, dt, options)
    if not (is_count(batch) and batch >= 1):
        raise ModelError(f"sweep: batch must be an integer ≥ 1, got {batch!r}.")
    stored = {}
    for i, m in enumerate(members):
        sol = _stored(directory, m, warn=True)
        if sol is not None:
            _check_member(directory, make_system, m, sol)
            stored[i] = sol
    todo = [m for i, m in enumerate(members) if i not in stored]
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
    solutions = [stored[i] if i in stored else _stored(directory, m) for i, m in enumerate(members)]
    missing = [m for m, sol in zip(members, solutions) if sol is None]
    if missing:
        raise SimulationError(
            f"sweep: {len(missing)} of {len(members)} members were not stored ({missing[:3]}"
            f"{' …' if len(missing) > 3 else ''}; first error: {errors[0] if errors else 'none'}). The "
            f"{len(members) - len(missing)} stored in {directory} are kept: call sweep again to run the rest.")
    result = _dataset(solutions, members)
    failed = [(m, sol.stats["failure"]) for m, sol in zip(members, solutions) if sol.stats.get("failure")]
    if failed and not allow_failures:
        raise SimulationError(
            f"sweep: the step of {len(failed)} of {len(members)} members failed: {failed[0][0]} ({failed[0][1]})"
            + (f"; also {[m for m, _ in failed[1:4]]}{' …' if len(failed) > 4 else ''}" if len(failed) > 1 else "")
            + f". They are stored in {directory} with their steps up to the failure; err.partial_solution holds "
            "every member's Dataset (its 'failure' says which failed and why). Change the failed members' "
            "settings (a smaller dt, on_failure='subdivide'), or pass allow_failures=True to take them as they "
            "are.", partial_solution=result)
    return result


def run_members(make_system, members, t_end, dt, directory, options, n_members=1):
    """Run and store one task's members (in a worker): each alone, or all as one ensemble, each
    stored with the fingerprint of its model. Members stored already (in a readable file) are
    skipped, so a task run twice (an executor recomputing a result lost with a worker, as dask
    does) rewrites nothing. ``n_members``: the whole sweep's, for compile="auto"."""
    members = [m for m in members if _stored(directory, m) is None]
    if not members:
        return
    if len(members) == 1:
        assembly = as_assembly(make_system(**members[0]), "sweep")
        try:
            solution = simulate(assembly, t_end, dt, **_sweep_code(assembly, t_end, dt, options, n_members))
            failure = None
        except ConvergenceError as err:
            solution, failure = err.partial_solution, str(err)
        _store(directory, members[0], solution, failure, fingerprint(assembly))
        return
    assemblies = [as_assembly(make_system(**m), "sweep") for m in members]
    # in this process: the executor spreads the sweep's batches over processes or machines
    ensemble = simulate_batch(assemblies, t_end, dt, workers=1, **_sweep_code(assemblies[0], t_end, dt, options,
                                                                         n_members))
    for i, (m, solution) in enumerate(zip(members, ensemble)):
        failure = ensemble.failures.get(i)
        _store(directory, m, solution, None if failure is None else str(failure), fingerprint(assemblies[i]))


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
    """The stored members (a list of {name: value}) as one ``xarray.Dataset`` along ``member``, the
    parameters as coordinates, ``failure`` (member,) why a member's step failed ("" if it did
    not; its missing times are NaN)."""
    return _dataset([Solution.load(member_path(directory, m)) for m in members], members)


def _dataset(solutions, members):
    """:func:`gather` of the members' loaded Solutions."""
    result = members_to_xarray(solutions)
    result = result.assign(failure=("member", [sol.stats.get("failure") or "" for sol in solutions],
                                    {"long_name": "why the member's step failed (empty: it did not)"}))
    return result.assign_coords({name: ("member", [m[name] for m in members]) for name in members[0]})


def _stored(directory, member, warn=False):
    """The member's stored Solution, or None if there is none or its file cannot be read
    (truncated, damaged, edited: then, with ``warn``, a warning that it is run again)."""
    path = member_path(directory, member)
    if not path.exists():
        return None
    try:
        return Solution.load(path)
    except FileError as err:
        if warn:
            warnings.warn(f"sweep: the stored member {member} cannot be read ({err}); it is run again.",
                          stacklevel=3)
        return None


def _check_member(directory, make_system, member, solution):
    """Refuse (ModelError) a stored member whose model is not ``make_system(**member)``'s: by the
    fingerprint stored with it; a file stored without one, by its structure and initial state."""
    assembly = as_assembly(make_system(**member), "sweep")
    stored = solution.stats.get("fingerprint")
    if stored is not None:
        given = fingerprint(assembly)
        what = {"structure": "structure (parts, joints, forces)", "parameters": "numbers (masses, inertias, "
                "constants, geometry)", "initial_state": "initial state", "laws": "laws (the code and constants "
                "of motor, force, constraint or potential functions)"}
        differ = [what[k] for k in what if stored.get(k) != given[k]]
    else:  # stored before fingerprints: what the file itself holds
        state = assembly.initial_state
        differ = [w for w, same in (
            ("structure (parts, joints, forces)", solution.parts == {k: tuple(v) for k, v in
                                                                       layout_record(assembly.layout)["parts"].items()}
             and solution.constraint_rows == [tuple(r) for r in assembly.layout.constraint_rows]),
            ("initial state", np.array_equal(solution.q[0], state.q) and np.array_equal(solution.v[0], state.v)))
            if not same]
    if differ:
        raise ModelError(
            f"sweep: {directory} holds members of another model: for the parameters {member}, make_system builds a "
            f"model whose {_listed(differ)} differ from those of the member stored in "
            f"{member_path(directory, member).name}, which would be returned as this sweep's. Give this sweep its "
            "own directory, or remove that directory to run the members again.")


def _listed(words):
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


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


def _store(directory, member, solution, failure, model_fingerprint):
    """Save atomically (a temporary name, then renamed): a file is complete or absent. The stats
    record the parameters, the failure (if any) and the model's fingerprint."""
    solution.stats["parameters"] = member
    solution.stats["fingerprint"] = model_fingerprint
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
