"""Benchmark: P3 spacecraft (core + 3 reaction wheels), conserve against Exudyn and scipy DOP853.

    python benchmarks/spacecraft.py            # full run (~10 min on 2 cores), writes benchmarks/results/spacecraft.md
    python benchmarks/spacecraft.py --quick    # smoke check: no Exudyn, no slow runs, prints only

What is run (all in one process, same machine):

* conserve, both rotor models (``hybrid``: one spin coordinate per wheel; ``body``: a director
  body on a revolute joint per wheel), P3a (motor torques τ_i(t) = 0.05 sin(2πt/5 + i)) and P3b
  (torque-free), Δt = 1e-2 and 1e-3, T = 20 s. Compile time from the first call of each
  assembly; whole-run time = ``sol.stats['run_time']`` (after compilation), best of 3.
  Extra P3a steps give each model's coarsest step with core attitude error ≤ 1e-4.
* Reference: scipy DOP853 (rtol 1e-12, atol 1e-14) on the gyrostat equations below,
  cross-checked against conserve hybrid at Δt = 2.5e-4 and 1.25e-4 with Richardson extrapolation.
* scipy DOP853 on the gyrostat equations (the peer): a sweep of tolerances.
* Exudyn (if installed): core and wheels as ObjectRigidBody with Euler-parameter nodes, wheels on
  3-D revolute joints (``CreateRevoluteJoint`` -> ObjectJointRevoluteZ, 5 constraints), motor
  torques as body-fixed torque loads (+τ d_i on the wheel, −τ d_i on the core) with Exudyn
  *symbolic* user functions (evaluated in C++, ~2x cheaper here than Python user functions).
  Solvers: generalized-α (spectral radius 0.8: the default 0.9 lets Newton diverge at t ≈ 0.32 s
  for Δt = 1e-3) and TrapezoidalIndex2 (Newmark β = 1/4, γ = 1/2, index-2 constraints). Newton
  settings are Exudyn's defaults (modified Newton, relative tolerance 1e-8), fixed step
  (adaptiveStep off), 1 thread, no solution file, the ``exudynCPPfast`` module (no range checks).
  Wall time = the ``mbs.SolveDynamic`` call (solver initialisation, initial accelerations and
  all steps; model building and ``mbs.Assemble`` excluded).

Gyrostat equations (scipy; the wheels' axial momenta h_i = J_a(ω·d_i + s_i) as states, s_i the
spin rates relative to the core): about the system's centre of mass, in core axes,
J ω' = −ω × (J ω + Σ h_i d_i) − Σ τ_i d_i,  h_i' = τ_i,  R' = R ω̂,  W' = Σ τ_i s_i (motor work),
where J = core inertia + wheel transverse inertias J_t (I − d_i d_iᵀ) + the parallel-axis terms of
all four masses about the system's centre of mass. The centre of mass drifts uniformly (the
core starts at rest, the wheel centres move with it), which does not affect the attitude.

Core attitude error := ‖R(T) − R_ref(T)‖_F (Frobenius; = 2√2 |sin(φ/2)| ≈ √2 φ for the angle φ
of R R_refᵀ). Energy-balance error := max_n |E_n − E_0 − W_n| / |E_0| (W = motor work).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import _peers  # noqa: F401  (no persistent compilation cache: the compile column is measured)
import numpy as np
from scipy.integrate import solve_ivp

import conserve as cs
from conserve.problems import spacecraft

OUT = Path(__file__).parent / "results" / "spacecraft.md"
T_END = 20.0
EPS = 1e-4  # core-attitude threshold for "equal accuracy"
#: one code generation for every run timed against another (``compile="auto"``, the default,
#: would pick by each call's length)
COMPILE = "quick"

# P3 data (the defaults of conserve.problems.spacecraft)
M_CORE, J_CORE = 100.0, np.diag([10.0, 15.0, 20.0])
M_W, J_A, J_T = 2.0, 0.02, 0.012
AXES = np.eye(3)
OFFSETS = 0.5 * AXES
W0 = np.array([0.1, -0.05, 0.2])           # core angular velocity, body axes (= inertial at t0)
SPIN0 = np.array([200.0, -150.0, 100.0])   # wheel spin rates relative to the core
TORQUE = 0.05


def tau(t, motors):
    return TORQUE * np.sin(2 * np.pi * t / 5 + np.arange(3)) if motors else np.zeros(3)


# ---------------------------------------------------------------- gyrostat (scipy)
def _composite_inertia():
    masses = np.array([M_CORE, M_W, M_W, M_W])
    pos = np.vstack([np.zeros(3), OFFSETS])
    c = masses @ pos / masses.sum()
    J = J_CORE + sum(J_T * (np.eye(3) - np.outer(d, d)) for d in AXES)
    for m, r in zip(masses, pos - c):
        J = J + m * (r @ r * np.eye(3) - np.outer(r, r))
    return J


J_SYS = _composite_inertia()
J_SYS_INV = np.linalg.inv(J_SYS)


def gyro_rhs(t, y, motors):
    R, w, h = y[:9].reshape(3, 3), y[9:12], y[12:15]
    ta = tau(t, motors)
    L = J_SYS @ w + AXES.T @ h
    dw = J_SYS_INV @ (-np.cross(w, L) - AXES.T @ ta)
    dR = R @ np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    s = h / J_A - AXES @ w
    return np.concatenate([dR.ravel(), dw, ta, [ta @ s]])


def gyro_energy(y):
    w, h = y[9:12], y[12:15]
    return 0.5 * np.einsum("i...,ij,j...->...", w, J_SYS, w) + (h**2).sum(0) / (2 * J_A)


def run_dop(motors, rtol, atol, repeats=1):
    y0 = np.concatenate([np.eye(3).ravel(), W0, J_A * (AXES @ W0 + SPIN0), [0.0]])
    best = None
    for _ in range(repeats):
        tic = time.perf_counter()
        r = solve_ivp(gyro_rhs, (0.0, T_END), y0, method="DOP853", rtol=rtol, atol=atol, args=(motors,))
        wall = time.perf_counter() - tic
        if not r.success:
            raise RuntimeError(r.message)
        best = wall if best is None else min(best, wall)
    E = gyro_energy(r.y)
    return {"R": r.y[:9, -1].reshape(3, 3), "wall": best, "steps": len(r.t) - 1, "nfev": r.nfev,
            "balance": np.max(np.abs(E - E[0] - r.y[15])) / abs(E[0])}


# ---------------------------------------------------------------- conserve
class ConserveRunner:
    """One assembly per (model, motors); compile once, then best-of-N timed runs."""

    def __init__(self):
        self.assemblies, self.compile = {}, {}

    def run(self, model, motors, dt, repeats=3):
        key = (model, motors)
        if key not in self.assemblies:
            a = spacecraft(model=model, motors=motors).assemble()
            self.assemblies[key] = a
            self.compile[key] = cs.simulate(a, t_end=dt, dt=dt, compile=COMPILE).stats["compile_time"]
        best = None
        for _ in range(repeats):
            tic = time.perf_counter()
            sol = cs.simulate(self.assemblies[key], t_end=T_END, dt=dt, compile=COMPILE)
            wall = time.perf_counter() - tic
            if best is None or sol.stats["run_time"] < best[0].stats["run_time"]:
                best = (sol, wall)
        sol, wall = best
        E0 = abs(sol.energy.total[0])
        L = np.asarray(sol.angular_momentum)
        return {"R": np.asarray(sol["core"].rotation[-1]), "run": sol.stats["run_time"], "call": wall,
                "per_step": sol.stats["time_per_step"], "steps": sol.stats["steps"],
                "unknowns": sol.stats["unknowns"], "newton": float(np.mean(sol.newton_iterations)),
                "balance": float(np.max(np.abs(sol.energy_balance_error)) / E0),
                "balance_abs": float(np.max(np.abs(sol.energy_balance_error))), "E0": E0,
                "L_drift": float(np.max(np.linalg.norm(L - L[0], axis=1)) / np.linalg.norm(L[0])),
                "compile": self.compile[key], "repeats": repeats}


# ---------------------------------------------------------------- Exudyn
def import_exudyn():
    sys.exudynFast = True  # Exudyn's documented switch to its exudynCPPfast module (no range checks)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import exudyn
        return exudyn, None
    except Exception as e:  # noqa: BLE001 - report whatever went wrong
        return None, f"{type(e).__name__}: {e}"


class ExudynModel:
    def __init__(self, exu, motors):
        from exudyn.advancedUtilities import CreateSymbolicUserFunction
        from exudyn.rigidBodyUtilities import RigidBodyInertia
        esym = exu.symbolic
        self.exu = exu
        SC = exu.SystemContainer()
        mbs = SC.AddSystem()
        node_type = exu.NodeType.RotationEulerParameters
        core = mbs.CreateRigidBody(inertia=RigidBodyInertia(M_CORE, J_CORE), referencePosition=[0, 0, 0],
                                   initialAngularVelocity=W0, nodeType=node_type)
        bodies, self._keep = [(core, M_CORE, J_CORE)], []
        for i, (d, c) in enumerate(zip(AXES, OFFSETS)):
            J = J_T * (np.eye(3) - np.outer(d, d)) + J_A * np.outer(d, d)
            wheel = mbs.CreateRigidBody(inertia=RigidBodyInertia(M_W, J), referencePosition=c,
                                        initialVelocity=np.cross(W0, c),
                                        initialAngularVelocity=W0 + SPIN0[i] * d, nodeType=node_type)
            bodies.append((wheel, M_W, J))
            mbs.CreateRevoluteJoint(itemNumbers=[core, wheel], position=c, axis=d, useGlobalFrame=True)
            if motors:
                for body, sign in ((wheel, 1.0), (core, -1.0)):
                    load = mbs.CreateTorque(itemNumber=body, loadVector=sign * d, bodyFixed=True)
                    f = CreateSymbolicUserFunction(mbs, _torque_function(esym, float(i)),
                                                   "loadVectorUserFunction", load)
                    mbs.SetLoadParameter(load, "loadVectorUserFunction", f)
                    self._keep.append(f)  # the expression tree must outlive the solve
        mbs.Assemble()
        self.SC, self.mbs = SC, mbs
        self.nodes = [(mbs.GetObject(b)["nodeNumber"], m, J) for b, m, J in bodies]

    def kinetic_energy(self, configuration):
        exu, E = self.exu, 0.0
        for n, m, J in self.nodes:
            v = np.asarray(self.mbs.GetNodeOutput(n, exu.OutputVariableType.Velocity, configuration))
            w = np.asarray(self.mbs.GetNodeOutput(n, exu.OutputVariableType.AngularVelocityLocal, configuration))
            E += 0.5 * m * v @ v + 0.5 * w @ J @ w
        return E

    def solve(self, solver, dt):
        exu = self.exu
        ss = exu.SimulationSettings()
        ti = ss.timeIntegration
        ti.numberOfSteps, ti.endTime, ti.verboseMode = int(round(T_END / dt)), T_END, 0
        ti.adaptiveStep = False
        ti.generalizedAlpha.spectralRadius = 0.8
        ss.solution.file.write = False
        ss.solution.sensors.active = False
        ss.parallel.numberOfThreads = 1
        ss.displayStatistics = ss.displayComputationTime = False
        stype = {"generalized-α": exu.DynamicSolverType.GeneralizedAlpha,
                 "trapezoidal": exu.DynamicSolverType.TrapezoidalIndex2}[solver]
        E0 = self.kinetic_energy(exu.ConfigurationType.Initial)
        out = io.StringIO()
        tic = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out):
                self.mbs.SolveDynamic(ss, solverType=stype)
        except Exception:  # noqa: BLE001 - Exudyn raises SolverError (and prints) when Newton fails
            s = self.mbs.sys["dynamicSolver"]
            return {"failed": f"Newton failed at t = {s.it.currentTime:.3g} s", "wall": time.perf_counter() - tic}
        wall = time.perf_counter() - tic
        s = self.mbs.sys["dynamicSolver"]
        n_core = self.nodes[0][0]
        R = np.asarray(self.mbs.GetNodeOutput(n_core, exu.OutputVariableType.RotationMatrix)).reshape(3, 3)
        steps = s.it.currentStepIndex - 1 if s.it.currentStepIndex > ti.numberOfSteps else s.it.currentStepIndex
        return {"R": R, "wall": wall, "steps": steps, "newton": s.it.newtonStepsCount / max(steps, 1),
                "jacobians": s.it.newtonJacobiCount, "E0": E0,
                "dE": abs(self.kinetic_energy(exu.ConfigurationType.Current) - E0) / E0}


def _torque_function(esym, phase):
    def UFtorque(mbs, t, load):  # symbolic: recorded once, evaluated in C++
        return load * (TORQUE * esym.sin(2 * np.pi / 5 * t + phase))
    return UFtorque


def exudyn_run(exu, solver, dt, motors=True):
    return ExudynModel(exu, motors).solve(solver, dt)


# ---------------------------------------------------------------- helpers
def err(R, Rref):
    return float(np.linalg.norm(np.asarray(R) - Rref))


def versions():
    import jax
    import scipy
    info = {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "jax": jax.__version__, "nproc": os.cpu_count()}
    try:
        import jaxlib
        info["jaxlib"] = jaxlib.__version__
    except ImportError:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            cpu = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        info["cpu"] = cpu[0] if cpu else platform.processor()
    except OSError:
        info["cpu"] = platform.processor()
    try:
        info["conserve commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                 text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        info["conserve commit"] = "unknown"
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke check: skip Exudyn, the body model at 1e-3, "
                    "the Richardson cross-check and repeats; prints only (unless --out)")
    ap.add_argument("--out", type=Path, default=None, help=f"results file (default: {OUT} for a full run)")
    ap.add_argument("--exudyn-budget", type=float, default=120.0,
                    help="stop an Exudyn sweep when its next run is predicted to exceed this many seconds")
    args = ap.parse_args()
    quick = args.quick
    out_path = args.out if args.out is not None else (None if quick else OUT)
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    reps = 1 if quick else 3
    L = []  # markdown lines

    def log(*a):  # progress to stderr
        print(*a, file=sys.stderr, flush=True)

    # ---- reference --------------------------------------------------------------------
    log("reference: DOP853 rtol 1e-12 ...")
    ref = {m: run_dop(m, 1e-12, 1e-14) for m in (True, False)}
    ref_tight = {m: run_dop(m, 1e-13, 1e-15) for m in (True, False)}
    R_REF = {m: ref[m]["R"] for m in (True, False)}
    runner = ConserveRunner()
    cross = {}
    if not quick:
        for m in (True, False):
            log(f"cross-check {'P3a' if m else 'P3b'}: conserve hybrid at 2.5e-4, 1.25e-4 ...")
            r2 = runner.run("hybrid", m, 2.5e-4, repeats=1)
            r1 = runner.run("hybrid", m, 1.25e-4, repeats=1)
            rich = r1["R"] + (r1["R"] - r2["R"]) / 3
            cross[m] = (err(r2["R"], R_REF[m]), err(r1["R"], R_REF[m]), err(rich, R_REF[m]))

    # ---- conserve main table ------------------------------------------------------------
    rows = {}
    for m in (True, False):
        for model in ("hybrid", "body"):
            for dt in (1e-2, 1e-3):
                if quick and model == "body" and dt == 1e-3:
                    continue
                log(f"conserve {model} {'P3a' if m else 'P3b'} dt={dt:g} ...")
                r = runner.run(model, m, dt, repeats=reps)
                r["err"] = err(r["R"], R_REF[m])
                rows[(m, model, dt)] = r
    # extra P3a steps for equal accuracy
    sweep = {"hybrid": [5e-2, 4e-2, 2.5e-2, 2e-2], "body": [5e-3, 2e-3]}
    for model, dts in sweep.items():
        for dt in dts:
            if quick and model == "body":
                continue
            log(f"conserve {model} P3a dt={dt:g} (accuracy sweep) ...")
            r = runner.run(model, True, dt, repeats=reps if model == "hybrid" else 1)
            r["err"] = err(r["R"], R_REF[True])
            rows[(True, model, dt)] = r

    # ---- DOP853 sweep ---------------------------------------------------------------------
    dop = {}
    for m in (True, False):
        for rtol in (1e-2, 1e-3, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12):
            r = run_dop(m, rtol, rtol * 1e-2, repeats=reps)
            r["err"] = err(r["R"], R_REF[m]) if rtol > 1e-12 else 0.0
            dop[(m, rtol)] = r

    # ---- Exudyn ---------------------------------------------------------------------------
    exu, exu_error = (None, "skipped (--quick)") if quick else import_exudyn()
    exu_rows, exu_best, exu_p3b = {}, {}, {}
    exu_dts = (1e-2, 5e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1.5e-4, 1e-4, 5e-5, 2e-5)
    if exu is not None:
        for solver in ("generalized-α", "trapezoidal"):
            last = None  # (wall time, Δt) of the last successful run
            for dt in exu_dts:
                if last is not None:
                    predicted = last[0] * last[1] / dt
                    if predicted > args.exudyn_budget:
                        exu_rows[(solver, dt)] = {"skipped": f"predicted {predicted:.0f} s > budget"}
                        break
                log(f"exudyn {solver} P3a dt={dt:g} ...")
                r = exudyn_run(exu, solver, dt)
                if "failed" not in r:
                    r["err"] = err(r["R"], R_REF[True])
                exu_rows[(solver, dt)] = r
                if "failed" not in r:
                    last = (r["wall"], dt)
                if "failed" not in r and r["err"] <= EPS:
                    for _ in range(2):  # best of 3 at the chosen step
                        again = exudyn_run(exu, solver, dt)
                        r["wall"] = min(r["wall"], again["wall"])
                    r["repeats"] = 3
                    exu_best[solver] = dt
                    log(f"exudyn {solver} P3b dt={dt:g} (energy) ...")
                    b = exudyn_run(exu, solver, dt, motors=False)
                    if "failed" not in b:
                        b["err"] = err(b["R"], R_REF[False])
                    exu_p3b[solver] = b
                    break

    # ---- report -----------------------------------------------------------------------------
    info = versions()
    if exu is not None:
        info["exudyn"] = exu.__version__ + " (exudynCPPfast)"
    else:
        info["exudyn"] = f"not available: {exu_error}"
    load_end = os.getloadavg()
    L += ["# Spacecraft with three reaction wheels (P3): conserve vs Exudyn vs scipy DOP853", "",
          "One run of `python benchmarks/spacecraft.py`" + (" --quick" if quick else "") + ", same machine, "
          "same process. T = 20 s. **Core attitude error** = ‖R(T) − R_ref(T)‖_F (Frobenius norm of the "
          "difference of the core's rotation matrices; ≈ √2 × the rotation angle of R R_refᵀ). "
          "**Energy balance** = max_n |E_n − E_0 − W_n| / |E_0| (W = motor work; for P3b W = 0). "
          "**Whole run** = the 20 s run after compilation (conserve: `sol.stats['run_time']`; Exudyn: the "
          "`SolveDynamic` call; DOP853: `solve_ivp`), best of 3 unless marked.", ""]
    L += ["## Machine", ""]
    L += [f"- {k}: {v}" for k, v in info.items()]
    L += [f"- load average (1 min) at start / end: {load_start[0]:.2f} / {load_end[0]:.2f} "
          "(another engineer's test runs may share the 2 cores; timings are best-of-3 to damp that)", ""]

    L += ["## Setup", "",
          "- conserve: `conserve.problems.spacecraft(model=..., motors=...)`, default Newton (tol 1e-12); "
          "`hybrid` = one spin coordinate per wheel, `body` = director body + revolute joint + joint motor per wheel.",
          "- scipy: `solve_ivp(method='DOP853')` on the gyrostat equations about the system's centre of mass "
          "(R, ω, the wheels' axial momenta h_i and the motor work as states; Python right-hand side).",
          "- Exudyn: core and wheels as `CreateRigidBody` (Euler-parameter nodes), wheels on `CreateRevoluteJoint` "
          "(ObjectJointRevoluteZ, a 3-D revolute with 5 constraints), motor torques as body-fixed torque loads "
          "(+τ_i d_i on the wheel, −τ_i d_i on the core) with Exudyn symbolic user functions (C++-evaluated). "
          "Generalized-α with spectral radius 0.8 (the default 0.9 lets Newton fail at t ≈ 0.32 s for Δt = 1e-3); "
          "`TrapezoidalIndex2` = Newmark β = 1/4, γ = 1/2 with index-2 constraints. Exudyn's default Newton "
          "(modified Newton, relative tolerance 1e-8), fixed step, `parallel.numberOfThreads = 1`, no solution "
          "file, `sys.exudynFast = True`. Timed: the `mbs.SolveDynamic` call (solver initialisation + steps; "
          "model building and `mbs.Assemble()` excluded). Step sequence 1e-2, 5e-3, 2e-3, 1e-3, 5e-4, 2e-4, "
          "1.5e-4, 1e-4, …; the sweep stops at the first step with attitude error ≤ 1e-4.",
          "- conserve runs use jax's default CPU settings; pinned to one core (`taskset -c 0`) in a side test "
          "they ran no slower, so they are effectively single-threaded like Exudyn here.", ""]
    # reference
    L += ["## Reference", "",
          "scipy DOP853 (rtol 1e-12, atol 1e-14) on the gyrostat equations (see the script's docstring).", ""]
    L += ["| problem | DOP853 steps | vs DOP853 at rtol 1e-13 | conserve hybrid Δt=2.5e-4 | Δt=1.25e-4 "
          "| Richardson (4·R₁ − R₂)/3 | DOP853 energy balance |", "|---|---|---|---|---|---|---|"]
    for m in (True, False):
        c = cross.get(m)
        cc = " | ".join(f"{x:.1e}" for x in c) if c else "— | — | —"
        L.append(f"| {'P3a' if m else 'P3b'} | {ref[m]['steps']} | {err(ref_tight[m]['R'], R_REF[m]):.1e} | {cc} "
                 f"| {ref[m]['balance']:.1e} |")
    L.append("")

    # conserve table
    L += ["## conserve", "",
          "| problem | rotor model | Δt | steps | unknowns | compile [s] | whole run [s] | time/step [µs] "
          "| Newton it./step | attitude error | energy balance (rel.) | (abs. [J]) | ang. momentum drift |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (m, model, dt), r in sorted(rows.items(), key=lambda kv: (not kv[0][0], kv[0][1], -kv[0][2])):
        mark = "" if r["repeats"] == 3 else f" ({r['repeats']}×)"
        L.append(f"| {'P3a' if m else 'P3b'} | {model} | {dt:g} | {r['steps']} | {r['unknowns']} | "
                 f"{r['compile']:.2f} | {r['run']:.3f}{mark} | {1e6 * r['per_step']:.0f} | {r['newton']:.2f} | "
                 f"{r['err']:.2e} | {r['balance']:.1e} | {r['balance_abs']:.1e} | {r['L_drift']:.1e} |")
    E0 = rows[(True, "hybrid", 1e-2)]["E0"]
    L += ["", "Compile time is paid once per model structure (P3a and P3b are different structures); "
          "the other step sizes reuse it. Rows with Δt other than 1e-2 and 1e-3 are the P3a accuracy sweep. "
          f"E_0 = {E0:.6g} J is almost all wheel spin energy (Σ h_i²/2J_a; the core's rotation carries "
          f"{0.5 * W0 @ J_SYS @ W0:.3g} J), so a relative balance of 1e-15 is ~1e-12 J absolute. "
          "A balance of exactly 0 (P3b hybrid) means E_n equals E_0 to the last bit (its ulp is 1.1e-13 J): "
          "the spin energy is constant there and the core's share changes far below that. "
          "Angular-momentum drift = max_n ‖L_n − L_0‖/‖L_0‖.", ""]

    # DOP853 table
    L += ["## scipy DOP853 on the gyrostat equations", "",
          "| problem | rtol (atol = rtol/100) | steps | f evals | whole run [s] | attitude error | energy balance |",
          "|---|---|---|---|---|---|---|"]
    for (m, rtol), r in dop.items():
        e = f"{r['err']:.2e}" if rtol > 1e-12 else "(reference)"
        L.append(f"| {'P3a' if m else 'P3b'} | {rtol:g} | {r['steps']} | {r['nfev']} | {r['wall']:.4f} | {e} | "
                 f"{r['balance']:.1e} |")
    L.append("")

    # Exudyn table
    L += ["## Exudyn (P3a sweep, then P3b at the chosen step)", ""]
    if exu is None:
        L += [f"Exudyn {info['exudyn']}.", ""]
    else:
        L += ["| solver | problem | Δt | steps | whole run [s] | time/step [µs] | Newton it./step "
              "| attitude error | energy error at T (P3b) |", "|---|---|---|---|---|---|---|---|---|"]
        for (solver, dt), r in exu_rows.items():
            if "skipped" in r or "failed" in r:
                L.append(f"| {solver} | P3a | {dt:g} | — | — | — | — | {r.get('skipped') or r.get('failed')} | — |")
                continue
            mark = " (best of 3)" if r.get("repeats") == 3 else ""
            L.append(f"| {solver} | P3a | {dt:g} | {r['steps']} | {r['wall']:.3f}{mark} | "
                     f"{1e6 * r['wall'] / r['steps']:.0f} | {r['newton']:.2f} | {r['err']:.2e} | — |")
        for solver, b in exu_p3b.items():
            dt = exu_best[solver]
            if "failed" in b:
                L.append(f"| {solver} | P3b | {dt:g} | — | — | — | — | {b['failed']} | — |")
            else:
                L.append(f"| {solver} | P3b | {dt:g} | {b['steps']} | {b['wall']:.3f} | "
                         f"{1e6 * b['wall'] / b['steps']:.0f} | {b['newton']:.2f} | {b['err']:.2e} | {b['dE']:.1e} |")
        L += ["", "Single runs in the sweep; the chosen step (first with error ≤ 1e-4) is timed best of 3. "
              "Exudyn reports no motor work, so its energy balance is given for P3b only (|E(T) − E(0)|/E(0)).", ""]

    # ratios at equal accuracy (P3a)
    def cheapest(cands):
        ok = [c for c in cands if c[2] <= EPS]
        return min(ok, key=lambda c: c[1]) if ok else None

    cands = {
        "conserve hybrid": [(f"Δt = {dt:g}", r["run"], r["err"]) for (m, mo, dt), r in rows.items()
                            if m and mo == "hybrid"],
        "conserve body": [(f"Δt = {dt:g}", r["run"], r["err"]) for (m, mo, dt), r in rows.items() if m and mo == "body"],
        "scipy DOP853": [(f"rtol = {rt:g}", r["wall"], r["err"]) for (m, rt), r in dop.items() if m and rt > 1e-12],
    }
    for solver in ("generalized-α", "trapezoidal"):
        if exu is not None:
            cands[f"Exudyn {solver}"] = [(f"Δt = {dt:g}", r["wall"], r["err"]) for (s, dt), r in exu_rows.items()
                                         if s == solver and "err" in r]
    hyb = cheapest(cands["conserve hybrid"])
    hyb_1e2 = rows[(True, "hybrid", 1e-2)]
    L += ["## Ratios at equal core accuracy (P3a, attitude error ≤ 1e-4)", "",
          "Each method at its cheapest run in the tables above with attitude error ≤ 1e-4. "
          "Ratio = peer's whole-run time / conserve hybrid's. The last column uses the hybrid run at "
          f"Δt = 1e-2 instead (error {hyb_1e2['err']:.1e}, far below the threshold: a lower bound).", "",
          "| method | cheapest setting with error ≤ 1e-4 | attitude error | whole run [s] "
          "| ratio vs hybrid (equal accuracy) | ratio vs hybrid at Δt = 1e-2 |", "|---|---|---|---|---|---|"]
    summary = {}
    for name, cl in cands.items():
        c = cheapest(cl)
        if c is None:
            L.append(f"| {name} | none reached 1e-4 | — | — | — | — |")
            continue
        r1 = c[1] / hyb[1] if hyb else float("nan")
        r2 = c[1] / hyb_1e2["run"]
        summary[name] = (c, r1, r2)
        L.append(f"| {name} | {c[0]} | {c[2]:.2e} | {c[1]:.4f} | {r1:.3g} | {r2:.3g} |")
    L.append("")

    # hybrid vs body at the same step
    L += ["## Hybrid vs body rotor model (same Δt)", "",
          "| problem | Δt | whole run body / hybrid | time/step body / hybrid | error body / error hybrid |",
          "|---|---|---|---|---|"]
    for m in (True, False):
        for dt in (1e-2, 1e-3):
            if (m, "body", dt) not in rows:
                continue
            h, b = rows[(m, "hybrid", dt)], rows[(m, "body", dt)]
            L.append(f"| {'P3a' if m else 'P3b'} | {dt:g} | {b['run'] / h['run']:.1f} | "
                     f"{b['per_step'] / h['per_step']:.1f} | {b['err'] / h['err']:.0f} |")
    L.append("")

    # target and reading
    max_bal_h = max(r["balance"] for (m, mo, dt), r in rows.items() if mo == "hybrid")
    exu_ratios = [v[1] for k, v in summary.items() if k.startswith("Exudyn")]
    L += ["## Target", ""]
    if exu_ratios:
        worst = min(exu_ratios)
        L.append(f"- Hybrid whole run ≥ 100× faster than Exudyn's cheapest run of equal core accuracy (≤ 1e-4): "
                 f"**{'met' if worst >= 100 else 'not met'}** — {worst:.0f}× against the cheaper Exudyn solver "
                 f"(hybrid at {hyb[0]}, {hyb[1]:.3f} s). With the hybrid at Δt = 1e-2 (error {hyb_1e2['err']:.1e}) the "
                 f"factor is {min(v[2] for k, v in summary.items() if k.startswith('Exudyn')):.0f}×.")
    else:
        L.append("- Exudyn comparison not available in this run.")
    L.append(f"- Energy balance of every hybrid run ≤ 1e-10: **{'met' if max_bal_h <= 1e-10 else 'not met'}** "
             f"(max {max_bal_h:.1e}).")
    L += ["", "## Reading", ""]
    L += reading(rows, summary, hyb, exu_rows)
    L += ["", f"Benchmark wall time: {time.perf_counter() - t_start:.0f} s."]
    text = "\n".join(L) + "\n"
    print(text)
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(text)
        print(f"wrote {out_path}")


def reading(rows, summary, hyb, exu_rows):
    """3-6 lines generated from the numbers of this run (no number here is typed in by hand)."""
    h2, h3 = rows[(True, "hybrid", 1e-2)], rows[(True, "hybrid", 1e-3)]
    b2 = rows[(True, "body", 1e-2)]
    lines = [
        f"- The hybrid rotor removes the 100–200 rad/s wheel spin from what the step has to resolve: at "
        f"Δt = 1e-2 its core attitude error is {h2['err']:.1e}, the body model's at the same step "
        f"{b2['err']:.1e}, at {b2['per_step'] / h2['per_step']:.0f}× the cost per step ({b2['unknowns']} vs "
        f"{h2['unknowns']} unknowns, dense Newton). From Δt = 1e-2 to 1e-3 its error drops "
        f"{h2['err'] / h3['err']:.0f}× (second order).",
    ]
    ex = {k: v for k, v in summary.items() if k.startswith("Exudyn")}
    if ex:
        k_best = min(ex, key=lambda k: ex[k][0][1])
        c, r1, r2 = ex[k_best]
        dt = float(c[0].split("=")[1])
        per = c[1] / round(T_END / dt)
        lines.append(
            f"- Exudyn (rigid wheels on revolute joints, Euler parameters) needs {c[0]} to reach 1e-4 "
            f"({k_best}, {c[1]:.1f} s, {1e6 * per:.0f} µs/step, ~{exu_rows[(k_best[7:], dt)]['newton']:.0f} "
            f"Newton iterations/step): the hybrid run of equal accuracy ({hyb[0]}, {hyb[1]:.3f} s) is "
            f"{r1:.0f}× faster, the Δt = 1e-2 one {r2:.0f}×. Per step the two codes are within "
            f"{max(per / h2['per_step'], h2['per_step'] / per):.1f}× of each other; the gap is the number of steps.")
    if "scipy DOP853" in summary:
        c, r1, _ = summary["scipy DOP853"]
        lines.append(
            f"- DOP853 on the hand-written gyrostat equations (axial momenta as states: no fast variable left) "
            f"reaches 1e-4 at {c[0]} in {c[1] * 1e3:.1f} ms, {'faster' if r1 < 1 else 'slower'} than the hybrid "
            f"by {max(r1, 1 / r1):.1f}×. It is a reduced model written by hand for this one system, and its energy "
            "balance follows its tolerance; conserve builds the model from parts and keeps energy to round-off.")
    lines.append(
        f"- Energy balance is at round-off for both rotor models at every step size (hybrid ≤ "
        f"{max(r['balance'] for (m, mo, dt), r in rows.items() if mo == 'hybrid'):.0e} relative). The hybrid's "
        f"step costs {1e6 * h3['per_step']:.0f}–{1e6 * h2['per_step']:.0f} µs for {h2['unknowns']} unknowns "
        f"({h3['newton']:.0f}–{h2['newton']:.0f} Newton iterations), i.e. ~{1e6 * h2['per_step'] / h2['newton']:.0f} µs "
        "per iteration: most of the remaining time.")
    return lines


if __name__ == "__main__":
    main()
