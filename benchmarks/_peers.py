"""What the benchmarks share: pinning to one core, importing Exudyn, and an Exudyn fixed-step solve.

Imported by the benchmark scripts (run as ``python benchmarks/<name>.py``, so this directory is on
the path).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time


def pin_to_core0():
    """Pin this thread (pid 0) and every thread started so far to CPU 0; later threads inherit it."""
    os.sched_setaffinity(0, {0})
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), {0})


def import_exudyn():
    """The exudyn module (its fast variant, no range checks), or None if not installed."""
    sys.exudynFast = True  # Exudyn's documented switch to its exudynCPPfast module (no range checks)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import exudyn
        return exudyn
    except ImportError:
        return None


def solve_fixed_step(exu, mbs, solver, dt, t_end, rho, sensors):
    """Exudyn's ``solver`` ("generalized-α" with spectral radius ``rho``, or "trapezoidal" index 2)
    with the fixed step dt to t_end, one thread, no solution file, sensors recorded if ``sensors``.
    Returns wall time (s), steps, Newton iterations and Jacobians per step."""
    ss = exu.SimulationSettings()
    ti = ss.timeIntegration
    n = int(round(t_end / dt))
    ti.numberOfSteps, ti.endTime, ti.verboseMode, ti.adaptiveStep = n, t_end, 0, False
    ti.generalizedAlpha.spectralRadius = rho
    ss.solution.file.write = False
    ss.solution.sensors.active = bool(sensors)
    ss.solution.sensors.writePeriod = dt
    ss.parallel.numberOfThreads = 1
    stype = {"generalized-α": exu.DynamicSolverType.GeneralizedAlpha,
             "trapezoidal": exu.DynamicSolverType.TrapezoidalIndex2}[solver]
    tic = time.perf_counter()
    ok = mbs.SolveDynamic(ss, solverType=stype)
    wall = time.perf_counter() - tic
    it = mbs.sys["dynamicSolver"].it
    if not ok or abs(it.currentTime - t_end) > 0.5 * dt:
        raise RuntimeError(f"Exudyn {solver} dt={dt:g} stopped at t = {it.currentTime:g} s")
    return {"wall": wall, "steps": n, "newton": it.newtonStepsCount / n, "jacobians": it.newtonJacobiCount / n}
