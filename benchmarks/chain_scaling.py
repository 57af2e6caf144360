"""Benchmark: an N-link spatial pendulum chain (N = 2, 4, 8, 16, 32, 64) with conserve's director
backend (as ``simulate`` runs it: its Newton matrix eliminated along the chain, its factors
carried across steps), the same with a new Newton matrix every step ("fresh", ``reuse=False``) and
with a dense Newton matrix, the reduced and ode backends, Exudyn (generalized-α and trapezoidal index
2) and MuJoCo (RK4 and semi-implicit Euler) in the same run: time per step, compile / setup time and
energy error against N.

    taskset -c 0 python benchmarks/chain_scaling.py [--sizes 2 4 8 16 32 64] [--steps 200] [--repeats 3]
                                                    [--reduced-max N] [--dense-max 32] [--no-check]

Writes benchmarks/results/chain_scaling.md and chain_scaling.png. The script pins itself to CPU 0 at
start (os.sched_setaffinity, every thread of the process), so every timing is single-core.

The chain: N slender bars of length 0.5 m and 1 kg joined by spherical joints, the first to the
ground at the origin, hanging tilted and spinning about the vertical (a fully spatial motion),
gravity; Δt = 1e-3 s, ``--steps`` steps. Every method is timed once per round, in ``--repeats``
(3) rounds over all methods of one N (a noisy minute of a shared machine then slows every method
alike); the best round is kept.

* conserve (compiled ``compile="optimized"``, XLA's faster code; "quick", which simulate's default
  "auto" takes for long runs, compiles in about half the time, benchmarks/results/compile_times.md):
  compile time from a first one-step call; time per step = ``sol.stats['time_per_step']``
  of a ``--steps`` run, best of the rounds. The ode backend (DOP853, rtol
  1e-10) is timed per output interval of Δt, so its per-step numbers compare work for the same
  nodes, not the same accuracy. ``--reduced-max N`` skips the reduced backend above N links; by default every
  size runs it (from N = 3 in its structured form, O(N) per step; N = 2 in its dense form).
  ``--dense-max`` (32) skips the dense director above that N (O(n³) per step).
* Exudyn (optional, ``pip install -e '.[bench]'``), modelled as in benchmarks/heavy_top.py: every
  bar an ObjectRigidBody with an Euler-parameter node at its centre of mass, built from the mass,
  inertia, position, orientation and velocities of conserve's own bodies; ``CreateSphericalJoint``
  (global frame) at the same joint points, gravity as each body's load. Solvers: generalized-α with
  spectral radius ρ∞ = 0.8 (as in heavy_top.py and spacecraft.py) and TrapezoidalIndex2, the same
  fixed Δt; Exudyn's default Newton (modified Newton, relative tolerance 1e-8), 1 thread, no
  solution file, no sensors in timed runs, the ``exudynCPPfast`` module. Setup = building the model
  and ``mbs.Assemble``; time per step = the ``mbs.SolveDynamic`` call / steps, best of the rounds
  (a new model each), then one run with sensors for energy and tip.
* MuJoCo (optional, ``pip install -e '.[bench]'``): the same bars as nested MJCF bodies (built
  from conserve's bodies: each body frame at the bar's start, turned as the bar, ``<inertial>`` at
  its centre with its mass and principal inertia), a ball joint at every joint point, a site at the
  tip; gravity, ``timestep`` = Δt; contacts and the constraint solver off (no constraints: the
  ball joints are the coordinates), no damping, armature or friction loss, ``eulerdamp`` off.
  Initial state: joint quaternions at the reference (identity), each ball joint's velocity the
  bar's angular velocity relative to its parent's, in the bar's frame. Integrators ``RK4`` and
  ``Euler`` (semi-implicit). Time per step = one ``mujoco.rollout.rollout`` call of ``--steps``
  steps on the calling thread (one MjData: no pool, no Python loop over ``mj_step``) / steps, best
  of the rounds; setup = MJCF compilation. Energy (``mjENBL_ENERGY``, kinetic + gravitational)
  and tip from the rollout's states afterwards.

Energy error: max |E − E0|/|E0| over the ``--steps`` run (Exudyn: from node sensors at every step,
E = Σ m v·v/2 + ω_bodyᵀ J ω_body/2 − m g·x; MuJoCo: ``data.energy``). Same problem: E0 of each code
per N, the tip of the last bar against conserve's at Δt = 1e-3 for every N, and at N = 4 over 0.5 s
for Δt = 1e-3 and 1e-4 (the peer − conserve difference must shrink like Δt² if both solve the same
equations: conserve's error is second order, Exudyn's too, MuJoCo RK4's fourth). Targets of the
issue: director ≤ 1.5× Exudyn GA per step at N = 2, ≤ 1.0× Exudyn GA and ≤ 2.5× MuJoCo RK4 at N = 4.
The log–log slope of the director's time per step is a least-squares fit over the sizes 8…64 run;
"fresh" gives the elimination's own growth, the default's also how long carried factors fit the
motion (the longer chain's outer links move faster, and its factors fit for fewer steps).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.errors import ConvergenceError  # noqa: E402
from conserve.problems import _bar  # noqa: E402

from _peers import (cpu_name, import_exudyn, import_mujoco, loglog_slope, mujoco_diverged,  # noqa: E402
                    mujoco_energy, mujoco_positions, mujoco_state, pin_to_core0, rollout, solve_fixed_step)

OUT = Path(__file__).parent / "results"
BACKENDS = ("director", "fresh", "dense", "reduced", "ode")
#: "fresh": the director backend forming a new Newton matrix every step (no factors carried across
#: steps: the elimination's own cost, independent of how long carried factors fit the motion);
#: "dense": with its dense Newton matrix (jacfwd + LU), the structure-blind baseline
BACKEND_OBJECTS = {"fresh": cs.backends.Director(reuse=False), "dense": cs.backends.Director(linear="dense")}
SOLVERS = ("generalized-α", "trapezoidal")
MJ_INTEGRATORS = ("RK4", "Euler")  # MuJoCo's explicit RK4 and semi-implicit Euler
MJ_KEYS = {"RK4": "MuJoCo RK4", "Euler": "MuJoCo Euler"}
#: the issue's per-step targets: {N: {peer: conserve director ÷ peer at most}}
TARGETS = {2: {"generalized-α": 1.5}, 4: {"generalized-α": 1.0, "MuJoCo RK4": 2.5}}
LENGTH = 0.5
DT = 1e-3
RHO = 0.8  # generalized-α spectral radius at infinity
CHECK_N, CHECK_T, CHECK_DTS = 4, 0.5, (1e-3, 1e-4)  # same-problem check: tip trajectory at small dt
SLOPE_RANGE = (8, 64)
#: conserve's code generation (``simulate(..., compile=...)``): XLA's faster code for per-step times;
#: compile times of every code generation are in benchmarks/results/compile_times.md
COMPILE = "optimized"


def chain(n, length=LENGTH, tilt=0.3, spin=1.0):
    """N bars from the origin along a tilted line, rotating rigidly about e3 at ``spin`` rad/s."""
    direction = np.array([np.sin(tilt), 0.0, -np.cos(tilt)])
    w = np.array([0.0, 0.0, spin])
    points = [k * length * direction for k in range(n + 1)]
    bars = [_bar(f"bar{k}", points[k], points[k + 1], omega=w, pivot=np.zeros(3)) for k in range(n)]
    joints = [cs.Spherical(cs.ground, bars[0], at=points[0], name="joint0")]
    joints += [cs.Spherical(bars[k - 1], bars[k], at=points[k], name=f"joint{k}") for k in range(1, n)]
    return cs.System([*bars, *joints, cs.Gravity()])


def energy_error(E):
    E = np.asarray(E)
    return float(np.max(np.abs(E - E[0])) / abs(E[0]))


def conserve_tip(sol, n):
    """(steps + 1, 3) far end of the last bar: centre + d1 L/2."""
    last = sol[f"bar{n - 1}"]
    return np.asarray(last.position) + 0.5 * LENGTH * np.asarray(last.rotation)[:, :, 0]


# ---------------------------------------------------------------- conserve
def run_conserve(assembly, n, backend, steps, dt=DT, repeats=1):
    backend = BACKEND_OBJECTS.get(backend, backend)
    first = cs.simulate(assembly, dt, dt, backend=backend, compile=COMPILE)  # compiles (reported separately)
    try:
        sol = min((cs.simulate(assembly, steps * dt, dt, backend=backend, compile=COMPILE) for _ in range(repeats)),
                  key=lambda s: s.stats["time_per_step"])
    except ConvergenceError as e:  # reported in the tables instead of stopping the benchmark
        return {"failed": str(e).split(". Kept")[0], "compile": first.stats["compile_time"]}
    E = sol.energy.total
    return {"per_step": sol.stats["time_per_step"], "compile": first.stats["compile_time"],
            "unknowns": sol.stats["unknowns"], "drift": energy_error(E), "E0": float(E[0]),
            "t": np.asarray(sol.t), "tip": conserve_tip(sol, n)}


# ---------------------------------------------------------------- Exudyn
class ExudynChain:
    """The chain in Exudyn: one rigid body (Euler parameters) per bar of conserve's ``chain(n)``,
    spherical joints at the same points."""

    def __init__(self, exu, n, record=False):
        from exudyn.itemInterface import SensorBody, SensorNode
        from exudyn.rigidBodyUtilities import RigidBodyInertia
        system = chain(n)
        bars = [p for p in system.parts() if isinstance(p, cs.RigidBody)]
        self.g = next(e for e in system.elements if isinstance(e, cs.Gravity)).g
        tic = time.perf_counter()
        self.exu, self.SC = exu, exu.SystemContainer()
        mbs = self.mbs = self.SC.AddSystem()
        bodies = [mbs.CreateRigidBody(inertia=RigidBodyInertia(b.mass, np.asarray(b.inertia)),
                                      referencePosition=b.position, referenceRotationMatrix=b.rotation,
                                      initialVelocity=b.velocity, initialAngularVelocity=b.angular_velocity,
                                      gravity=self.g, nodeType=exu.NodeType.RotationEulerParameters) for b in bars]
        previous = [mbs.CreateGround()] + bodies[:-1]
        for a, body, bar in zip(previous, bodies, bars):
            start = np.asarray(bar.position) - 0.5 * LENGTH * np.asarray(bar.rotation)[:, 0]
            mbs.CreateSphericalJoint(itemNumbers=[a, body], position=start, useGlobalFrame=True)
        self.nodes = [(mbs.GetObject(b)["nodeNumber"], b_.mass, np.asarray(b_.inertia)) for b, b_ in zip(bodies, bars)]
        self.sensors = []
        if record:
            ovt = exu.OutputVariableType
            for node, _, _ in self.nodes:
                self.sensors.append([mbs.AddSensor(SensorNode(nodeNumber=node, storeInternal=True, writeToFile=False,
                                                              outputVariableType=getattr(ovt, k)))
                                     for k in ("Position", "Velocity", "AngularVelocityLocal")])
            self.tip = mbs.AddSensor(SensorBody(bodyNumber=bodies[-1], localPosition=[0.5 * LENGTH, 0.0, 0.0],
                                                storeInternal=True, writeToFile=False, outputVariableType=ovt.Position))
        mbs.Assemble()
        self.setup = time.perf_counter() - tic
        self.unknowns = mbs.systemData.SystemSize()

    def solve(self, solver, dt, t_end):
        return solve_fixed_step(self.exu, self.mbs, solver, dt, t_end, RHO, self.sensors)

    def recorded(self):
        """Sensor times, tip of the last bar and total energy at every step of the last solve."""
        E = 0.0
        for (_, m, J), sensors in zip(self.nodes, self.sensors):
            x, v, w = (np.asarray(self.mbs.GetSensorStoredData(s))[:, 1:] for s in sensors)
            E = E + 0.5 * m * np.sum(v**2, axis=1) + 0.5 * np.einsum("ni,ij,nj->n", w, J, w) - m * x @ self.g
        tip = np.asarray(self.mbs.GetSensorStoredData(self.tip))
        return tip[:, 0], tip[:, 1:], E


def time_exudyn(exu, n, solver, steps, dt=DT):
    """One timed Exudyn solve of ``steps`` steps (a new model, no sensors)."""
    model = ExudynChain(exu, n)
    r = model.solve(solver, dt, steps * dt)
    return {"per_step": r["wall"] / r["steps"], "setup": model.setup, "unknowns": model.unknowns,
            "newton": r["newton"], "jacobians": r["jacobians"]}


def record_exudyn(exu, n, solver, steps, dt=DT):
    """The run of ``time_exudyn`` again, recorded: energy error, E0, tip trajectory."""
    model = ExudynChain(exu, n, record=True)
    model.solve(solver, dt, steps * dt)
    t, tip, E = model.recorded()
    return {"drift": energy_error(E), "E0": float(E[0]), "t": t, "tip": tip}


# ---------------------------------------------------------------- MuJoCo
def _quat(R):
    """MuJoCo's quaternion (w, x, y, z) of a rotation matrix."""
    from scipy.spatial.transform import Rotation
    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return [w, x, y, z]


