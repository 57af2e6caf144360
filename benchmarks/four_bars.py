"""Benchmark: the IFToMM N-four-bar mechanism (problem A02 of the IFToMM library of computational
benchmark problems for multibody dynamics) for N = 2 … 64 loops, conserve (director backend) against
Exudyn (generalized-α) in the same run: time per step against N, its log–log slope, energy error,
and the crank angle after 1 s against the exact motion.

    taskset -c 0 python benchmarks/four_bars.py [--sizes 2 4 8 16 32 40 64] [--repeats 3] [--dt 1e-3]
                                                [--check-sizes 2 8 40] [--check-dt 2e-3] [--no-sparse]

Writes benchmarks/results/four_bars.md. The script pins itself to CPU 0 at start
(os.sched_setaffinity, every thread of the process), so every timing is single-core.

The mechanism (A02): N four-bar loops side by side sharing their cranks: N + 1 cranks from ground
pivots A_i = (i, 0, 0) m to B_i = (i, 1, 0) m (upright) and N couplers B_i B_i+1, 2N + 1 links in
all, each a uniform slender bar of 1 m and 1 kg (moment of inertia m L²/12 about its centre
perpendicular to it; as 3-D bodies the axial moment is that of a 1 cm radius, m r²/2, which the
planar motion does not feel); revolute joints about e3 at every A_i and B_i (3N + 1 of them);
gravity 9.81 m/s² along −y; initially B0 moves at 1 m/s along +x (every crank turns at −1 rad/s,
the couplers translate). The standard runs N = 40 for 20 s and compares B0's position and velocity
with its reference solution; in the horizontal position every link is collinear and the
mechanism has N + 1 degrees of freedom for an instant (a singular configuration), which it
passes twice per turn: from the upright start it swings through it within the first second.

Since every loop is a parallelogram, the motion is that of one angle θ (cranks from +x): with
I = (N + 1)(m L²/12 + m L²/4) + N m L² and k = m g L ((N + 1)/2 + N), I θ'' = −k cos θ. Its
solution by DOP853 at rtol 1e-13 is the exact reference here (in place of the standard's data
file): the crank angle θ(1 s) of each code is compared with it, and E0 with I θ'0²/2 + k sin θ0.

* conserve: 2N + 1 rigid bodies, ``cs.Revolute`` joints (5 rows each: 15N + 5 rows for 12N + 6
  coordinates of a one-degree-of-freedom mechanism, so 3N rows are redundant and dropped by
  ``System.assemble()``); director backend, ``compile="optimized"``. Its Newton matrix is
  eliminated along the chain of loops (``sol.stats["newton_matrix"]`` "tree": each loop's closing
  joint with the two bodies it joins one node, ``conserve.discrete.linear``), so the cost grows
  linearly with N. Compile time from a first one-step call, ``assemble()`` timed apart; time per
  step = ``sol.stats['time_per_step']``.
* Exudyn (optional, ``pip install -e '.[bench]'``): the same 3-D bodies (built from conserve's:
  mass, inertia, position, orientation, velocities), an Euler-parameter node each,
  ``CreateRevoluteJoint`` at the same points — all 3N + 1 joints with their 5 rows, so 3N rows are
  redundant; Exudyn runs them with ``linearSolver.ignoreSingularJacobian`` and its ``EigenDense``
  solver (its default ``EXUdense`` and ``EigenSparse`` stop at the singular Jacobian).
  Generalized-α (ρ∞ = 0.8, as in the other benchmarks), the same fixed Δt, default modified
  Newton, 1 thread, no output in timed runs, ``exudynCPPfast``. Also (``--no-sparse`` skips it) the
  same bodies with the redundant rows left out by hand — each coupler's second joint a
  ``GenericJoint`` constraining only the x and y displacement (2 rows instead of 5) — on Exudyn's
  sparse solver (``EigenSparse``): the model an Exudyn user would write for speed, not the same
  constraint set as conserve's.

Timing: per N, every method is run once per round in ``--repeats`` (3) rounds (a noisy minute of a
shared machine slows all alike), best round kept; the runs take ``steps(N)`` = clip(2000/N, 10, 200)
steps of ``--dt`` (1e-3 s) from the upright start (Exudyn's dense solver makes large N slow: about
3 s per step at N = 64). Energy error = max |E − E0|/|E0| over the timed run (conserve) and over the check
run below. The log–log slope of µs/step against N is a least-squares fit over the sizes 8…64 run.

Same problem (``--check-sizes``, ``--check-dt``): a 1 s run from the same start through the
singular position with each code at Δt = ``--check-dt``: θ(1 s) against the exact one (both codes
are second order, their errors ~Δt²), E0 of each code against the exact E0, energy error over
the run (Exudyn's from its node sensors).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

import conserve as cs
from conserve.errors import ConvergenceError

from _peers import cpu_name, import_exudyn, loglog_slope, pin_to_core0, solve_fixed_step, write_report

OUT = Path(__file__).parent / "results" / "four_bars.md"
L, MASS, RADIUS, G = 1.0, 1.0, 0.01, 9.81
V_B0 = 1.0  # m/s, initial velocity of B0 along +x
COMPILE = "optimized"
RHO = 0.8  # generalized-α spectral radius at infinity
SLOPE_RANGE = (8, 64)
CHECK_T = 1.0
TARGET_SLOPE, TARGET_N, TARGET_RATIO = 1.2, 40, 1.0  # the targets
ENERGY_LIMIT = 1e-12  # conserve's energy error must stay below this (relative)


def steps(n):
    """Steps of a timed run at N loops: ~N⁻¹ so that the large, slow sizes stay affordable."""
    return int(np.clip(round(2000 / n), 10, 200))


# ---------------------------------------------------------------- the mechanism
def link(name, start, end, omega=0.0, velocity=(0.0, 0.0, 0.0)):
    """A uniform slender bar from ``start`` to ``end`` in the x–y plane: d1 along it, d3 = e3; turning
    at ``omega`` rad/s about e3 about ``start``, which moves at ``velocity``."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    d1 = (end - start) / np.linalg.norm(end - start)
    d3 = np.array([0.0, 0.0, 1.0])
    R = np.column_stack([d1, np.cross(d3, d1), d3])
    w = np.array([0.0, 0.0, omega])
    centre = 0.5 * (start + end)
    transverse = MASS * L**2 / 12
    return cs.RigidBody(name, mass=MASS, inertia=(0.5 * MASS * RADIUS**2, transverse, transverse), position=centre,
                        orientation=R, velocity=np.asarray(velocity) + np.cross(w, centre - start),
                        angular_velocity=w)


