"""simulate_batch(members, t_end, dt, ...) -> Ensemble: one compiled run vmapped over members
(or, with ``workers``, the members split across processes, each slice run as here or as a loop of
single runs: :mod:`conserve.run.workers`).

An ensemble is many runs of one model structure — the same parts, joints, element kinds and
laws — that differ in their numbers: initial states, masses and inertias, spring and damper
constants, rotor inertias, joint geometry, everything the assembled model holds as an array.
Its members are stacked along a leading axis (numbers the members share are stored once) and
the chunk of :func:`conserve.simulate` runs for all of them at once, its step under
``jax.vmap``: one compilation, one call per chunk, and the small arrays of a small model become
wide ones, which is where a CPU spends its time efficiently. Many members are stepped in groups
whose Newton matrices stay in the core's caches, one group after another in the same program
(``conserve.run.chunks.members_per_group``). A run shorter than a chunk gets a
chunk fitted to it (``fitted_chunk``: no outputs of a whole chunk per member to fill and
diagnose). Every member is the same discrete step as alone (energy, momentum, constraints exact
per member); its Newton iteration runs until *every* member has converged, each member stopping
its own corrections once converged. Factors of the Newton matrix are carried from step to step
as in single runs, and a Jacobian one member needs is formed for all members of its group still
iterating (``StepBackend.for_ensembles``, ``Newton.members``): vmapped,
it is formed for all of them anyway, and taken together their Jacobians are as rare as a single
run's.

A member whose step fails keeps its steps up to the failure, which is recorded (not raised);
the others run on. Laws are compared by what they compute (:mod:`conserve.run.fingerprint`:
their code and the constants they close over), so two members built by the same function
share them, while members whose motor laws use different gains in a closure are refused (their
structure differs: make the gain a number the model holds, e.g. a joint spring, or run them
apart).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import re
import time
import warnings
from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import ReferenceBackend
from ..backends.sampled import with_controllers
from ..compilation.modes import jit_quick, resolved_mode
from ..compilation.timing import run_times
from ..errors import CoarseStepWarning, ConstraintWarning, ConvergenceError, InconsistentInitialState, ModelError
from ..model.assembled import State
from ..model.parameters import bound
from ..model.system import as_assembly, initial_gaps
from ..results.solution import Solution, nodes_diagnostics
from .chunks import CHUNK, compile_chunks, model_axes
from .failures import COARSE_TURN, keep_partial, part_spin_rates
from .fingerprint import fingerprint
from .grid import time_grid
from .options import backend_settings, check_mode, check_progress, coarse_step_message, resolve_backend, run_work
from .pieces import NODE_FIELDS, assemble_solution, control_columns, left_redundant_rows, piece
from .simulate import simulate
from .workers import in_worker, pickling_problem, run_in_processes, slices, unguarded_main_script, usable_cores

#: ``workers=None`` runs an ensemble in processes when its work is at least this many unknown-steps
#: (:func:`~conserve.run.options.run_work`: members × steps × unknowns), about 6 s of steps on one
#: core, which repays starting the workers (a new Python importing conserve and jax, tracing and
#: compiling or loading from the compilation cache: 3–5 s for the heavy top; measurements:
#: benchmarks/results/defaults.md, section ``WORKER_WORK``)
WORKER_WORK = 2 * 10**7

#: a worker runs its members one after another as single runs (:func:`conserve.simulate`) when the
#: backend is the director's and the run has at least this many steps, else vmapped in groups
#: (measurements: benchmarks/results/defaults.md, section ``LOOP_STEPS``)
LOOP_STEPS = 500

#: a worker that loops single runs takes the members in jobs of about 1/JOBS_PER_WORKER of its
#: share, handed out as the workers free up: the Solutions come back, and are read here, while the
#: workers still run, and a slow member holds up only its job (measurements:
#: benchmarks/results/ensemble.md)
JOBS_PER_WORKER = 8

#: the kinds of one-time warnings given in this process (:func:`_warn_once`)
_warned: set = set()


@dataclass
class Ensemble:
    """Result of :func:`simulate_batch`: one :class:`~conserve.Solution` per member.

    Attributes
    ----------
    members : list of Solution, in the order given (a failed member: its steps up to the failure;
        its ``stats["run_time"]`` its share of the ensemble's)
    failures : {member index: :class:`~conserve.errors.ConvergenceError`} of the members whose
        step failed (the error is recorded, not raised; its ``partial_solution`` is the member)
    stats : backend, members, steps, compile (the code generation) and unknown_steps (all members'
        together, which compile="auto" counts; each member's Solution reports the same), compile_time
        (s), run_time (s, after compilation, all members), time_per_member_step (s)
    """

    members: list
    failures: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.members)

    def __getitem__(self, i) -> Solution:
        return self.members[i]

    def __iter__(self):
        return iter(self.members)

    def stack(self, quantity):
        """``quantity(solution)`` of every member, stacked: an array with the time nodes or steps
        first gives (n_members, n, ...), a failed member's missing nodes NaN; a scalar (a float or
        0-d array, e.g. ``lambda s: s.energy.total[-1]``) gives (n_members,)."""
        values = [np.asarray(quantity(m), float) for m in self.members]
        scalars = [v.ndim == 0 for v in values]
        if all(scalars):
            return np.array(values)
        if any(scalars):
            i = scalars.index(not scalars[0])
            raise ValueError(f"Ensemble.stack: quantity returned shape {values[0].shape} for member 0 but "
                             f"{values[i].shape} for member {i}; return a scalar for every member or an array "
                             "with the nodes (or steps) first for every member.")
        n = max(v.shape[0] for v in values)
        out = np.full((len(values), n, *values[0].shape[1:]), np.nan)
        for i, v in enumerate(values):
            out[i, :v.shape[0]] = v
        return out

    def to_xarray(self):
        """The members' :meth:`conserve.Solution.to_xarray` datasets along a new dimension
        ``member`` (:func:`conserve.results.export.members_to_xarray`: a failed member's missing times are
        NaN, ``stats`` (member,) each member's stats as JSON), with ``failure`` (member,): why the
        member's step failed, "" for a member that ran to the end."""
        from ..results.export import members_to_xarray

        ds = members_to_xarray(self.members)
        reasons = [str(self.failures[i]) if i in self.failures else "" for i in range(len(self))]
        return ds.assign(failure=("member", reasons, {"long_name": "why the member's step failed (empty: it did not)"}))

    def to_netcdf(self, path):
        """Write :meth:`to_xarray` to a netCDF file; ``xarray.open_dataset(path)`` reads it back
        with the same values (needs xarray; without netCDF4/h5netcdf, scipy writes netCDF3)."""
        self.to_xarray().to_netcdf(path)


def simulate_batch(members, t_end, dt, *, initial_states=None, backend="director", newton=None, order=2, t0=0.0,
                   chunk=CHUNK, progress=None, compile="auto", workers=None) -> Ensemble:
    """Integrate every member of an ensemble from t0 to t_end with the step dt: in this process,
    one compiled, vmapped run (see the module docstring), or split across processes, one per core.

    Parameters
    ----------
    members : a sequence of Systems or Assemblies of one structure (they may differ in any
        number their models hold and in their initial states), or one System/Assembly whose
        ``initial_states`` are given
    initial_states : with one system: a sequence of :class:`~conserve.model.assembled.State`
        (e.g. from ``assembly.initial_state`` with other velocities), or one State whose arrays
        have a leading member axis. Each is checked against the constraints (positions and
        velocities) as at assembly.
    backend, newton, order, t0, chunk, compile : as in :func:`conserve.simulate` (a step backend:
        "director", "reduced" or a backend object; "auto" counts the unknown-steps of all members)
    progress : optional ``progress(steps_done, n_steps)``. In this process: after every chunk (the
        furthest member). Across processes: as each slice is finished, ``steps_done`` =
        ``n_steps`` × the fraction of members finished (rounded down).
    workers : how many processes run the members (jax computes one process's work on one core at
        a time, so more cores need more processes):

        * ``1``: all members in this process, vmapped (the module docstring);
        * ``k > 1``: the members split into contiguous slices (at most one per member), run in k
          spawned processes (:mod:`conserve.run.workers`: one thread each for XLA, OpenBLAS,
          MKL and OpenMP); the Ensembles merged in member order. A worker runs a slice as a
          loop of single runs (:func:`conserve.simulate`, each member exactly its run alone)
          when the backend is the director's and the run has at least
          :data:`~conserve.run.ensemble.LOOP_STEPS` steps — then in k ×
          :data:`~conserve.run.ensemble.JOBS_PER_WORKER` slices, each taken by the next free
          worker —, else vmapped as ``workers=1`` does, one slice per worker (shorter runs, and
          the reduced backend, whose single steps cost more than vmapped ones). The members must
          pickle: their laws (motor laws, forces, potentials, prescribed motions) module-level
          functions, not lambdas or closures, else :class:`~conserve.errors.ModelError`. A script
          must keep its simulations under ``if __name__ == "__main__":`` (a spawned worker imports
          the main script), else :class:`~conserve.errors.ModelError`
          (:func:`~conserve.run.workers.unguarded_main_script`);
        * ``None`` (default): as many processes as this process may use cores
          (``os.sched_getaffinity``) when the ensemble's work is at least
          :data:`~conserve.run.ensemble.WORKER_WORK` unknown-steps (members × steps × unknowns: a
          few seconds of steps, which repay starting the workers), else 1; members that do not
          pickle, or a call from a script's top level outside its ``if __name__ == "__main__":``
          block, run in this process, with a warning (once per process and cause) saying why and
          how to use every core.
          Inside a worker it is 1.

    Returns
    -------
    :class:`Ensemble`. A member whose step fails is kept up to the failure and recorded in
    ``failures`` (by its index in the whole ensemble); the run goes on for the others. Stopped
    between chunks (Ctrl-C, an error of ``progress``), the exception carries the Ensemble so far in
    ``err.partial_solution``: in this process every member's steps so far; across processes (the
    workers are ended) the members of the slices finished so far, complete, their indices in
    ``partial_solution.stats["member_index"]``. Across processes, ``stats`` adds ``workers``,
    ``slices`` ((start, end) member ranges), ``compile_times`` and ``worker_run_times`` (each
    worker's, over its slices); ``compile_time`` is the longest worker's, ``run_time`` the wall time from starting
    the workers to merging their results (process start and compilation included), and
    ``time_per_member_step`` that wall time per member-step.
    """
    _refuse_in_worker_start()
    given_t_end, given_dt = t_end, dt
    given = {"backend": backend, "newton": newton, "order": order, "t0": t0, "chunk": chunk}  # for the workers
    assemblies, states = _members(members, initial_states)
    check_progress(progress, "simulate_batch")
    t0, t_end, dt, n_steps = time_grid(t0, t_end, dt, chunk, "simulate_batch")
    chunk = min(int(chunk), fitted_chunk(n_steps))
    backend = resolve_backend(backend, newton, order=order)
    if isinstance(backend, ReferenceBackend):
        raise ModelError(f"simulate_batch: backend '{backend.name}' is a reference integrator; an ensemble needs a "
                         "step backend ('director', 'reduced').")
    processes = _processes(workers, assemblies, states, backend, n_steps)
    if processes > 1:
        _warn_coarse_members(assemblies, states, dt)
        mode = resolved_mode(check_mode(compile, "simulate_batch"), len(states) * run_work(backend, assemblies[0].model,
                                                                                            n_steps))
        loop = backend.name == "director" and n_steps >= LOOP_STEPS
        return _across_processes(assemblies, states, initial_states is not None, (given_t_end, given_dt), n_steps,
                                 {**given, "compile": mode}, processes, loop, progress)
    backend = backend.for_ensembles()
    first = assemblies[0]
    model, batch, models = _stacked_models(assemblies)
    state = jax.tree.map(lambda *a: jnp.asarray(np.stack(a)), *states)
    _check_states(model, batch, state, first, t0)
    _warn_coarse_members(assemblies, states, dt)
    work = len(states) * run_work(backend, first.model, n_steps)  # a member's model: the stacked one has batch axes
    settings = {"t0": t0, "dt": dt, "n_steps": n_steps, "chunk": chunk, "unknown_steps": work,
                "compile": resolved_mode(check_mode(compile, "simulate_batch"), work),
                **backend_settings(backend, False)}
    backend = with_controllers(backend.prepare(_widest(model, batch, first.model), states[0]), model)
    carry = _per_member(_Init(backend), batch, model, state)
    control0 = None if carry.control is None else jax.tree.map(lambda a: np.asarray(a)[:, None], carry.control)
    m = len(states)
    n, failed, failures, chunks = np.zeros(m, np.int32), np.zeros(m, bool), {}, []
    args = (model, carry, n, n, np.float64(t0), np.float64(dt))  # numpy: no dispatch per argument
    run, compile_time = compile_chunks(backend, chunk, args, batch, settings["compile"])

    def ensemble(compile_time, run_time) -> Ensemble:
        """The Ensemble of the chunks run so far: each member's Solution of its n[i] steps, the
        ConvergenceErrors of the failures."""
        # every member's nodes and steps at once, (m, k, ...): its first node, then what every chunk
        # added (a member that fails takes fewer steps than the others in that chunk and none after,
        # so its own are the first n[i] of every array); as numpy once, then cut per member
        first = _per_member(_chunk_diagnostics, batch, model, (jax.tree.map(lambda a: a[:, None], state),
                                                               np.full((m, 1), t0)))
        start = {**{f"node_{k}": np.asarray(getattr(state, k))[:, None] for k in NODE_FIELDS},
                 **{f"diag_{k}": np.asarray(a) for k, a in first.items()}, **control_columns(model, control0)}
        taken = [piece(_first_steps(out, np.max(done)), m, _first_steps(diag, np.max(done)), model)  # m: every member
                 for out, diag, done in chunks]
        joined = {k: np.concatenate(([start[k]] if k in start else []) + [p[k] for p in taken], axis=1)
                  for k in taken[0]}

        solutions, errors = [], {}
        with _collector_paused():
            for i in range(m):
                assembly = replace(assemblies[i], model=models(i), initial_state=states[i])
                member = [{k: a[i, :n[i] + (not k.startswith("step_"))] for k, a in joined.items()}]
                sol, error = assemble_solution(assembly, settings, backend, member, int(n[i]), i in failures,
                                               failures.get(i), compile_time, run_time / m, warn=False)  # its share
                solutions.append(sol)
                if error is not None:
                    errors[i] = ConvergenceError(f"member {i}: {error}", partial_solution=sol, step=error.step,
                                                 time=error.time, residual_history=error.residual_history)
        _warn_left_rows(solutions)
        stats = {"backend": backend.name, "members": m, "steps": n_steps, "compile": settings["compile"],
                 "unknown_steps": work, "compile_time": compile_time, "run_time": run_time,
                 "time_per_member_step": run_time / max(int(np.sum(n)), 1)}
        return Ensemble(solutions, errors, stats)

    with run_times(compile_time) as times:  # what the loop compiles on first use (diagnostics) is compilation
        try:
            while np.any((n < n_steps) & ~failed):
                n_end = np.where(failed, n, n_steps).astype(np.int32)  # a failed member stays where it failed
                (carry, n_new, failed_now, failure), out = run(model, carry, n, n_end, *args[4:])
                n_new, failed_now = np.asarray(n_new), np.asarray(failed_now)
                # the new nodes' diagnostics, every member at once (member i's nodes at t0 + (n_i + k + 1) dt)
                node_times = t0 + dt * (n[:, None] + 1 + np.arange(chunk))
                chunks.append((out, _per_chunk(_chunk_diagnostics, batch, model, (out.node, node_times)), n_new - n))
                failures.update({int(i): (np.asarray(failure[0][i]), np.asarray(failure[1][i]))
                                 for i in np.flatnonzero(failed_now)})
                n, failed = n_new, failed | failed_now
                if progress is not None:
                    progress(int(np.max(n)), n_steps)
        except BaseException as err:  # a progress callback's error, Ctrl-C: the finished chunks' steps are kept
            furthest = int(np.max(n))
            keep_partial(err, lambda: ensemble(*times()), furthest, t0 + furthest * dt)
            raise
        spent = times()
    return ensemble(*spent)


def _first_steps(tree, k):
    """The first k steps (axis 1) of every member's (axis 0) arrays of a chunk, as numpy."""
    return jax.tree.map(lambda a: np.asarray(a)[:, :k], tree)


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector paused for the block: building many members' Solutions
    allocates enough objects to start full collections, each of which walks every object of the
    process, jax's included (measurements: benchmarks/results/defaults.md, section
    ``_collector_paused``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class _Init:
    """``backend.init`` as a value, equal for equal backends: a bound method compares its backend
    by identity, and as the static argument of ``_per_member`` it compiled the members' initial
    carries anew for every call's freshly prepared backend (0.12 s per call)."""

    backend: object

    def __call__(self, model, state):
        return self.backend.init(model, state)


def _members(members, initial_states):
    """(assemblies, initial states) of the members, one each."""
    if initial_states is not None:
        if isinstance(members, (list, tuple)):
            raise ModelError("simulate_batch: give either members (a list of systems) or one system with "
                             "initial_states, not both.")
        assembly = as_assembly(members, "simulate_batch")
        if isinstance(initial_states, State):
            sizes = {np.shape(a)[0] if np.ndim(a) else None for a in initial_states}
            if len(sizes) != 1 or None in sizes:
                raise ModelError("simulate_batch: a State of initial_states needs one leading member axis on "
                                 f"every array, got shapes {[np.shape(a) for a in initial_states]}.")
            initial_states = [State(*(a[i] for a in initial_states)) for i in range(sizes.pop())]
        states = [_state(assembly, s, i) for i, s in enumerate(initial_states)]
        assemblies = [assembly] * len(states)
    else:
        if not isinstance(members, (list, tuple)):
            raise ModelError("simulate_batch: members must be a list of systems (or give one system with "
                             "initial_states=...).")
        assemblies = [as_assembly(s, "simulate_batch") for s in members]
        states = [a.initial_state for a in assemblies]
    if not states:
        raise ModelError("simulate_batch: an ensemble needs at least one member.")
    return assemblies, states


def _state(assembly, s, i):
    """The member's State in float64, checked against the assembly's shapes."""
    if not isinstance(s, State):
        raise ModelError(f"simulate_batch: initial_states[{i}] must be a conserve State (e.g. assembly.initial_state "
                         f"with new arrays: state._replace(v=...)), got {type(s).__name__}.")
    s = State(*(np.asarray(a, np.float64) for a in s))
    for name, a, b in zip(State._fields, s, assembly.initial_state):
        if a.shape != b.shape:
            raise ModelError(f"simulate_batch: initial_states[{i}].{name} has shape {a.shape}; the system's is "
                             f"{b.shape}.")
    return s


def _stacked_models(assemblies):
    """(the members' models stacked: a leaf every member shares is kept once, the others get a
    leading member axis; per leaf 0 or None; member i's own model as a function of i), after
    checking that the members have one structure and the same laws."""
    first = assemblies[0]
    treedef = jax.tree.structure(first.model)
    skeleton, laws = _skeleton(first), None
    for i, a in enumerate(assemblies):
        if a is first or jax.tree.structure(a.model) == treedef:
            continue
        if _skeleton(a) != skeleton:
            raise ModelError(f"simulate_batch: member {i} has another structure than member 0 (its parts, joints, "
                             "constraint rows, joint coordinates or array sizes differ); an ensemble runs one "
                             "structure.")
        laws = laws or fingerprint(first)  # other law objects: equal if they compute the same
        mine = fingerprint(a)
        if mine["laws"] != laws["laws"] or mine["opaque"] or laws["opaque"]:
            raise ModelError(
                f"simulate_batch: member {i}'s laws (motor, force, constraint or potential functions) differ "
                "from member 0's in their code or in the constants they close over"
                + (f", or cannot be compared ({mine['opaque'] or laws['opaque']})" if mine["opaque"] or laws["opaque"]
                   else "")
                + "; members may differ only in the numbers their models hold (masses, inertias, spring "
                  "constants, geometry, initial states). Build every member's laws by the same function with the "
                  "same constants, or run members with other laws apart.")
    if all(a is first for a in assemblies):  # one system with many initial states: nothing to compare
        return first.model, (None,) * treedef.num_leaves, lambda i: first.model
    columns = list(zip(*(jax.tree.leaves(a.model) for a in assemblies)))
    batch = tuple(None if all(np.array_equal(c[0], x) for x in c[1:]) else 0 for c in columns)
    stacked = [c[0] if b is None else jnp.stack([jnp.asarray(x) for x in c]) for c, b in zip(columns, batch)]

    def member(i):
        return jax.tree.unflatten(treedef, [x if b is None else x[i] for x, b in zip(stacked, batch)])

    return jax.tree.unflatten(treedef, stacked), batch, member


def _widest(model, batch, first):
    """The model from which the ensemble's Newton-matrix structure is found (``backend.prepare``
    samples one model's Jacobians, :func:`~conserve.backends.director.sampled_jacobians`): every
    number the members do not share at its largest magnitude among them, so that a term one member
    lacks (a spring of stiffness 0, a parameter at 0) is in the pattern when any member has it —
    found from the first member alone, a chain whose first member's spring is slack would be
    eliminated along its joints' tree, and a member with a stiff spring across it would need more
    Newton iterations per step (4.2 instead of 3). ``first``: member 0's model, when the members share every number."""
    if all(b is None for b in batch):
        return first

    def widest(x, b):
        x = np.asarray(x)
        if b is None or not np.issubdtype(x.dtype, np.floating):
            return x if b is None else x[0]
        return np.take_along_axis(x, np.argmax(np.abs(x), axis=0)[None], axis=0)[0]

    leaves, treedef = jax.tree.flatten(model)
    return jax.tree.unflatten(treedef, [widest(x, b) for x, b in zip(leaves, batch)])


def fitted_chunk(n_steps):
    """The chunk length of a run of ``n_steps``: the power of two ≥ n_steps (at least 16), so that
    a short ensemble run does not allocate, fill and diagnose every member's outputs of a whole
    :data:`~conserve.run.chunks.CHUNK`, for a compilation per length, at most seven below it
    (measurements: benchmarks/results/defaults.md, section ``fitted_chunk``)."""
    return max(16, 1 << (max(int(n_steps), 1) - 1).bit_length())


def _chunk_diagnostics(model, nodes_and_times):
    """nodes_diagnostics of one member's nodes (k, …) at their times (k,), as one argument."""
    return nodes_diagnostics(model, *nodes_and_times)


def _vmapped(fn, batch, model, state):
    """fn(model, state) of every member: vmapped, the model's leaves by ``batch``, the states by
    their leading axis."""
    def member(model, state):
        with bound(model.parameters):
            return fn(model, state)

    return jax.vmap(member, in_axes=(model_axes(model, batch), 0))(model, state)


#: :func:`_vmapped` compiled once per function, model structure and batch: without optimisation for
#: what runs once per ensemble (initial carries and checks), quick for the diagnostics of every chunk
_per_member = jit_quick(_vmapped, mode="unoptimized", static_argnums=(0, 1))
_per_chunk = jit_quick(_vmapped, mode="quick", static_argnums=(0, 1))


def _skeleton(assembly):
    """What members must share besides their laws: the names of parts, constraint rows, joint
    coordinates, work entries and rotors, and the shapes of the model's arrays."""
    layout = assembly.layout
    names = (tuple(p.name for p in layout.parts), tuple(map(tuple, layout.constraint_rows)),
             tuple(layout.dropped_rows), tuple(layout.coordinate_names), tuple(layout.work_names),
             tuple(r.name for r in layout.rotors), tuple(r.name for r in layout.body_rotors))
    return names, tuple((np.shape(x), jnp.result_type(x)) for x in jax.tree.leaves(assembly.model))


def _initial_gaps(model, member):
    """|g|, its tolerance, |ġ|, its tolerance of one member, ``member`` its (state, t0)
    (:func:`~conserve.model.system.initial_gaps`: prescribed motions at the run's start)."""
    state, t0 = member
    g, tol, rate, vtol, _ = initial_gaps(model, state, model.rotor_relative_rates(state.q, state.v, state.p), t0)
    return jnp.abs(g), tol, jnp.abs(rate), vtol


def _check_states(model, batch, state, first, t0):
    """Raise InconsistentInitialState naming the first member and joint whose initial positions or
    velocities leave the constraints at t0 (s; prescribed motions too; all members at once,
    compiled), or whose state is not finite."""
    for k in ("q", "v", "p", "theta", "s"):
        values = np.asarray(getattr(state, k)).reshape(len(np.asarray(state.q)), -1)
        if not np.all(np.isfinite(values)):
            i = int(np.argwhere(~np.isfinite(values))[0, 0])
            raise InconsistentInitialState(f"simulate_batch: member {i}: its initial state's {k} holds NaN or inf; "
                                           "give every member finite positions, velocities and spins.")
    if not first.layout.constraint_rows:
        return
    t0 = np.full(len(np.asarray(state.q)), t0)
    gap, tol, rate, vtol = (np.asarray(a) for a in _per_member(_initial_gaps, batch, model, (state, t0)))
    for what, value, allowed in (("positions", gap, tol), ("velocities", rate, vtol)):
        bad = ~(value <= allowed)  # also NaN
        if np.any(bad):
            i, row = (int(k) for k in np.argwhere(bad)[0])
            owner, name = first.layout.constraint_rows[row][:2]
            raise InconsistentInitialState(
                f"simulate_batch: member {i}: the initial {what} violate '{owner}' ({name}: {value[i, row]:.3g}, "
                f"allowed {allowed[i, row]:.3g}); {int(np.sum(np.any(bad, axis=1)))} member(s) are off the "
                "constraints. Give each member positions and velocities its joints allow (e.g. build its state "
                "from a system assembled with them).")


def _warn_left_rows(solutions):
    """simulate's ConstraintWarning, once for the ensemble, for the first member whose motion left
    rows its assembly dropped as redundant, with how many members did."""
    left = [(i, message) for i, sol in enumerate(solutions) if sol.assembly.layout.dropped_rows
            for message in [left_redundant_rows(sol.assembly.layout, sol.constraint_residual, sol.t)] if message]
    if left:
        (i, message), more = left[0], len(left) - 1
        warnings.warn(f"simulate_batch: member {i}" + (f" (and {more} more of {len(solutions)})" if more else "")
                      + f": {message}", ConstraintWarning, stacklevel=4)


def _warn_coarse_members(assemblies, states, dt):
    """simulate's CoarseStepWarning, once, for the first member that turns too fast per step (the
    members' spin rates at once)."""
    rates = part_spin_rates(assemblies[0].layout, np.stack([s.q for s in states]), np.stack([s.v for s in states]))
    fast = np.flatnonzero(np.any([rate * dt > COARSE_TURN for rate in rates.values()], axis=0))
    if fast.size:
        i = int(fast[0])
        message = coarse_step_message(assemblies[i].layout, states[i].q, states[i].v, dt)
        warnings.warn(f"member {i}: {message}", CoarseStepWarning, stacklevel=3)


def _refuse_in_worker_start():
    """A ModelError when a spawned worker calls simulate_batch while importing the parent's main
    script (a script without ``if __name__ == "__main__":`` would run its ensemble once per worker)."""
    if in_worker() and getattr(multiprocessing.current_process(), "_inheriting", False):
        raise ModelError("simulate_batch: called while a worker process imports the main script, which runs "
                         "simulations on import; put them under `if __name__ == \"__main__\":` (a spawned worker "
                         "imports the main script to find the functions it defines), or pass workers=1.")


def _processes(workers, assemblies, states, backend, n_steps) -> int:
    """How many processes run the ensemble: ``workers`` (checked; at most one per member) or, for
    None, the cores this process may use when the work is at least :data:`WORKER_WORK`
    unknown-steps, the members pickle and the call is not from a script's unguarded top level
    (else 1, with a one-time warning saying why)."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ModelError(f"simulate_batch: workers must be None (one process per core for large ensembles) or a "
                         f"count ≥ 1, got {workers!r}.")
    m, auto = len(states), workers is None
    if auto:
        small = m * run_work(backend, assemblies[0].model, n_steps) < WORKER_WORK
        if in_worker() or m < 2 or usable_cores() < 2 or small:
            return 1
        workers = usable_cores()
    workers = min(workers, m)
    if workers == 1:
        return 1
    script = unguarded_main_script()
    if script is not None:
        guard = (f"the script {script} calls simulate_batch outside an `if __name__ == \"__main__\":` block, and "
                 "a worker process imports the script (to find the functions it defines), so it would run that code "
                 "again")
        if not auto:
            raise ModelError(f"simulate_batch: workers={workers}: {guard}; put the simulation under "
                             "`if __name__ == \"__main__\":`, or pass workers=1.")
        _warn_once("unguarded", f"simulate_batch: running the ensemble in one process, not {workers}: {guard}. To use "
                   "every core, put the simulation under `if __name__ == \"__main__\":`; to silence this, pass "
                   "workers=1.")
        return 1
    problem = pickling_problem((assemblies[0], backend))
    if problem is None:
        return workers
    advice = ("define the laws (motor laws, forces, prescribed motions) as functions at module level — not lambdas, "
              "closures or functions of an interactive session")
    if not auto:
        raise ModelError(f"simulate_batch: workers={workers} needs members that can be sent to other processes, and "
                         f"these cannot ({problem}); {advice}, or pass workers=1 to run in this process.")
    _warn_once("unpicklable", f"simulate_batch: running the ensemble in one process, not {workers}: its members "
               f"cannot be sent to worker processes ({problem}). To use every core, {advice}; to silence this, pass "
               "workers=1.")
    return 1


def _warn_once(kind, message):
    """``message`` as a UserWarning, once per process and kind (at the caller of simulate_batch)."""
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(message, UserWarning, stacklevel=4)


def _across_processes(assemblies, states, one_system, grid, n_steps, options, processes, loop, progress) -> Ensemble:
    """The ensemble run in ``processes`` spawned processes (:func:`~conserve.run.workers.run_in_processes`),
    each on a contiguous slice of the members (:func:`_slice`), merged in member order
    (:func:`_merged`). Stopped (Ctrl-C, an error of ``progress`` or of a worker), the exception's
    ``partial_solution`` is the Ensemble of the slices finished so far."""
    m = len(states)
    bounds = slices(m, processes * (JOBS_PER_WORKER if loop else 1))
    jobs = [((assemblies[0], states[lo:hi]) if one_system else (assemblies[lo:hi], None)) + (lo, *grid, options, loop)
            for lo, hi in bounds]
    parts = {}
    tic = time.perf_counter()

    def finished(j, part):
        lo = bounds[j][0]
        for i, solution in enumerate(part[0].members):  # sent without their Assemblies: the members' own here
            solution.assembly = replace(assemblies[lo + i], initial_state=states[lo + i])
        parts[j] = part
        if progress is not None:
            progress(n_steps * sum(bounds[i][1] - bounds[i][0] for i in parts) // m, n_steps)

    try:
        with _collector_paused():  # receiving the members' Solutions allocates as building them does
            run_in_processes(_slice, jobs, processes, finished)
    except BaseException as err:
        with contextlib.suppress(Exception):  # the original error is the one to report
            err.partial_solution = _merged(parts, bounds, time.perf_counter() - tic, n_steps, processes)
            if hasattr(err, "add_note"):
                kept = err.partial_solution.stats["member_index"]
                err.add_note(f"conserve: the ensemble stopped; the {len(kept)} members of the workers that had "
                             "finished are kept in err.partial_solution (their indices: err.partial_solution.stats"
                             "['member_index']).")
        raise
    ensemble = _merged(parts, bounds, time.perf_counter() - tic, n_steps, processes)
    seen = set()
    for _, (_, caught) in sorted(parts.items()):
        for category, message in caught:
            if (category, message) not in seen:
                seen.add((category, message))
                warnings.warn(message, category, stacklevel=3)
    _warn_left_rows(ensemble.members)
    return ensemble


def _slice(members, initial_states, lo, t_end, dt, options, loop):
    """A worker's job: (the Ensemble of its members, the warnings they raised as (category,
    message)), by a loop of single runs (:func:`_loop`) or vmapped (``simulate_batch(workers=1)``),
    its ``stats["worker"]`` this process's id. The Solutions go back without their ``assembly``,
    which the parent has (reading 31 jax arrays of an Assembly per member costs more than its
    Solution's arrays). Errors name members by their index in the whole ensemble (this slice
    starts at ``lo``). CoarseStepWarning and ConstraintWarning are left to the parent, which warns
    once for the ensemble."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if loop:
                part = _loop(members, initial_states, t_end, dt, options)
            else:
                part = simulate_batch(members, t_end, dt, initial_states=initial_states, workers=1, **options)
        except Exception as err:
            if err.args and isinstance(err.args[0], str):
                err.args = (_global_members(err.args[0], lo), *err.args[1:])
            raise
    part.stats["worker"] = os.getpid()
    for solution in part.members:
        solution.assembly = None
    return part, [(w.category, str(w.message)) for w in caught
                  if not issubclass(w.category, (CoarseStepWarning, ConstraintWarning))]