def _numbers(v):
    return " ".join(repr(float(x)) for x in np.ravel(v))


def mjcf_chain(n, dt, integrator, length=LENGTH):
    """conserve's ``chain(n)`` as MJCF: nested bodies, each with its frame at the bar's start (its
    joint) turned as the bar (d1 along it), a ball joint there, ``<inertial>`` at the centre with
    the bar's mass and principal inertia; a site "tip" at the far end of the last bar."""
    bars = [p for p in chain(n, length).parts() if isinstance(p, cs.RigidBody)]
    g = next(e for e in chain(1, length).elements if isinstance(e, cs.Gravity)).g
    body, close = [], []
    parent_R, parent_x = np.eye(3), np.zeros(3)
    for k, b in enumerate(bars):
        R = np.asarray(b.rotation)
        start = np.asarray(b.position) - 0.5 * length * R[:, 0]
        J = np.asarray(b.inertia)
        J = np.diag(J) if J.ndim == 2 else J
        indent = "  " * (k + 2)
        body.append(f'{indent}<body name="bar{k}" pos="{_numbers(parent_R.T @ (start - parent_x))}" '
                    f'quat="{_numbers(_quat(parent_R.T @ R))}">\n'
                    f'{indent}  <joint name="joint{k}" type="ball" damping="0" armature="0" frictionloss="0"/>\n'
                    f'{indent}  <inertial pos="{_numbers([0.5 * length, 0, 0])}" mass="{float(b.mass)!r}" '
                    f'diaginertia="{_numbers(J)}"/>')
        close.append(f"{indent}</body>")
        parent_R, parent_x = R, start
    tip = f'{"  " * (n + 2)}<site name="tip" pos="{_numbers([length, 0, 0])}"/>'
    return "\n".join([f'<mujoco model="chain{n}">',
                      f'  <option timestep="{dt!r}" gravity="{_numbers(g)}" integrator="{integrator}">',
                      '    <flag contact="disable" constraint="disable" eulerdamp="disable"/>', "  </option>",
                      "  <worldbody>", *body, tip, *reversed(close), "  </worldbody>", "</mujoco>"])


