"""What the benchmarks share: pinning to one core, importing the peers (Exudyn, MuJoCo), an Exudyn
fixed-step solve and a timed MuJoCo rollout.

Imported by the benchmark scripts (run as ``python benchmarks/<name>.py``, so this directory is on
the path).
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import io
import os
import sys
import time
from pathlib import Path

import numpy as np

# The benchmarks time compilation: no persistent compilation cache (a warm one would report its
# loads as compile times) unless CONSERVE_COMPILATION_CACHE names one; processes started from a
# benchmark inherit the setting.
if "CONSERVE_COMPILATION_CACHE" not in os.environ:
    os.environ["CONSERVE_COMPILATION_CACHE"] = "off"
    if "conserve" in sys.modules:  # imported before this module: configured already
        from conserve.compilation.cache import configure_from_environment

        configure_from_environment()


def pin_to_core0():
    """Pin this thread (pid 0) and every thread started so far to CPU 0; later threads inherit it.
    OpenBLAS is limited to one thread too (``limit_openblas``)."""
    pin_to_cores({0})


def pin_to_cores(cores):
    """Pin this thread and every thread started so far to ``cores`` (a set of CPU numbers), and
    every loaded OpenBLAS to as many threads."""
    os.sched_setaffinity(0, set(cores))
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), set(cores))
    limit_openblas(len(cores))


def limit_openblas(threads):
    """Set the thread count of every OpenBLAS loaded in this process (numpy's and scipy's bundled
    copies; jax's LAPACK calls, the dense LU of a Newton matrix above ``KERNEL_SIZE`` unknowns, go
    through scipy's). OpenBLAS sizes its thread pool by the CPUs allowed when it is loaded; loaded
    before the process was pinned (scipy is imported with conserve), its two threads then share one
    core and spin-wait on each other: a 407-unknown LU ran 70× slower. Returns the libraries set."""
    names = ("openblas_set_num_threads", "scipy_openblas_set_num_threads", "scipy_openblas_set_num_threads64_")
    done = []
    paths = {ln.split()[-1] for ln in Path("/proc/self/maps").read_text().splitlines()
             if "openblas" in ln and ln.split()[-1].endswith(".so")}
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for name in names:
            if hasattr(lib, name):
                getattr(lib, name)(ctypes.c_int(threads))
                done.append(Path(path).name)
                break
    return done


def import_exudyn():
    """The exudyn module (its fast variant, no range checks), or None if not installed."""
    sys.exudynFast = True  # Exudyn's documented switch to its exudynCPPfast module (no range checks)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import exudyn
        return exudyn
    except ImportError:
        return None


#: MuJoCo's warnings (e.g. "Nan, Inf or huge value in QACC …" of a diverging run), collected here
#: instead of printed and appended to MUJOCO_LOG.TXT in the working directory
MUJOCO_WARNINGS = []


def import_mujoco():
    """The mujoco module with its ``rollout`` submodule loaded (its warnings collected in
    ``MUJOCO_WARNINGS``), or None if not installed."""
    try:
        import mujoco
        import mujoco.rollout
    except ImportError:
        return None
    mujoco.set_mju_user_warning(MUJOCO_WARNINGS.append)
    return mujoco


def solve_fixed_step(exu, mbs, solver, dt, t_end, rho, sensors, linear_solver=None):
    """Exudyn's ``solver`` ("generalized-α" with spectral radius ``rho``, or "trapezoidal" index 2)
    with the fixed step dt to t_end, one thread, no solution file, sensors recorded if ``sensors``;
    ``linear_solver``: None for Exudyn's default (EXUdense), or a name of ``exu.LinearSolverType``
    ("EigenDense", "EigenSparse") — "EigenDense" also sets ``ignoreSingularJacobian`` (Exudyn's
    option for redundant constraints). Returns wall time (s), steps, Newton iterations and
    Jacobians per step."""
    ss = exu.SimulationSettings()
    ti = ss.timeIntegration
    n = int(round(t_end / dt))
    ti.numberOfSteps, ti.endTime, ti.verboseMode, ti.adaptiveStep = n, t_end, 0, False
    ti.generalizedAlpha.spectralRadius = rho
    ss.solution.file.write = False
    ss.solution.sensors.active = bool(sensors)
    ss.solution.sensors.writePeriod = dt
    ss.parallel.numberOfThreads = 1
    if linear_solver is not None:
        ss.linearSolver.solverType = getattr(exu.LinearSolverType, linear_solver)
        ss.linearSolver.ignoreSingularJacobian = linear_solver == "EigenDense"
    stype = {"generalized-α": exu.DynamicSolverType.GeneralizedAlpha,
             "trapezoidal": exu.DynamicSolverType.TrapezoidalIndex2}[solver]
    tic = time.perf_counter()
    ok = mbs.SolveDynamic(ss, solverType=stype)
    wall = time.perf_counter() - tic
    it = mbs.sys["dynamicSolver"].it
    if not ok or abs(it.currentTime - t_end) > 0.5 * dt:
        raise RuntimeError(f"Exudyn {solver} dt={dt:g} stopped at t = {it.currentTime:g} s")
    return {"wall": wall, "steps": n, "newton": it.newtonStepsCount / n, "jacobians": it.newtonJacobiCount / n}


# ---------------------------------------------------------------- MuJoCo
def mujoco_state(mj, model, data):
    """The full physics state of ``data`` (time, qpos, qvel, …) as mujoco.rollout takes it."""
    spec = mj.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mj.mj_stateSize(model, spec))
    mj.mj_getState(model, data, state, spec)
    return state


def rollout(mj, model, initial_states, nstep, threads=1):
    """``mujoco.rollout.rollout`` of ``nstep`` steps from each of ``initial_states`` ((members,
    nstate) or (nstate,)): one MjData per thread; threads = 1 runs on the calling thread (no
    pool). Returns (wall time s, states (members, nstep, nstate): the state after each step)."""
    states = np.atleast_2d(np.asarray(initial_states, float))
    data = [mj.MjData(model) for _ in range(threads)]
    out = np.empty((len(states), nstep, states.shape[1]))
    tic = time.perf_counter()
    mj.rollout.rollout(model, data if threads > 1 else data[0], states, nstep=nstep, state=out)
    return time.perf_counter() - tic, out


def mujoco_diverged(states, dt, t0=0.0):
    """Time of the first step (over all members) whose state is not finite or whose time is not
    t0 + k dt, or None: MuJoCo resets a diverging run to its initial state (warning "Nan, Inf or
    huge value in QACC"), so its states restart from t0. ``states``: (members, nstep, nstate)."""
    expected = t0 + dt * np.arange(1, states.shape[1] + 1)
    bad = np.any((np.abs(states[..., 0] - expected) > 0.5 * dt) | ~np.all(np.isfinite(states), axis=-1), axis=0)
    return float(expected[np.argmax(bad)]) if bad.any() else None


def mujoco_energy(mj, model, states):
    """Total energy (kinetic + gravitational, MuJoCo's ``mjENBL_ENERGY``) of each state (rows of
    ``states``), evaluated after the run by ``mj_forward`` on a copy of the model with energy on."""
    m = copy.copy(model)
    m.opt.enableflags |= mj.mjtEnableBit.mjENBL_ENERGY
    d, spec = mj.MjData(m), mj.mjtState.mjSTATE_FULLPHYSICS
    E = np.empty(len(states))
    for k, s in enumerate(states):
        mj.mj_setState(m, d, s, spec)
        mj.mj_forward(m, d)
        E[k] = d.energy[0] + d.energy[1]
    return E


def mujoco_positions(mj, model, states, frame):
    """World positions of ``frame`` for each state: ("body", name) the body's centre of mass
    (``xipos``), ("site", name) a site (``site_xpos``); by ``mj_kinematics`` after the run."""
    kind, name = frame
    d, spec = mj.MjData(model), mj.mjtState.mjSTATE_FULLPHYSICS
    index = mj.mj_name2id(model, getattr(mj.mjtObj, f"mjOBJ_{kind.upper()}"), name)
    x = np.empty((len(states), 3))
    for k, s in enumerate(states):
        mj.mj_setState(model, d, s, spec)
        mj.mj_kinematics(model, d)
        x[k] = (d.xipos if kind == "body" else d.site_xpos)[index]
    return x


def loglog_slope(rows, key, sizes):
    """The least-squares slope of log(µs per step) against log N of ``rows`` (dicts with "N" and
    ``key``: {"per_step": ...}) whose N lies in ``sizes`` = (smallest, largest); None with fewer than
    two such rows."""
    pts = [(r["N"], r[key]["per_step"]) for r in rows if sizes[0] <= r["N"] <= sizes[1] and key in r]
    if len(pts) < 2:
        return None
    n, t = np.log(np.array(pts)).T
    return float(np.polyfit(n, t, 1)[0])


def cpu_name():
    """The CPU's model name from /proc/cpuinfo ("CPU unknown" where there is none), for report headers."""
    try:
        names = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                 if ln.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else "CPU unknown"


def git_commit():
    """``git describe --always --dirty`` of the benchmarks' checkout ("unknown" outside one)."""
    import subprocess

    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def write_report(path, lines, t_start):
    """Write the report ``lines`` (markdown) to ``path`` with the benchmark's wall time since
    ``t_start`` (``time.perf_counter()``) and the load average at the end, and print it."""
    lines = [*lines, f"Benchmark wall time: {time.perf_counter() - t_start:.0f} s; load average at the end "
                     f"{os.getloadavg()[0]:.2f} (1 min)."]
    Path(path).parent.mkdir(exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {path}")