def _global_members(message, lo):
    """``message`` with every "member i" renamed "member lo + i"."""
    return re.sub(r"\bmember (\d+)", lambda g: f"member {lo + int(g.group(1))}", message)


def _loop(members, initial_states, t_end, dt, options) -> Ensemble:
    """The Ensemble of :func:`conserve.simulate` of one member after another (the same compiled
    chunk for all: one structure), failures recorded as in the vmapped run."""
    tic = time.perf_counter()
    assemblies, states = _members(members, initial_states)
    _stacked_models(assemblies)  # one structure, the same laws: as the vmapped run requires
    solutions, failures, compile_time = [], {}, 0.0
    with _collector_paused():  # the Solutions kept grow what every full collection walks
        for i, (assembly, state) in enumerate(zip(assemblies, states)):
            solution, failure = _single(assembly, state, i, t_end, dt, options)
            if failure is not None:
                failures[i] = failure
            compile_time += solution.stats.get("compile_time") or 0.0
            solutions.append(solution)
    run_time = time.perf_counter() - tic - compile_time
    stats = {**{k: solutions[0].stats.get(k) for k in ("backend", "compile")}, "members": len(solutions),
             "steps": solutions[0].stats.get("steps"),
             "unknown_steps": sum(s.stats.get("unknown_steps") or 0 for s in solutions),
             "compile_time": compile_time, "run_time": run_time,
             "time_per_member_step": run_time / max(sum(len(s.t) - 1 for s in solutions), 1)}
    return Ensemble(solutions, failures, stats)