def mujoco_chain(mj, n, dt, integrator):
    """(model, initial full-physics state, setup s) of the chain: joint quaternions at the reference
    (identity), ball-joint velocities = each bar's angular velocity relative to its parent, in its frame."""
    tic = time.perf_counter()
    model = mj.MjModel.from_xml_string(mjcf_chain(n, dt, integrator))
    setup = time.perf_counter() - tic
    bars = [p for p in chain(n).parts() if isinstance(p, cs.RigidBody)]
    data = mj.MjData(model)
    w_parent = np.zeros(3)
    for k, b in enumerate(bars):
        data.qvel[3 * k:3 * k + 3] = np.asarray(b.rotation).T @ (np.asarray(b.angular_velocity) - w_parent)
        w_parent = np.asarray(b.angular_velocity)
    return model, mujoco_state(mj, model, data), setup


def time_mujoco(mj, n, integrator, steps, dt=DT):
    """One timed ``mujoco.rollout`` of ``steps`` steps on the calling thread."""
    model, state0, setup = mujoco_chain(mj, n, dt, integrator)
    wall = rollout(mj, model, state0, steps)[0]
    return {"per_step": wall / steps, "setup": setup, "unknowns": model.nv}


def record_mujoco(mj, n, integrator, steps, dt=DT):
    """The run of ``time_mujoco`` again, its states evaluated: energy, tip, E0, divergence."""
    model, state0, _ = mujoco_chain(mj, n, dt, integrator)
    states = np.concatenate([state0[None], rollout(mj, model, state0, steps)[1][0]])
    diverged = mujoco_diverged(states[None, 1:], dt)
    E = mujoco_energy(mj, model, states)
    out = {"E0": float(E[0]), "diverged": diverged, "t": states[:, 0]}
    if diverged is None:
        out.update(drift=energy_error(E), tip=mujoco_positions(mj, model, states, ("site", "tip")))
    return out