def four_bars(n):
    """The N-four-bar mechanism as a conserve System (3N + 1 revolute joints about e3)."""
    omega = -V_B0 / L  # B0 = A0 + L (cos θ, sin θ) at θ = π/2: ẋ_B0 = −L θ'
    tip_velocity = np.cross([0.0, 0.0, omega], [0.0, L, 0.0])
    cranks = [link(f"crank{i}", [i * L, 0, 0], [i * L, L, 0], omega=omega) for i in range(n + 1)]
    couplers = [link(f"coupler{i}", [i * L, L, 0], [(i + 1) * L, L, 0], velocity=tip_velocity) for i in range(n)]
    ez = [0.0, 0.0, 1.0]
    joints = [cs.Revolute(cs.ground, c, at=[i * L, 0, 0], axis=ez, name=f"A{i}") for i, c in enumerate(cranks)]
    for i, c in enumerate(couplers):
        joints += [cs.Revolute(cranks[i], c, at=[i * L, L, 0], axis=ez, name=f"B{i}-coupler{i}"),
                   cs.Revolute(cranks[i + 1], c, at=[(i + 1) * L, L, 0], axis=ez, name=f"B{i + 1}-coupler{i}")]
    return cs.System([*cranks, *couplers, *joints, cs.Gravity([0.0, -G, 0.0])])


def exact(n):
    """(θ(t) callable, E0): the one-angle motion I θ'' = −k cos θ from θ = π/2, θ' = −V_B0/L."""
    inertia = (n + 1) * MASS * L**2 / 3 + n * MASS * L**2
    k = MASS * G * L * ((n + 1) / 2 + n)
    theta0, rate0 = np.pi / 2, -V_B0 / L
    sol = solve_ivp(lambda t, y: [y[1], -k / inertia * np.cos(y[0])], (0.0, CHECK_T), [theta0, rate0],
                    method="DOP853", rtol=1e-13, atol=1e-14, dense_output=True)
    return (lambda t: sol.sol(t)[0]), 0.5 * inertia * rate0**2 + k * np.sin(theta0)


