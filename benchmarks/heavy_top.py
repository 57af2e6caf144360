"""Benchmark: P1 heavy top, conserve (director EM) against Exudyn, MuJoCo and scipy's DOP853 in the same run.

    taskset -c 0 python benchmarks/heavy_top.py     # writes benchmarks/results/heavy_top.md

The script pins itself to CPU 0 at start (os.sched_setaffinity, every thread of the process), so
every timing is single-core even without taskset. All methods solve ``conserve.problems.HeavyTop``:
its mass, inertia, tip-to-centre length l and initial state (steady precession) are used as given.

* conserve: Δt = 2e-3 … 2.5e-4, compiled ``compile="optimized"`` (XLA's defaults) and ``"quick"``
  (what simulate's default "auto" takes for long runs; since its Newton loop became one kernel,
  conserve/compilation.py, the faster of the two here); the per-step comparison takes the faster at
  each Δt, as the chain benchmark takes both codes' fastest settings. Compile time from the
  first call (once per model structure, the other step sizes reuse it); time per step =
  ``sol.stats['run_time']`` / steps of a T = 2 s run after compilation, best of ``REPEATS`` × ``ROUNDS`` = 15, in
  five rounds over all methods (a noisy minute of a shared machine then slows every method alike).
* Exudyn (optional, ``pip install -e '.[bench]'``): one ObjectRigidBody with an Euler-parameter node
  at the centre of mass, ``CreateSphericalJoint`` to ground at the tip, gravity as the body's load.
  Solvers: generalized-α (spectral radius ρ∞ = 0.8 as in benchmarks/spacecraft.py, where Exudyn's
  documented default 0.9 lets Newton diverge; one row with 0.9 at Δt = 1e-3 for comparison) and
  TrapezoidalIndex2, the same fixed steps as conserve. Exudyn's default Newton (modified Newton,
  relative tolerance 1e-8), 1 thread, no solution file, no sensors in timed runs, the
  ``exudynCPPfast`` module. Setup = building the model and ``mbs.Assemble``; time per step =
  the ``mbs.SolveDynamic`` call of a T = 2 s run / steps, best of 15 (a new model each), in rounds with conserve.
* MuJoCo (optional, ``pip install -e '.[bench]'``): the same top as an MJCF body on a ball joint
  at the tip (the body's frame at the tip, ``<inertial>`` at l d3 with the mass and the principal
  inertia about the centre of mass), gravity −g e3, ``timestep`` = Δt; contacts and the
  constraint solver off (the model has no constraints: the ball joint is its coordinates; 5–10 %
  faster), no damping, armature or friction loss, ``eulerdamp`` off (no implicit damping in
  Euler). Initial state:
  the ball joint's quaternion = R0, its velocity = the body-frame angular velocity R0ᵀ ω.
  Integrators ``RK4`` and ``Euler`` (semi-implicit: velocities first, positions with the new
  velocities), the same Δt as conserve. Time per step = the wall time of one
  ``mujoco.rollout.rollout`` call of a T = 2 s run (one MjData, so it runs on the calling thread:
  no Python loop over ``mj_step``, no pool) / steps, best of 15 in the same rounds; setup = MJCF
  compilation (``MjModel.from_xml_string``). Azimuth error, energy error and trajectory from the
  rollout's states afterwards (``mj_kinematics`` for the centre of mass, ``mj_forward`` with
  ``mjENBL_ENERGY`` for the energy, kinetic + gravitational). A run whose state MuJoCo resets
  (its warning "Nan, Inf or huge value in QACC") is reported as diverged at that time.
* Peer: solve_ivp(DOP853) on the hand-written equations about the fixed tip
  (R' = R Ω̂, J_o Ω' = −Ω × J_o Ω + Rᵀ(l d3 × (−m g e3)), J_o = J_c + m l² (I − e3 e3ᵀ)).

Accuracy: azimuth error of the centre of mass at T = 2 s against the exact steady precession.
Energy error: max |E − E0|/|E0| over a 20 s run (for Exudyn from node sensors at every step:
E = m v·v/2 + ω_bodyᵀ J ω_body/2 + m g z; for MuJoCo ``data.energy``). Same problem: E0 of each
code, and the centre-of-mass trajectories of the 20 s runs against each other and against the
exact precession.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp
from scipy.spatial.transform import Rotation

import conserve as cs
from conserve.problems import HeavyTop

from _peers import (cpu_name, import_exudyn, import_mujoco, mujoco_diverged, mujoco_energy, mujoco_positions,
                    mujoco_state, pin_to_core0, rollout, solve_fixed_step)

TOP = HeavyTop()
OUT = Path(__file__).parent / "results" / "heavy_top.md"
DTS = (2e-3, 1e-3, 5e-4, 2.5e-4)
T_ACC, T_LONG = 2.0, 20.0
RHO = 0.8  # generalized-α spectral radius at infinity
SOLVERS = ("generalized-α", "trapezoidal")
MJ_INTEGRATORS = ("RK4", "Euler")  # MuJoCo's explicit RK4 and semi-implicit Euler
MJ_TARGET_DT, MJ_TARGET = 2e-3, 0.8  # the target: conserve ≤ 0.8× MuJoCo RK4 per step at Δt = 2e-3
REPEATS, ROUNDS = 3, 5  # best of REPEATS runs in each of ROUNDS rounds over every method: a shared machine
# slows single runs up to 2× for minutes, so each method is timed in every round, not all its runs at once


def initial_state():
    """R0, inertial angular velocity and centre of mass of ``HeavyTop.system()``."""
    R0 = Rotation.from_rotvec([TOP.alpha0, 0, 0]).as_matrix()
    omega = TOP.omega_p * np.array([0, 0, 1.0]) + TOP.omega_s * R0[:, 2]
    return R0, omega, TOP.l * R0[:, 2]


def azimuth_error(t, x):
    az = np.unwrap(np.arctan2(x[:, 1], x[:, 0]))
    return abs(az[-1] - az[0] - TOP.omega_p * (t[-1] - t[0]))


def exact_com(t):
    """Centre of mass of the exact steady precession: x_c(0) turned about e3 by ω_p t."""
    x0, c, s = initial_state()[2], np.cos(TOP.omega_p * t), np.sin(TOP.omega_p * t)
    return np.stack([c * x0[0] - s * x0[1], s * x0[0] + c * x0[1], np.full_like(t, x0[2])], axis=1)


def energy_error(E):
    return float(np.max(np.abs(E - E[0])) / abs(E[0]))


# ---------------------------------------------------------------- conserve
def run_conserve(dt, mode="optimized"):
    """conserve at step dt, its code generated ``mode`` ("quick", what simulate's "auto" takes for long runs, or
    "optimized": ``simulate(..., compile=mode)``, conserve/compilation.py)."""
    assembly = TOP.system().assemble()
    compiled = cs.simulate(assembly, t_end=dt, dt=dt, compile=mode).stats["compile_time"]  # 0 once compiled
    best = None
    for _ in range(REPEATS):
        sol = cs.simulate(assembly, t_end=T_ACC, dt=dt, compile=mode)
        best = sol if best is None or sol.stats["run_time"] < best.stats["run_time"] else best
    long = cs.simulate(assembly, t_end=T_LONG, dt=dt, compile=mode)
    return {"method": f"conserve (director EM, {mode})", "mode": mode, "setting": f"dt = {dt:g}",
            "steps": best.stats["steps"],
            "err": azimuth_error(best.t, best["top"].position), "wall": best.stats["run_time"],
            "per_step": best.stats["time_per_step"], "unknowns": best.stats["unknowns"],
            "setup": f"{compiled:.2f} s compile" if compiled else "reused",
            "newton": float(np.mean(best.newton_iterations)), "drift": energy_error(long.energy.total),
            "E0": float(long.energy.total[0]), "x": np.asarray(long["top"].position), "t": np.asarray(long.t)}


# ---------------------------------------------------------------- scipy DOP853
def rhs(t, y):
    m, ell, g = TOP.mass, TOP.l, TOP.g
    J = np.diag(TOP.inertia + m * ell**2 * np.array([1.0, 1.0, 0.0]))
    R, W = y[:9].reshape(3, 3), y[9:]
    torque_body = R.T @ np.cross(ell * R[:, 2], [0.0, 0.0, -m * g])
    dW = np.linalg.solve(J, -np.cross(W, J @ W) + torque_body)
    dR = R @ np.array([[0, -W[2], W[1]], [W[2], 0, -W[0]], [-W[1], W[0], 0]])
    return np.concatenate([dR.ravel(), dW])


def energy_dop(y):
    m, ell, g = TOP.mass, TOP.l, TOP.g
    J = np.diag(TOP.inertia + m * ell**2 * np.array([1.0, 1.0, 0.0]))
    R, W = y[:9].reshape(3, 3, -1), y[9:]
    return 0.5 * np.einsum("in,ij,jn->n", W, J, W) + m * g * ell * R[2, 2]


def solve_dop(rtol, t_end):
    R0, omega, _ = initial_state()
    y0 = np.concatenate([R0.ravel(), R0.T @ omega])
    tic = time.perf_counter()
    res = solve_ivp(rhs, (0, t_end), y0, method="DOP853", rtol=rtol, atol=rtol * 1e-3, dense_output=False)
    return res, time.perf_counter() - tic


def run_dop(rtol):
    res, wall = solve_dop(rtol, T_ACC)
    x = TOP.l * res.y[:9].reshape(3, 3, -1)[:, 2, :].T
    n = len(res.t) - 1
    return {"method": "scipy DOP853", "setting": f"rtol = {rtol:g}", "steps": n, "err": azimuth_error(res.t, x),
            "wall": wall, "per_step": wall / n, "setup": "—", "newton": None,
            "drift": energy_error(energy_dop(solve_dop(rtol, T_LONG)[0].y))}


# ---------------------------------------------------------------- Exudyn
class ExudynTop:
    """The heavy top as one Exudyn rigid body (Euler parameters) on a spherical joint to ground."""

    def __init__(self, exu, record=False):
        from exudyn.itemInterface import SensorNode
        from exudyn.rigidBodyUtilities import RigidBodyInertia
        tic = time.perf_counter()
        R0, omega, x_c = initial_state()
        self.exu, self.SC = exu, exu.SystemContainer()
        mbs = self.mbs = self.SC.AddSystem()
        body = mbs.CreateRigidBody(inertia=RigidBodyInertia(TOP.mass, np.diag(TOP.inertia)), referencePosition=x_c,
                                   referenceRotationMatrix=R0, initialVelocity=np.cross(omega, x_c),
                                   initialAngularVelocity=omega, gravity=[0.0, 0.0, -TOP.g],
                                   nodeType=exu.NodeType.RotationEulerParameters)
        mbs.CreateSphericalJoint(itemNumbers=[mbs.CreateGround(), body], position=[0.0, 0.0, 0.0], useGlobalFrame=True)
        node, self.sensors = mbs.GetObject(body)["nodeNumber"], {}
        if record:
            for name in ("Position", "Velocity", "AngularVelocityLocal"):
                self.sensors[name] = mbs.AddSensor(SensorNode(nodeNumber=node, storeInternal=True, writeToFile=False,
                                                              outputVariableType=getattr(exu.OutputVariableType, name)))
        mbs.Assemble()
        self.setup = time.perf_counter() - tic
        self.unknowns = mbs.systemData.SystemSize()  # 7 node coordinates, Euler-parameter norm, 3 joint rows

    def solve(self, solver, dt, t_end, rho=RHO):
        return solve_fixed_step(self.exu, self.mbs, solver, dt, t_end, rho, self.sensors)

    def recorded(self):
        """Sensor times, centre of mass and total energy at every step of the last solve."""
        p, v, w = (np.asarray(self.mbs.GetSensorStoredData(self.sensors[k]))
                   for k in ("Position", "Velocity", "AngularVelocityLocal"))
        J = np.diag(TOP.inertia)
        E = (0.5 * TOP.mass * np.sum(v[:, 1:] ** 2, axis=1) + 0.5 * np.einsum("ni,ij,nj->n", w[:, 1:], J, w[:, 1:])
             + TOP.mass * TOP.g * p[:, 3])
        return p[:, 0], p[:, 1:], E


def run_exudyn(exu, solver, dt, rho=RHO):
    best = None
    for _ in range(REPEATS):
        model = ExudynTop(exu)
        r = model.solve(solver, dt, T_ACC, rho)
        if best is None or r["wall"] < best[1]["wall"]:
            best = (model, r)
    model, r = best
    long = ExudynTop(exu, record=True)  # same steps as the timed run, recorded: accuracy, energy, trajectory
    long.solve(solver, dt, T_LONG, rho)
    t, x, E = long.recorded()
    n = r["steps"] + 1
    label = f"Exudyn generalized-α (ρ∞ = {rho:g})" if solver == "generalized-α" else "Exudyn trapezoidal (index 2)"
    return {"method": label, "setting": f"dt = {dt:g}", "steps": r["steps"],
            "err": azimuth_error(t[:n], x[:n]), "wall": r["wall"], "per_step": r["wall"] / r["steps"],
            "setup": f"{1e3 * model.setup:.1f} ms build + Assemble", "unknowns": model.unknowns,
            "newton": r["newton"], "jacobians": r["jacobians"], "drift": energy_error(E),
            "E0": float(E[0]), "x": x, "t": t}


# ---------------------------------------------------------------- MuJoCo
def mjcf(dt, integrator):
    """The top as MJCF: a body on a ball joint at the tip (the origin), its centre of mass at l d3."""
    J = [float(j) for j in TOP.inertia]
    return f"""<mujoco model="heavy top">
  <option timestep="{dt!r}" gravity="0 0 {-float(TOP.g)!r}" integrator="{integrator}">
    <flag contact="disable" constraint="disable" eulerdamp="disable"/>
  </option>
  <worldbody>
    <body name="top">
      <joint name="tip" type="ball" damping="0" armature="0" frictionloss="0"/>
      <inertial pos="0 0 {float(TOP.l)!r}" mass="{float(TOP.mass)!r}" diaginertia="{J[0]!r} {J[1]!r} {J[2]!r}"/>
    </body>
  </worldbody>