def tip_distance(a, b, n):
    """max over steps of ‖a − b‖ / (N L) for two tip trajectories at the same times."""
    if a["t"].shape != b["t"].shape or not np.allclose(a["t"], b["t"]):
        raise RuntimeError("output times differ")
    return float(np.max(np.linalg.norm(a["tip"] - b["tip"], axis=1)) / (n * LENGTH))


def small_dt_check(exu, mj):
    """Tip of the CHECK_N-link chain over CHECK_T s: {dt: {peer: ‖peer − conserve director‖ max / (N L)}}
    for each dt in CHECK_DTS (Exudyn GA and TR, MuJoCo RK4, those installed)."""
    assembly = chain(CHECK_N).assemble()
    out = {}
    for dt in CHECK_DTS:
        steps = round(CHECK_T / dt)
        c = run_conserve(assembly, CHECK_N, "director", steps, dt)
        out[dt] = {}
        for s in SOLVERS if exu is not None else ():
            out[dt][s] = tip_distance(record_exudyn(exu, CHECK_N, s, steps, dt), c, CHECK_N)
        if mj is not None:
            out[dt]["MuJoCo RK4"] = tip_distance(record_mujoco(mj, CHECK_N, "RK4", steps, dt), c, CHECK_N)
    return out


# ---------------------------------------------------------------- report
def slope(rows, key):
    """The log–log slope of ``key``'s time per step against N over SLOPE_RANGE (None: too few sizes)."""
    return loglog_slope(rows, key, SLOPE_RANGE)