def crank_angle(b0):
    """θ of crank 0 from B0 (…, 3): the angle of A0B0 (A0 at the origin) from +x, unwrapped."""
    return np.unwrap(np.arctan2(b0[:, 1], b0[:, 0]))


def energy_error(E):
    E = np.asarray(E)
    return float(np.max(np.abs(E - E[0])) / abs(E[0]))


# ---------------------------------------------------------------- conserve
def run_conserve(assembly, n_steps, dt, compiled=None):
    """One run of ``n_steps`` steps (compiled by a first one-step call if ``compiled`` is None)."""
    compile_time = compiled if compiled is not None else cs.simulate(
        assembly, dt, dt, compile=COMPILE).stats["compile_time"]
    try:
        sol = cs.simulate(assembly, n_steps * dt, dt, compile=COMPILE)
    except ConvergenceError as e:
        return {"failed": str(e).split(". Kept")[0], "compile": compile_time}
    last = sol["crank0"]
    b0 = np.asarray(last.position) + 0.5 * L * np.asarray(last.rotation)[:, :, 0]
    E = sol.energy.total
    return {"per_step": sol.stats["time_per_step"], "compile": compile_time, "unknowns": sol.stats["unknowns"],
            "matrix": sol.stats.get("newton_matrix", "?"), "drift": energy_error(E), "E0": float(E[0]),
            "theta": crank_angle(b0), "newton": float(np.mean(sol.newton_iterations))}


# ---------------------------------------------------------------- Exudyn
class ExudynFourBars:
    """The mechanism in Exudyn, built from conserve's bodies: Euler-parameter rigid bodies and
    CreateRevoluteJoint at the same points; ``redundant=False`` closes each loop by a GenericJoint
    constraining x and y only (the redundant rows left out by hand)."""

    def __init__(self, exu, n, redundant=True, record=False):
        from exudyn.itemInterface import GenericJoint, MarkerBodyRigid, SensorBody, SensorNode
        from exudyn.rigidBodyUtilities import RigidBodyInertia
        system = four_bars(n)
        parts = {p.name: p for p in system.parts() if isinstance(p, cs.RigidBody)}
        tic = time.perf_counter()
        self.exu, self.SC = exu, exu.SystemContainer()
        mbs = self.mbs = self.SC.AddSystem()
        g = [0.0, -G, 0.0]
        body = {name: mbs.CreateRigidBody(inertia=RigidBodyInertia(b.mass, np.asarray(b.inertia)),
                                          referencePosition=b.position, referenceRotationMatrix=b.rotation,
                                          initialVelocity=b.velocity, initialAngularVelocity=b.angular_velocity,
                                          gravity=g, nodeType=exu.NodeType.RotationEulerParameters)
                for name, b in parts.items()}
        ground, ez = mbs.CreateGround(), [0.0, 0.0, 1.0]
        for i in range(n + 1):
            mbs.CreateRevoluteJoint(itemNumbers=[ground, body[f"crank{i}"]], position=[i * L, 0, 0], axis=ez)
        for i in range(n):
            c = body[f"coupler{i}"]
            mbs.CreateRevoluteJoint(itemNumbers=[body[f"crank{i}"], c], position=[i * L, L, 0], axis=ez)
            if redundant:
                mbs.CreateRevoluteJoint(itemNumbers=[body[f"crank{i + 1}"], c], position=[(i + 1) * L, L, 0], axis=ez)
            else:  # B_i+1 of crank i+1 (its far end) and of the coupler (its far end) coincide in x and y
                m0 = mbs.AddMarker(MarkerBodyRigid(bodyNumber=body[f"crank{i + 1}"], localPosition=[0.5 * L, 0, 0]))
                m1 = mbs.AddMarker(MarkerBodyRigid(bodyNumber=c, localPosition=[0.5 * L, 0, 0]))
                mbs.AddObject(GenericJoint(markerNumbers=[m0, m1], constrainedAxes=[1, 1, 0, 0, 0, 0]))
        self.sensors, self.nodes = [], []
        if record:
            ovt = exu.OutputVariableType
            for name, b in parts.items():
                node = mbs.GetObject(body[name])["nodeNumber"]
                self.nodes.append((b.mass, np.asarray(b.inertia)))
                self.sensors.append([mbs.AddSensor(SensorNode(nodeNumber=node, storeInternal=True, writeToFile=False,
                                                              outputVariableType=getattr(ovt, k)))
                                     for k in ("Position", "Velocity", "AngularVelocityLocal")])
            self.b0 = mbs.AddSensor(SensorBody(bodyNumber=body["crank0"], localPosition=[0.5 * L, 0, 0],
                                               storeInternal=True, writeToFile=False, outputVariableType=ovt.Position))
        mbs.Assemble()
        self.setup = time.perf_counter() - tic
        self.unknowns = mbs.systemData.SystemSize()
        self.solver = "EigenDense" if redundant else "EigenSparse"

    def solve(self, dt, t_end):
        return solve_fixed_step(self.exu, self.mbs, "generalized-α", dt, t_end, RHO, self.sensors,
                                linear_solver=self.solver)

    def recorded(self):
        """θ of crank 0 and the total energy at every step of the last solve."""
        E = 0.0
        for (m, J), sensors in zip(self.nodes, self.sensors):
            x, v, w = (np.asarray(self.mbs.GetSensorStoredData(s))[:, 1:] for s in sensors)
            E = E + 0.5 * m * np.sum(v**2, axis=1) + 0.5 * np.einsum("ni,ij,nj->n", w, J, w) + m * G * x[:, 1]
        b0 = np.asarray(self.mbs.GetSensorStoredData(self.b0))[:, 1:]
        return crank_angle(b0), E