def _single(assembly, state, i, t_end, dt, options):
    """(member i's Solution by :func:`conserve.simulate`, its ConvergenceError as an ensemble
    records it or None)."""
    try:
        return simulate(replace(assembly, initial_state=state), t_end, dt, **options), None
    except ConvergenceError as err:
        if err.partial_solution is None:
            raise
        return err.partial_solution, ConvergenceError(f"member {i}: {err}", partial_solution=err.partial_solution,
                                                      step=err.step, time=err.time,
                                                      residual_history=err.residual_history)
    except InconsistentInitialState as err:
        raise InconsistentInitialState(f"simulate_batch: member {i}: {err}") from None


def _merged(parts, bounds, wall, n_steps, processes) -> Ensemble:
    """One Ensemble of the workers' (``parts``: {slice: (Ensemble, warnings)}, slice j the members
    ``bounds[j]``), in member order: failures under the members' indices in the whole ensemble;
    stats: run_time the wall time since the processes were started, compile_time the longest of the
    workers' (compile_times and worker_run_times each worker's, summed over its jobs, in the order
    of their first jobs), time_per_member_step the wall time per member-step."""
    members, failures, index, compile_times, run_times_ = [], {}, [], {}, {}
    for j in sorted(parts):
        part, lo = parts[j][0], bounds[j][0]
        members += part.members
        index += range(lo, lo + len(part))
        failures.update({lo + i: ConvergenceError(_global_members(str(err), lo), partial_solution=err.partial_solution,
                                                  step=err.step, time=err.time, residual_history=err.residual_history)
                         for i, err in part.failures.items()})
        worker = part.stats["worker"]
        compile_times[worker] = compile_times.get(worker, 0.0) + part.stats.get("compile_time", 0.0)
        run_times_[worker] = run_times_.get(worker, 0.0) + part.stats.get("run_time", 0.0)
    compile_times, run_times_ = list(compile_times.values()), list(run_times_.values())
    done = [parts[j][0].stats for j in sorted(parts)]
    stats = {"backend": done[0].get("backend") if done else None, "members": len(members), "steps": n_steps,
             "compile": done[0].get("compile") if done else None,
             "unknown_steps": sum(s.get("unknown_steps") or 0 for s in done), "workers": processes,
             "slices": list(bounds), "compile_time": max(compile_times, default=0.0), "compile_times": compile_times,
             "run_time": wall, "worker_run_times": run_times_,
             "time_per_member_step": wall / max(sum(len(s.t) - 1 for s in members), 1)}
    if len(members) < bounds[-1][1]:
        stats["member_index"] = index
    return Ensemble(members, failures, stats)