def cell(r, key, fmt, scale=1.0):
    failed = r.get("failed", {}).get(key[0])
    if failed is not None:
        return fmt.format(scale * failed[key[1]]) if key[1] in failed else "failed"
    return fmt.format(scale * r[key[0]][key[1]]) if key[0] in r else "—"


def header(exu, mj, args):
    import jax
    skipped = (f" The reduced backend is skipped above N = {args.reduced_max} (`--reduced-max`): its compile time "
               "grows steeply with N." if args.reduced_max is not None and max(args.sizes) > args.reduced_max else "")
    return ["# Chain scaling: conserve (director, fresh director, dense director, reduced, ode) vs Exudyn and MuJoCo",
            "",
            f"`taskset -c 0 python benchmarks/chain_scaling.py --sizes {' '.join(map(str, args.sizes))}` — "
            f"{args.steps} steps of Δt = {DT:g} s, same process, pinned to CPU {sorted(os.sched_getaffinity(0))}. "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}, {cpu_name()}, "
            f"{os.cpu_count()} cores, load average at start "
            f"{os.getloadavg()[0]:.2f} (1 min); conserve {cs.__version__}, jax {jax.__version__}, "
            f"Exudyn {exu.__version__ if exu else 'not installed'}, "
            f"MuJoCo {mj.__version__ if mj else 'not installed'}.",
            "",
            f"Every method timed once per round, best of {args.repeats} rounds (each round runs all methods in turn, "
            "so a noisy minute slows all alike). "
            f"conserve (compile='{COMPILE}'): compile time from a first one-step call. ode = solve_ivp(DOP853, "
            "rtol 1e-10) with output every Δt (same nodes, not the same accuracy). Exudyn: one Euler-parameter "
            f"rigid body per bar, CreateSphericalJoint, generalized-α ρ∞ = {RHO:g} (GA) and trapezoidal index 2 "
            "(TR), default modified Newton, 1 thread, no output in timed runs; setup = model build + Assemble. "
            "MuJoCo: nested bodies on ball joints (MJCF), RK4 and semi-implicit Euler, contacts and constraint solver "
            "off, timed as one `mujoco.rollout` call on the calling thread; setup = MJCF compilation. "
            f"Energy error = max |E − E0|/|E0| over the {args.steps} steps. Details in the docstring."
            + skipped + " Run it on an otherwise idle machine: in a trial with the test suite running on both cores, "
            "the director's time per step at N = 8 rose from about 1 ms to 126 ms.", ""]


def conserve_table(rows):
    lines = ["## conserve backends", "",
             "director = the director backend as `simulate` runs it (Newton matrix eliminated along the "
             "chain, `Director(linear='auto')`, its factors carried across steps); fresh = the same with a new "
             "Newton matrix every step (`Director(reuse=False)`); dense = with its dense Newton matrix "
             "(`Director(linear='dense')`, jacfwd + LU).", "",
             "| N | DOF | director µs/step | fresh µs/step | dense µs/step | reduced µs/step | ode µs/step "
             "| reduced / director | unknowns director / fresh / dense / reduced / ode state "
             "| compile director / fresh / dense / reduced / ode [s] "
             "| energy error director / fresh / dense / reduced / ode |", "|" + "---|" * 11]
    for r in rows:
        red = f"{r['reduced']['per_step'] / r['director']['per_step']:.2f}" if "reduced" in r else "—"
        times = " | ".join(cell(r, (b, "per_step"), "{:.0f}", 1e6) for b in BACKENDS)
        lines.append(f"| {r['N']} | {r['dof']} | {times} | {red} | "
                     + " / ".join(cell(r, (b, "unknowns"), "{:.0f}") for b in BACKENDS) + " | "
                     + " / ".join(cell(r, (b, "compile"), "{:.1f}") for b in BACKENDS) + " | "
                     + " / ".join(cell(r, (b, "drift"), "{:.0e}") for b in BACKENDS) + " |")
    return lines + [""]