def time_exudyn(exu, n, n_steps, dt, redundant):
    model = ExudynFourBars(exu, n, redundant)
    r = model.solve(dt, n_steps * dt)
    return {"per_step": r["wall"] / r["steps"], "setup": model.setup, "unknowns": model.unknowns,
            "newton": r["newton"], "jacobians": r["jacobians"]}


def check_exudyn(exu, n, dt, redundant):
    model = ExudynFourBars(exu, n, redundant, record=True)
    model.solve(dt, CHECK_T)
    theta, E = model.recorded()
    return {"theta": theta[-1], "drift": energy_error(E), "E0": float(E[0])}


# ---------------------------------------------------------------- measuring
EXUDYN_KEYS = {"Exudyn GA": True, "Exudyn GA, non-redundant, sparse": False}


def measure(n, args, exu):
    """Every method on N loops, once per round in ``args.repeats`` rounds (best kept)."""
    tic = time.perf_counter()
    assembly = four_bars(n).assemble()
    row = {"N": n, "assemble": time.perf_counter() - tic, "dof": assembly.degrees_of_freedom,
           "steps": steps(n), "failed": {}}
    keys = ["conserve"] + ([k for k, red in EXUDYN_KEYS.items() if red or not args.no_sparse] if exu else [])
    for _ in range(args.repeats):
        for key in keys:
            if key in row["failed"]:
                continue
            if key == "conserve":
                r = run_conserve(assembly, steps(n), args.dt, row["conserve"]["compile"] if key in row else None)
            else:
                try:
                    r = time_exudyn(exu, n, steps(n), args.dt, EXUDYN_KEYS[key])
                except (RuntimeError, SystemError) as e:  # Exudyn raises its SolverError as a RuntimeError
                    r = {"failed": str(e).splitlines()[0]}
            if "failed" in r:
                row["failed"][key] = r
            elif key not in row or r["per_step"] < row[key]["per_step"]:
                row[key] = r
    for key in keys:
        if key in row:
            r = row[key]
            extra = (f"compile {r['compile']:.1f} s, energy {r['drift']:.1e}, {r['matrix']}" if key == "conserve"
                     else f"setup {1e3 * r['setup']:.1f} ms")
            print(f"N = {n:2d} {key:32s}: {1e6 * r['per_step']:10.0f} µs/step, {r['unknowns']} unknowns, {extra}",
                  flush=True)
        else:
            print(f"N = {n:2d} {key:32s}: failed: {row['failed'][key]['failed']}", flush=True)
    return row