</mujoco>"""


def mujoco_top(mj, dt, integrator):
    """(model, initial full-physics state, setup s): the ball joint at R0, body-frame ω = R0ᵀ ω."""
    tic = time.perf_counter()
    model = mj.MjModel.from_xml_string(mjcf(dt, integrator))
    setup = time.perf_counter() - tic
    R0, omega, _ = initial_state()
    data = mj.MjData(model)
    x, y, z, w = Rotation.from_matrix(R0).as_quat()
    data.qpos[:] = [w, x, y, z]
    data.qvel[:] = R0.T @ omega
    return model, mujoco_state(mj, model, data), setup


def run_mujoco(mj, integrator, dt):
    model, state0, setup = mujoco_top(mj, dt, integrator)
    n = int(round(T_ACC / dt))
    wall = min(rollout(mj, model, state0, n)[0] for _ in range(REPEATS))
    n_long = int(round(T_LONG / dt))
    states = np.concatenate([state0[None], rollout(mj, model, state0, n_long)[1][0]])  # nodes 0 … n_long
    diverged = mujoco_diverged(states[None, 1:], dt)
    label = {"RK4": "MuJoCo RK4", "Euler": "MuJoCo Euler (semi-implicit)"}[integrator]
    row = {"method": label, "integrator": integrator, "setting": f"dt = {dt:g}", "steps": n, "wall": wall,
           "per_step": wall / n, "setup": f"{1e3 * setup:.1f} ms MJCF compile", "newton": None,
           "E0": float(mujoco_energy(mj, model, states[:1])[0]), "diverged": diverged}
    if diverged is not None:
        return {**row, "err": np.nan, "drift": np.nan}
    t, x = states[:, 0], mujoco_positions(mj, model, states, ("body", "top"))
    E = mujoco_energy(mj, model, states)
    return {**row, "err": azimuth_error(t[:n + 1], x[:n + 1]), "drift": energy_error(E), "x": x, "t": t}


# ---------------------------------------------------------------- report
def newton_cell(r):
    if r["newton"] is None:
        return "—"
    return f"{r['newton']:.2f}" + (f" ({r['jacobians']:.2f} Jacobians)" if "jacobians" in r else "")


def results_table(rows):
    lines = ["| method | setting | steps | azimuth error T=2 [rad] | whole run T=2 [ms] | time/step [µs] "
             f"| compile / setup | Newton it./step | energy error ({T_LONG:g} s) |", "|---" * 9 + "|"]
    for r in rows:
        if r.get("diverged") is not None:
            err = drift = f"diverged at t = {r['diverged']:g} s"
        else:
            err, drift = f"{r['err']:.2e}", f"{r['drift']:.1e}"
        lines.append(f"| {r['method']} | {r['setting']} | {r['steps']} | {err} | {1e3 * r['wall']:.1f} | "
                     f"{1e6 * r['per_step']:.1f} | {r['setup']} | {newton_cell(r)} | {drift} |")
    return lines


def ratio_section(cons, exu_rows):
    lines = ["## conserve vs Exudyn generalized-α, per step", "",
             f"Ratio = conserve µs/step (its faster code generation at that dt) ÷ Exudyn generalized-α "
             f"(ρ∞ = {RHO:g}) µs/step at the same dt. Target: ratio ≤ 1.0 with conserve's energy error ≤ 1e-13.", "",
             "| dt | conserve code | conserve µs/step | Exudyn GA µs/step | ratio | conserve energy error | "
             "Exudyn GA energy error | target |", "|---|---|---|---|---|---|---|---|"]
    for dt, c in cons.items():
        g = exu_rows[("generalized-α", RHO, dt)]
        ratio = c["per_step"] / g["per_step"]
        met = ratio <= 1.0 and c["drift"] <= 1e-13
        lines.append(f"| {dt:g} | {c['mode']} | {1e6 * c['per_step']:.1f} | {1e6 * g['per_step']:.1f} | "
                     f"**{ratio:.2f}** | "
                     f"{c['drift']:.1e} | {g['drift']:.1e} | {'met' if met else 'not met'} |")
    return lines + [""]


def mujoco_ratio_section(cons, mj_rows):
    lines = ["## conserve vs MuJoCo RK4, per step", "",
             "Ratio = conserve µs/step (its faster code generation at that dt) ÷ MuJoCo RK4 µs/step (one "
             "`mujoco.rollout` call on the calling thread) at the same dt. MuJoCo's semi-implicit Euler is in the "
             f"table above. The issue's target: ratio ≤ {MJ_TARGET:g} at dt = {MJ_TARGET_DT:g}.", "",
             "| dt | conserve µs/step | MuJoCo RK4 µs/step | MuJoCo Euler µs/step | **conserve ÷ RK4** | "
             "azimuth error conserve / RK4 | energy error conserve / RK4 | target |", "|---" * 8 + "|"]
    for dt, c in cons.items():
        rk, eu = mj_rows[("RK4", dt)], mj_rows[("Euler", dt)]
        ratio = c["per_step"] / rk["per_step"]
        target = ("met" if ratio <= MJ_TARGET else "not met") if dt == MJ_TARGET_DT else "—"
        rk_err = "diverged" if rk["diverged"] is not None else f"{rk['err']:.1e}"
        rk_drift = "diverged" if rk["diverged"] is not None else f"{rk['drift']:.1e}"
        lines.append(f"| {dt:g} | {1e6 * c['per_step']:.1f} | {1e6 * rk['per_step']:.2f} | {1e6 * eu['per_step']:.2f} "
                     f"| **{ratio:.2f}** | {c['err']:.1e} / {rk_err} | {c['drift']:.0e} / {rk_drift} | {target} |")
    return lines + [""]


def com_distance(a, b):
    """max over steps of ‖a − b‖ / l for two centre-of-mass trajectories."""
    return float(np.max(np.linalg.norm(a - b, axis=1)) / TOP.l)


def same_problem_section(cons, exu_rows, mj_rows):
    E0 = next(iter(cons.values()))["E0"]
    lines = ["## Same problem?", "", f"Initial energy: conserve E0 = {E0:.15g} J"]
    for name, peer in (("Exudyn's (from its node sensors)", exu_rows), ("MuJoCo's (`data.energy`)", mj_rows)):
        if peer:
            lines[-1] += (f"; {name} {next(iter(peer.values()))['E0']:.15g} J, differing by at most "
                          f"{max(abs(r['E0'] - E0) for r in peer.values()) / abs(E0):.1e}")
    lines[-1] += " relative." if exu_rows or mj_rows else "."
    if mj_rows:
        lines += ["", "MuJoCo RK4 against conserve and the exact precession (centre of mass over the "
                  f"{T_LONG:g} s runs, max over all steps of ‖x − x_other‖ / l):", "",
                  "| dt | MuJoCo RK4 − exact | MuJoCo RK4 − conserve |", "|---|---|---|"]
        for dt, c in cons.items():
            r = mj_rows[("RK4", dt)]
            if r["diverged"] is not None:
                lines.append(f"| {dt:g} | diverged at t = {r['diverged']:g} s | — |")
                continue
            if not np.allclose(r["t"], c["t"]):
                raise RuntimeError(f"MuJoCo times at dt={dt:g} do not match conserve's steps")
            lines.append(f"| {dt:g} | {com_distance(r['x'], exact_com(c['t'])):.1e} | "
                         f"{com_distance(r['x'], c['x']):.1e} |")
    if not exu_rows:
        return lines + [""]
    lines += ["", f"Exudyn: centre-of-mass trajectories of the {T_LONG:g} s runs, max over all steps of "
              "‖x − x_other‖ / l (l = tip-to-centre length); 'exact' = the steady precession.", "",
              "| dt | conserve − exact | Exudyn GA − exact | Exudyn trapezoidal − exact | Exudyn GA − conserve "
              "| Exudyn trapezoidal − conserve |", "|---|---|---|---|---|---|"]
    diff = {}
    for dt, c in cons.items():
        runs = [exu_rows[(s, RHO, dt)] for s in SOLVERS]
        if any(not np.allclose(r["t"], c["t"]) for r in runs):
            raise RuntimeError(f"Exudyn sensor times at dt={dt:g} do not match conserve's steps")
        ex = exact_com(c["t"])
        diff[dt] = [com_distance(r["x"], c["x"]) for r in runs]
        lines.append(f"| {dt:g} | {com_distance(c['x'], ex):.1e} | "
                     + " | ".join(f"{com_distance(r['x'], ex):.1e}" for r in runs) + " | "
                     + " | ".join(f"{d:.1e}" for d in diff[dt]) + " |")
    big, small = max(diff), min(diff)
    shrink = [a / b for a, b in zip(diff[big], diff[small])]
    return lines + ["", f"From dt = {big:g} to {small:g} ({big / small:.0f}× smaller) the Exudyn − conserve "
                    f"difference shrinks {shrink[0]:.0f}× (generalized-α) and {shrink[1]:.0f}× (trapezoidal); "
                    f"second order would give {(big / small) ** 2:.0f}×.", ""]


def equal_accuracy_lines(rows):
    """For each peer run, the cheapest conserve run at least as accurate (azimuth error at T = 2 s)."""
    lines = ["## Equal accuracy (whole run T = 2 s)", ""]
    cons = [r for r in rows if r["method"].startswith("conserve")]
    for r in rows:
        if r["method"].startswith("conserve") or r.get("diverged") is not None or r["drift"] >= 1:
            continue  # not a solution of the problem: diverged, or its energy grew beyond 100 %
        ok = [c for c in cons if c["err"] <= r["err"]]
        if ok:
            c = min(ok, key=lambda c: c["wall"])
            lines.append(f"- {r['method']} {r['setting']} (error {r['err']:.1e}, {1e3 * r['wall']:.1f} ms): "
                         f"conserve at {c['setting']} (error {c['err']:.1e}, {1e3 * c['wall']:.1f} ms); "
                         f"wall-time ratio peer / conserve = {r['wall'] / c['wall']:.2f}.")
        else:
            lines.append(f"- {r['method']} {r['setting']} (error {r['err']:.1e}): no conserve run in this table "
                         "is as accurate (a smaller dt would be needed).")
    return lines + [""]


def header(exu, mj):
    import jax
    return ["# Heavy top (P1): conserve vs Exudyn, MuJoCo and scipy DOP853", "",
            f"Same machine, same run, timings pinned to CPU {sorted(os.sched_getaffinity(0))} "
            "(os.sched_setaffinity at start; run with `taskset -c 0 python benchmarks/heavy_top.py`). "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}, {cpu_name()}, "
            f"{os.cpu_count()} cores, load average at start "
            f"{os.getloadavg()[0]:.2f}; conserve {cs.__version__}, "
            f"jax {jax.__version__}, Exudyn {exu.__version__ if exu else 'not installed'}, "
            f"MuJoCo {mj.__version__ if mj else 'not installed'}.", "",
            "Accuracy = azimuth error of the centre of mass at T = 2 s against the exact steady precession; "
            f"energy error = max |E − E0|/|E0| over {T_LONG:g} s. Time per step after compilation (conserve) / "
            "setup (Exudyn, MuJoCo; MuJoCo timed as one `mujoco.rollout` call on the calling thread), best of "
            f"{REPEATS * ROUNDS} in {ROUNDS} rounds over all methods. "
            "Method details in the docstring of benchmarks/heavy_top.py.", ""]


def reading(cons, exu_rows, mj_rows, dop):
    c, g, g9 = cons[1e-3], exu_rows.get(("generalized-α", RHO, 1e-3)), exu_rows.get(("generalized-α", 0.9, 1e-3))
    lines = ["## Reading", ""]
    if g is not None:
        lines.append(f"- At dt = 1e-3 Exudyn's generalized-α step costs {1e6 * g['per_step']:.1f} µs ({g['unknowns']} "
                     f"unknowns with Euler parameters, {g['newton']:.1f} modified-Newton iterations and "
                     f"{g['jacobians']:.1f} Jacobians per step), conserve's {1e6 * c['per_step']:.1f} µs "
                     f"({c['unknowns']} unknowns, {c['newton']:.1f} Newton iterations, dense jacfwd Jacobian "
                     "whose factors are carried across steps turned with the body, "
                     f"compiled {c['mode']}): "
                     f"ratio {c['per_step'] / g['per_step']:.2f}. With Exudyn's default ρ∞ = 0.9: "
                     f"{1e6 * g9['per_step']:.1f} µs, azimuth error {g9['err']:.1e}.")
        lines.append(f"- At the same dt, azimuth error conserve {c['err']:.1e} vs Exudyn generalized-α {g['err']:.1e}; "
                     f"energy error over {T_LONG:g} s {c['drift']:.0e} vs {g['drift']:.0e} (generalized-α with ρ∞ < 1 "
                     "dissipates; the trapezoidal rule on Euler parameters does not conserve it either).")
    rk = mj_rows.get(("RK4", MJ_TARGET_DT))
    if rk is not None:
        c2 = cons[MJ_TARGET_DT]
        eu = [r for (i, _), r in mj_rows.items() if i == "Euler"]
        stable = [r for r in eu if r["diverged"] is None and r["drift"] < 1]
        lines.append(f"- MuJoCo RK4 at dt = {MJ_TARGET_DT:g}: {1e6 * rk['per_step']:.1f} µs per step (four evaluations "
                     "of the top's dynamics in one `mujoco.rollout`) against conserve's "
                     f"{1e6 * c2['per_step']:.1f} µs: "
                     f"ratio {c2['per_step'] / rk['per_step']:.2f} (target ≤ {MJ_TARGET:g}); its energy error "
                     + ("diverged" if rk["diverged"] is not None else f"{rk['drift']:.0e}")
                     + f" over {T_LONG:g} s (RK4 does not conserve energy). MuJoCo's semi-implicit Euler "
                     + (f"diverges or blows up (energy error > 100 %) at every dt here (the top spins at ω_s = "
                        f"{TOP.omega_s:.0f} rad/s)" if not stable
                        else "keeps its energy error below 100 % only at dt = "
                        + ", ".join(r["setting"][5:] for r in stable)) + ".")
    d = min(dop, key=lambda r: r["err"])
    lines.append(f"- DOP853 (8th order) on the hand-written reduced equations reaches {d['err']:.0e} in {d['steps']} "
                 f"steps at {1e6 * d['per_step']:.0f} µs per step (a Python right-hand side); its energy error "
                 f"follows its tolerance ({d['drift']:.0e}).")
    return lines


def timed_rounds(exu, mj):
    """conserve's rows, Exudyn's (keyed by solver, ρ∞, dt) and MuJoCo's (keyed by integrator, dt),
    each method timed in ROUNDS rounds: the first round's rows with the fastest round's wall and
    per-step times."""
    runs = [(s, RHO, dt) for s in SOLVERS for dt in DTS] + [("generalized-α", 0.9, 1e-3)]
    first = None
    for _ in range(ROUNDS):
        rows = [run_conserve(dt, mode) for mode in ("optimized", "quick") for dt in DTS]
        exu_rows = {} if exu is None else {(s, rho, dt): run_exudyn(exu, s, dt, rho) for s, rho, dt in runs}
        mj_rows = {} if mj is None else {(i, dt): run_mujoco(mj, i, dt) for i in MJ_INTEGRATORS for dt in DTS}
        if first is None:
            first = rows, exu_rows, mj_rows
            continue
        for kept, new in zip(first[0] + list(first[1].values()) + list(first[2].values()),
                             rows + list(exu_rows.values()) + list(mj_rows.values())):
            if new["per_step"] < kept["per_step"]:
                kept["wall"], kept["per_step"] = new["wall"], new["per_step"]
    return first


def main():
    pin_to_core0()
    exu, mj = import_exudyn(), import_mujoco()
    t_start = time.perf_counter()
    lines = header(exu, mj)
    rows, exu_rows, mj_rows = timed_rounds(exu, mj)
    cons = {dt: min((r for r in rows if r["setting"] == f"dt = {dt:g}"), key=lambda r: r["per_step"])
            for dt in DTS}  # the faster code generation at each dt: the per-step comparison
    rows += list(exu_rows.values()) + list(mj_rows.values())
    dop = [run_dop(rtol) for rtol in (1e-6, 1e-8, 1e-10)]
    rows += dop
    lines += results_table(rows) + [""]
    if exu is None:
        lines += ["Exudyn not installed (pip install -e '.[bench]').", ""]
    else:
        lines += ratio_section(cons, exu_rows)
    if mj is None:
        lines += ["MuJoCo not installed (pip install -e '.[bench]').", ""]
    else:
        lines += mujoco_ratio_section(cons, mj_rows)
    lines += same_problem_section(cons, exu_rows, mj_rows)
    lines += equal_accuracy_lines(rows) + reading(cons, exu_rows, mj_rows, dop)
    lines += ["", f"Benchmark wall time: {time.perf_counter() - t_start:.0f} s."]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwrote {OUT}")


if __name__ == "__main__":
    main()