def comparison_table(rows):
    lines = ["## conserve vs Exudyn, per step", "",
             "Ratio = conserve director µs/step ÷ Exudyn generalized-α µs/step at the same Δt.", "",
             "| N | director µs/step | reduced µs/step | Exudyn GA µs/step | Exudyn TR µs/step | **director ÷ GA** "
             "| director compile [s] | reduced compile [s] | Exudyn setup GA / TR [ms] | Exudyn unknowns "
             "| Exudyn Newton it. / Jacobians per step GA; TR | energy error director / reduced / GA / TR |",
             "|" + "---|" * 12]
    for r in rows:
        if not all(k in r for k in ("director", *SOLVERS)):
            lines.append(f"| {r['N']} | " + " | ".join(["failed (see Failures)"] + ["—"] * 10) + " |")
            continue
        d, g, tr = r["director"], r["generalized-α"], r["trapezoidal"]
        red_time = cell(r, ("reduced", "per_step"), "{:.0f}", 1e6)
        red_compile, red_drift = cell(r, ("reduced", "compile"), "{:.1f}"), cell(r, ("reduced", "drift"), "{:.0e}")
        lines.append(f"| {r['N']} | {1e6 * d['per_step']:.0f} | {red_time} | {1e6 * g['per_step']:.0f} | "
                     f"{1e6 * tr['per_step']:.0f} | **{d['per_step'] / g['per_step']:.2g}** | {d['compile']:.1f} | "
                     f"{red_compile} | {1e3 * g['setup']:.1f} / {1e3 * tr['setup']:.1f} | {g['unknowns']} | "
                     f"{g['newton']:.1f} / {g['jacobians']:.2f}; {tr['newton']:.1f} / {tr['jacobians']:.2f} | "
                     f"{d['drift']:.0e} / {red_drift} / {g['drift']:.0e} / {tr['drift']:.0e} |")
    return lines + [""]


def mujoco_table(rows):
    lines = ["## conserve vs MuJoCo, per step", "",
             "Ratio = conserve director µs/step ÷ MuJoCo µs/step (one `mujoco.rollout` call, calling thread) at the "
             "same Δt. Tip = max over steps of ‖x_tip − x_tip,director‖ / (N L).", "",
             "| N | director µs/step | MuJoCo RK4 µs/step | MuJoCo Euler µs/step | **director ÷ RK4** "
             "| director ÷ Euler "
             "| MuJoCo DOF (nv) | MuJoCo setup [ms] | energy error director / RK4 / Euler "
             "| tip RK4 − director | tip Euler − director |", "|" + "---|" * 11]
    for r in rows:
        if not all(k in r for k in ("director", *MJ_KEYS.values())):
            continue
        d, rk, eu = r["director"], r["MuJoCo RK4"], r["MuJoCo Euler"]
        drift = [f"{x['drift']:.0e}" if x.get("diverged") is None else "diverged" for x in (d, rk, eu)]
        tips = [f"{tip_distance(x, d, r['N']):.1e}" if x.get("diverged") is None else "—" for x in (rk, eu)]
        lines.append(f"| {r['N']} | {1e6 * d['per_step']:.0f} | {1e6 * rk['per_step']:.1f} | "
                     f"{1e6 * eu['per_step']:.1f} | **{d['per_step'] / rk['per_step']:.2g}** | "
                     f"{d['per_step'] / eu['per_step']:.2g} | {rk['unknowns']} | {1e3 * rk['setup']:.1f} | "
                     + " / ".join(drift) + " | " + " | ".join(tips) + " |")
    return lines + [""]