def check(n, args, exu):
    """The 1 s run through the singular position: θ(1 s), E0 and energy error of each code."""
    theta, E0 = exact(n)
    out = {"N": n, "exact": float(theta(CHECK_T)), "E0 exact": E0}
    n_steps = round(CHECK_T / args.check_dt)
    assembly = four_bars(n).assemble()
    cs.simulate(assembly, args.check_dt, args.check_dt, compile=COMPILE)
    r = run_conserve(assembly, n_steps, args.check_dt, compiled=0.0)
    out["conserve"] = r if "failed" in r else {"theta": r["theta"][-1], "drift": r["drift"], "E0": r["E0"]}
    for key, redundant in EXUDYN_KEYS.items() if exu else ():
        if redundant or not args.no_sparse:
            try:
                out[key] = check_exudyn(exu, n, args.check_dt, redundant)
            except (RuntimeError, SystemError) as e:
                out[key] = {"failed": str(e).splitlines()[0]}
    print(f"check N = {n}: " + ", ".join(f"{k} θ(1) = {v['theta']:.6f}" if "theta" in v else f"{k} failed"
                                         for k, v in out.items() if isinstance(v, dict)), flush=True)
    return out


# ---------------------------------------------------------------- report
def slope(rows, key):
    """The log–log slope of ``key``'s time per step against N over SLOPE_RANGE (None: too few sizes)."""
    return loglog_slope(rows, key, SLOPE_RANGE)


def header(exu, args):
    import jax
    return ["# N-four-bar mechanism (IFToMM A02): conserve vs Exudyn", "",
            f"`taskset -c 0 python benchmarks/four_bars.py --sizes {' '.join(map(str, args.sizes))}` — Δt = "
            f"{args.dt:g} s, pinned to CPU {sorted(os.sched_getaffinity(0))}. {cpu_name()}, "
            f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d', time.gmtime())}, load average at start "
            f"{os.getloadavg()[0]:.2f} (1 min); conserve "
            f"{cs.__version__}, jax {jax.__version__}, Exudyn {exu.__version__ if exu else 'not installed'}.", "",
            "N loops of 1 m, 1 kg slender bars (2N + 1 links, 3N + 1 revolute joints about e3, 3N redundant "
            "constraint rows), gravity 9.81 along −y, B0 starting at 1 m/s along +x from the upright position. "
            f"conserve: director backend, compile='{COMPILE}', redundant rows dropped at assembly. Exudyn GA: "
            f"generalized-α ρ∞ = {RHO:g}, the same 3-D bodies and revolute joints, redundant rows kept "
            "(EigenDense with ignoreSingularJacobian); non-redundant, sparse: each loop closed by a joint "
            "constraining x, y only (EigenSparse). Time per step: a run of steps(N) = clip(2000/N, 10, 200) "
            f"steps from the start, every method once per round, best of {args.repeats} rounds. "
            "Details in the docstring.", ""]


def timing_table(rows, keys):
    lines = ["## Time per step", "",
             "| N | links | conserve unknowns | steps timed | conserve µs/step | "
             + " | ".join(f"{k} µs/step" for k in keys[1:]) + " | "
             + " | ".join(f"conserve ÷ {k}" for k in keys[1:]) + " | conserve Newton it./step | conserve energy error "
             "| assemble / compile [s] | Exudyn unknowns | Exudyn setup [ms] |",
             "|" + "---|" * (10 + 2 * len(keys[1:]))]
    for r in rows:
        c = r.get("conserve")
        cells = [f"{1e6 * r[k]['per_step']:.0f}" if k in r else "failed" if k in r["failed"] else "—" for k in keys]
        ratios = [f"**{c['per_step'] / r[k]['per_step']:.2g}**" if c and k in r else "—" for k in keys[1:]]
        ex = next((r[k] for k in keys[1:] if k in r), None)
        lines.append(f"| {r['N']} | {2 * r['N'] + 1} | {c['unknowns'] if c else '—'} | {r['steps']} | "
                     + " | ".join(cells) + " | " + " | ".join(ratios) + " | "
                     + (f"{c['newton']:.1f} | {c['drift']:.1e} | {r['assemble']:.1f} / {c['compile']:.1f} | "
                        if c else "— | — | — | ")
                     + (f"{ex['unknowns']} | {1e3 * ex['setup']:.0f} |" if ex else "— | — |"))
    return lines + [""]