def targets_section(rows):
    s = slope(rows, "director")
    by_n = {r["N"]: r for r in rows}
    s_text = f"{s:.3f}" if s is not None else "not measured (needs ≥ 2 sizes in 8…32)"
    d32 = f"{1e3 * by_n[32]['director']['per_step']:.1f} ms/step" if "director" in by_n.get(32, {}) else "not measured"
    compiled = {r["N"]: (r.get("reduced") or r.get("failed", {}).get("reduced")) for r in rows}
    compiled = {n: c for n, c in compiled.items() if c is not None}
    if 64 in compiled:
        r64 = f"{compiled[64]['compile']:.1f} s" + (" (then Newton failed)" if "failed" in compiled[64] else "")
    elif compiled:
        top = max(compiled)
        r64 = (f"not measured in this run (largest N compiled: {top}, {compiled[top]['compile']:.1f} s"
               + (", then Newton failed in the timed run)" if "failed" in compiled[top] else ")"))
    else:
        r64 = "not measured in this run"
    ga = [(r["N"], r["director"]["per_step"] / r["generalized-α"]["per_step"]) for r in rows if "generalized-α" in r]
    lines = ["## Scaling and the project's targets", "",
             f"- log–log slope of conserve director's time per step against N over N = {SLOPE_RANGE[0]}…"
             f"{SLOPE_RANGE[1]} (least squares over the sizes run): **{s_text}** (target ≤ 1.2)."]
    for key, label in (("fresh", "conserve director with a new Newton matrix every step (reuse=False)"),
                       ("reduced", "conserve reduced (structured form)"), ("generalized-α", "Exudyn generalized-α"),
                       ("MuJoCo RK4", "MuJoCo RK4")):
        if (s_key := slope(rows, key)) is not None:
            lines.append(f"- the same slope for {label}: {s_key:.2f}.")
    lines += [f"- 32-link chain, director: **{d32}** (target ≤ 1 ms/step).",
              f"- reduced compile at N = 64: {r64} with compile='{COMPILE}' (target ≤ 5 s; every code generation: "
              "benchmarks/results/compile_times.md)."]
    if ga:
        lines.append("- director ÷ Exudyn GA per N: " + ", ".join(f"N = {n}: {q:.2g}" for n, q in ga) + ".")
    rk = [(r["N"], r["director"]["per_step"] / r["MuJoCo RK4"]["per_step"]) for r in rows
          if "MuJoCo RK4" in r and "director" in r]
    if rk:
        lines.append("- director ÷ MuJoCo RK4 per N: " + ", ".join(f"N = {n}: {q:.2g}" for n, q in rk) + ".")
    for n, targets in TARGETS.items():
        for peer, limit in targets.items():
            r = by_n.get(n, {})
            if "director" in r and peer in r:
                q = r["director"]["per_step"] / r[peer]["per_step"]
                label = {"generalized-α": "Exudyn generalized-α"}.get(peer, peer)
                lines.append(f"- the issue's target, {n}-link chain: director ≤ {limit:g}× {label} per step: "
                             f"**{q:.2f}×**, " + ("met." if q <= limit else "not met."))
    return lines + [""]


def same_problem_section(rows, check):
    lines = ["## Same problem?", "",
             "Initial energy E0 of each code and the tip of the last bar over the timed runs (Δt = 1e-3): "
             "max over steps of ‖x_tip − x_tip,director‖ / (N L).", "",
             "| N | E0 director [J] | max relative E0 difference (reduced, ode, GA, TR, MuJoCo) | tip GA − director "
             "| tip TR − director | tip MuJoCo RK4 − director | tip reduced − director |", "|---" * 7 + "|"]
    for r in rows:
        if "director" not in r:
            continue
        E0 = r["director"]["E0"]
        others = [k for k in ("reduced", "ode", *SOLVERS, *MJ_KEYS.values()) if k in r]
        dE0 = max((abs(r[k]["E0"] - E0) for k in others), default=0.0) / abs(E0)
        tips = [f"{tip_distance(r[k], r['director'], r['N']):.1e}" if k in r and "tip" in r[k] else "—"
                for k in (*SOLVERS, "MuJoCo RK4", "reduced")]
        lines.append(f"| {r['N']} | {E0:.12g} | {dE0:.1e} | " + " | ".join(tips) + " |")
    if check:
        peers = list(next(iter(check.values())))
        lines += ["", f"Small Δt: the {CHECK_N}-link chain over {CHECK_T:g} s, tip of the peer − tip of conserve "
                  "director (max over steps, / (N L)):", "", "| Δt | " + " | ".join(f"{p} − director" for p in peers)
                  + " |", "|---" * (len(peers) + 1) + "|"]
        lines += [f"| {dt:g} | " + " | ".join(f"{d[p]:.1e}" for p in peers) + " |" for dt, d in check.items()]
        big, small = max(check), min(check)
        lines += ["", f"From Δt = {big:g} to {small:g} the difference shrinks "
                  + ", ".join(f"{check[big][p] / check[small][p]:.0f}× ({p})" for p in peers)
                  + f"; second order would give {(big / small) ** 2:.0f}× (conserve's own error is second order, "
                  "so against MuJoCo's fourth-order RK4 the difference is conserve's error)."]
    return lines + [""]


def failures_section(rows):
    failed = [(r["N"], k, f) for r in rows for k, f in r.get("failed", {}).items()]
    if not failed:
        return []
    lines = ["## Failures", ""]
    for n, k, f in failed:
        compiled = f" (compile {f['compile']:.1f} s)" if "compile" in f else ""
        lines.append(f"- N = {n}, {k}{compiled}: {f['failed']}")
    return lines + [""]


def plot(rows):
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    series = [(b, f"conserve {b}", s) for b, s in zip(BACKENDS, ("o-", "o:", "s-", "^--"))]
    series += [("generalized-α", f"Exudyn GA ρ∞={RHO:g}", "D-"), ("trapezoidal", "Exudyn TR index 2", "v-"),
               ("MuJoCo RK4", "MuJoCo RK4", "P-"), ("MuJoCo Euler", "MuJoCo Euler", "x:")]
    for key, label, style in series:
        pts = [(r["N"], 1e6 * r[key]["per_step"]) for r in rows if key in r]
        if pts:
            ax.loglog(*zip(*pts), style, label=label)
    sizes = [r["N"] for r in rows]
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("links N")
    ax.set_ylabel(f"µs per step (Δt = {DT:g} s)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("Spatial pendulum chain: time per step against N")
    fig.tight_layout()
    fig.savefig(OUT / "chain_scaling.png", dpi=110)


def measure(n, args, exu, mj):
    """One row: every method on the n-link chain, timed once per round in ``args.repeats`` rounds
    (the best kept), then the peers' runs recorded once (energy, tip)."""
    assembly = chain(n).assemble()
    row, failed = {"N": n, "dof": assembly.degrees_of_freedom}, {}
    methods = [b for b in BACKENDS if not (b == "reduced" and args.reduced_max is not None and n > args.reduced_max)
               and not (b == "dense" and n > args.dense_max)]
    methods += list(SOLVERS) if exu is not None else []
    methods += list(MJ_INTEGRATORS) if mj is not None else []
    for _ in range(args.repeats):
        for m in methods:
            key = MJ_KEYS.get(m, m)
            if key in failed:
                continue
            if m in BACKENDS:
                r = run_conserve(assembly, n, m, args.steps)
            elif m in SOLVERS:
                try:
                    r = time_exudyn(exu, n, m, args.steps)
                except RuntimeError as e:
                    r = {"failed": str(e)}
            else:
                r = time_mujoco(mj, n, m, args.steps)
            if "failed" in r:
                failed[key] = r
            elif key not in row or r["per_step"] < row[key]["per_step"]:
                if key in row and "compile" in r:
                    r["compile"] = row[key]["compile"]  # the first round's call compiled; later ones reuse it
                row[key] = r
    for m in methods:
        key = MJ_KEYS.get(m, m)
        if key in failed:
            row.pop(key, None)
            f = failed[key]
            print(f"N = {n:2d} {key:13s}: " + (f"compile {f['compile']:5.1f} s, " if "compile" in f else "")
                  + f["failed"], flush=True)
            continue
        if m in SOLVERS:
            row[key].update(record_exudyn(exu, n, m, args.steps))
        elif m in MJ_INTEGRATORS:
            row[key].update(record_mujoco(mj, n, m, args.steps))
        r = row[key]
        setup = f"compile {r['compile']:5.1f} s" if "compile" in r else f"setup {1e3 * r['setup']:5.1f} ms"
        drift = f"{r['drift']:.1e}" if r.get("diverged") is None else f"diverged at t = {r['diverged']:g} s"
        print(f"N = {n:2d} {key:13s}: {1e6 * r['per_step']:9.1f} µs/step, {setup}, {r['unknowns']} unknowns, "
              f"energy {drift}", flush=True)
    if failed:
        row["failed"] = failed
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds over every method per N, each method timed once per round (best kept)")
    parser.add_argument("--reduced-max", type=int, default=None, help="skip the reduced backend above this N")
    parser.add_argument("--dense-max", type=int, default=32, help="skip the dense director above this N")
    parser.add_argument("--no-check", action="store_true", help="skip the small-Δt same-problem check")
    args = parser.parse_args(argv)
    pin_to_core0()
    exu, mj = import_exudyn(), import_mujoco()
    t_start = time.perf_counter()
    lines = header(exu, mj, args)
    rows = [measure(n, args, exu, mj) for n in args.sizes]
    check = small_dt_check(exu, mj) if (exu is not None or mj is not None) and not args.no_check else None

    OUT.mkdir(exist_ok=True)
    plot(rows)
    lines += conserve_table(rows)
    if exu is None:
        lines += ["Exudyn not installed (pip install -e '.[bench]'): no comparison.", ""]
    else:
        lines += comparison_table(rows)
    lines += mujoco_table(rows) if mj is not None else ["MuJoCo not installed (pip install -e '.[bench]').", ""]
    lines += same_problem_section(rows, check)
    lines += targets_section(rows) + failures_section(rows)
    lines += ["![chain scaling](chain_scaling.png)", "", f"Benchmark wall time: {time.perf_counter() - t_start:.0f} s; "
              f"load average at the end {os.getloadavg()[0]:.2f} (1 min)."]
    (OUT / "chain_scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {OUT / 'chain_scaling.md'}, {OUT / 'chain_scaling.png'}")


if __name__ == "__main__":
    main()