def check_table(checks, keys):
    if not checks:
        return []
    lines = ["## Same problem? The crank angle after 1 s", "",
             "θ = angle of crank 0 from +x (exact: the one-angle equation by DOP853, rtol 1e-13); from θ = π/2 the "
             "mechanism passes the singular horizontal position θ = 0 within the first second. Δt of these runs "
             "in the header of the table; energy error = max |E − E0|/|E0| over the 1 s run.", "",
             "| N | Δt | θ(1 s) exact [rad] | " + " | ".join(f"{k} θ − exact" for k in keys) + " | E0 exact [J] | "
             + " | ".join(f"{k} E0 rel. diff." for k in keys) + " | "
             + " | ".join(f"{k} energy error" for k in keys) + " |", "|" + "---|" * (4 + 3 * len(keys))]
    for c in checks:
        def cell(k, f):
            v = c.get(k)
            return "—" if v is None else "failed" if "failed" in v else f(v)
        lines.append(f"| {c['N']} | {c['dt']:g} | {c['exact']:.9f} | "
                     + " | ".join(cell(k, lambda v: f"{v['theta'] - c['exact']:.1e}") for k in keys) + " | "
                     + f"{c['E0 exact']:.12g} | "
                     + " | ".join(cell(k, lambda v: f"{abs(v['E0'] - c['E0 exact']) / c['E0 exact']:.1e}")
                                  for k in keys)
                     + " | " + " | ".join(cell(k, lambda v: f"{v['drift']:.1e}") for k in keys) + " |")
    fails = [(c["N"], k, c[k]["failed"]) for c in checks for k in keys if "failed" in c.get(k, {})]
    lines += [""] + [f"- N = {n}, {k}: {f}" for n, k, f in fails] + ([""] if fails else [])
    return lines


def targets_section(rows, checks, keys):
    by_n = {r["N"]: r for r in rows}
    s = slope(rows, "conserve")
    lines = ["## Scaling and the issue's targets", ""]
    lines.append(f"- log–log slope of conserve's µs/step against N over N = {SLOPE_RANGE[0]}…{SLOPE_RANGE[1]} "
                 "(least squares over the sizes run): "
                 + (f"**{s:.2f}** (target ≤ {TARGET_SLOPE:g}: {'met' if s <= TARGET_SLOPE else 'not met'})"
                    if s is not None else "not measured (needs ≥ 2 sizes in the range)") + ".")
    for k in keys[1:]:
        if (sk := slope(rows, k)) is not None:
            lines.append(f"- the same slope for {k}: {sk:.2f}.")
    r = by_n.get(TARGET_N, {})
    if "conserve" in r and "Exudyn GA" in r:
        q = r["conserve"]["per_step"] / r["Exudyn GA"]["per_step"]
        lines.append(f"- N = {TARGET_N}: conserve ÷ Exudyn GA per step **{q:.2f}×** (target ≤ {TARGET_RATIO:g}: "
                     f"{'met' if q <= TARGET_RATIO else 'not met'}).")
    drifts = [(r["N"], r["conserve"]["drift"]) for r in rows if "conserve" in r]
    drifts += [(c["N"], c["conserve"]["drift"]) for c in checks if "drift" in c.get("conserve", {})]
    if drifts:
        worst = max(d for _, d in drifts)
        lines.append(f"- conserve's energy error, every timed and check run: ≤ {worst:.1e} "
                     f"(must be ≤ {ENERGY_LIMIT:g}: "
                     f"{'met' if worst <= ENERGY_LIMIT else 'NOT met'}).")
    return lines + [""]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8, 16, 32, 40, 64])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over every method per N (best kept)")
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--check-sizes", type=int, nargs="*", default=[2, 8, 40],
                        help="sizes of the 1 s same-problem check (none: skip it)")
    parser.add_argument("--check-dt", type=float, default=2e-3)
    parser.add_argument("--no-sparse", action="store_true", help="skip Exudyn's non-redundant sparse model")
    args = parser.parse_args(argv)
    pin_to_core0()
    exu = import_exudyn()
    t_start = time.perf_counter()
    lines = header(exu, args)
    keys = ["conserve"] + ([k for k, red in EXUDYN_KEYS.items() if red or not args.no_sparse] if exu else [])
    rows = [measure(n, args, exu) for n in args.sizes]
    checks = []
    for n in args.check_sizes:
        checks.append({**check(n, args, exu), "dt": args.check_dt})
    lines += timing_table(rows, keys) + check_table(checks, keys) + targets_section(rows, checks, keys)
    if exu is None:
        lines += ["Exudyn not installed (pip install -e '.[bench]'): no comparison.", ""]
    failed = [(r["N"], k, f["failed"]) for r in rows for k, f in r["failed"].items()]
    if failed:
        lines += ["## Failures", ""] + [f"- N = {n}, {k}: {f}" for n, k, f in failed] + [""]
    write_report(OUT, lines, t_start)


if __name__ == "__main__":
    main()
