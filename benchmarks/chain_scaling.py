"""Benchmark: an N-link spatial pendulum chain (N = 2, 4, 8, 16, 32, 64) with conserve's director
backend (as ``simulate`` runs it: its Newton matrix eliminated along the chain, its factors
carried across steps), the same with a new Newton matrix every step ("fresh", ``reuse=False``) and
with a dense Newton matrix, the reduced and ode backends, and Exudyn (generalized-α and trapezoidal index
2) in the same run: time per step, compile / setup time and energy error against N.

    taskset -c 0 python benchmarks/chain_scaling.py [--sizes 2 4 8 16 32 64] [--steps 200] [--repeats 3]
                                                    [--reduced-max N] [--dense-max 32] [--no-check]

Writes benchmarks/results/chain_scaling.md and chain_scaling.png. The script pins itself to CPU 0 at
start (os.sched_setaffinity, every thread of the process), so every timing is single-core.

The chain: N slender bars of length 0.5 m and 1 kg joined by spherical joints, the first to the
ground at the origin, hanging tilted and spinning about the vertical (a fully spatial motion),
gravity; Δt = 1e-3 s, ``--steps`` steps.

* conserve (compiled ``compile="optimized"``, XLA's faster code; "quick", which simulate's default
  "auto" takes for long runs, compiles in about half the time, benchmarks/results/compile_times.md):
  compile time from a first one-step call; time per step = ``sol.stats['time_per_step']``
  of the following ``--steps`` runs, best of ``--repeats`` (3). The ode backend (DOP853, rtol
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
  and ``mbs.Assemble``; time per step = the ``mbs.SolveDynamic`` call / steps, best of 3 (a new
  model each).

Energy error: max |E − E0|/|E0| over the ``--steps`` run (Exudyn: from node sensors at every step,
E = Σ m v·v/2 + ω_bodyᵀ J ω_body/2 − m g·x). Same problem: E0 of each code per N, the tip of the
last bar against conserve's at Δt = 1e-3 for every N, and at N = 4 over 0.5 s for Δt = 1e-3 and
1e-4 (the Exudyn − conserve difference must shrink like Δt² if both solve the same equations).
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

from _peers import import_exudyn, pin_to_core0, solve_fixed_step  # noqa: E402

OUT = Path(__file__).parent / "results"
BACKENDS = ("director", "fresh", "dense", "reduced", "ode")
#: "fresh": the director backend forming a new Newton matrix every step (no factors carried across
#: steps: the elimination's own cost, independent of how long carried factors fit the motion);
#: "dense": with its dense Newton matrix (jacfwd + LU), the structure-blind baseline
BACKEND_OBJECTS = {"fresh": cs.backends.Director(reuse=False), "dense": cs.backends.Director(linear="dense")}
SOLVERS = ("generalized-α", "trapezoidal")
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


def run_exudyn(exu, n, solver, steps, dt=DT):
    best = None
    for _ in range(3):
        model = ExudynChain(exu, n)
        r = model.solve(solver, dt, steps * dt)
        if best is None or r["wall"] < best[1]["wall"]:
            best = (model, r)
    model, r = best
    rec = ExudynChain(exu, n, record=True)  # the same run again, recorded: energy and tip trajectory
    rec.solve(solver, dt, steps * dt)
    t, tip, E = rec.recorded()
    return {"per_step": r["wall"] / r["steps"], "setup": model.setup, "unknowns": model.unknowns,
            "newton": r["newton"], "jacobians": r["jacobians"], "drift": energy_error(E), "E0": float(E[0]),
            "t": t, "tip": tip}


def tip_distance(a, b, n):
    """max over steps of ‖a − b‖ / (N L) for two tip trajectories at the same times."""
    if a["t"].shape != b["t"].shape or not np.allclose(a["t"], b["t"]):
        raise RuntimeError("output times differ")
    return float(np.max(np.linalg.norm(a["tip"] - b["tip"], axis=1)) / (n * LENGTH))


def small_dt_check(exu):
    """Tip of the CHECK_N-link chain over CHECK_T s: Exudyn − conserve director for each dt in CHECK_DTS."""
    assembly = chain(CHECK_N).assemble()
    out = {}
    for dt in CHECK_DTS:
        steps = int(round(CHECK_T / dt))
        c = run_conserve(assembly, CHECK_N, "director", steps, dt)
        out[dt] = [tip_distance(run_exudyn_recorded(exu, CHECK_N, s, steps, dt), c, CHECK_N) for s in SOLVERS]
    return out


def run_exudyn_recorded(exu, n, solver, steps, dt):
    model = ExudynChain(exu, n, record=True)
    model.solve(solver, dt, steps * dt)
    t, tip, _ = model.recorded()
    return {"t": t, "tip": tip}


# ---------------------------------------------------------------- report
def slope(rows, key):
    pts = [(r["N"], r[key]["per_step"]) for r in rows if SLOPE_RANGE[0] <= r["N"] <= SLOPE_RANGE[1] and key in r]
    if len(pts) < 2:
        return None
    n, t = np.log(np.array(pts)).T
    return float(np.polyfit(n, t, 1)[0])


def cell(r, key, fmt, scale=1.0):
    failed = r.get("failed", {}).get(key[0])
    if failed is not None:
        return fmt.format(scale * failed[key[1]]) if key[1] in failed else "failed"
    return fmt.format(scale * r[key[0]][key[1]]) if key[0] in r else "—"


def header(exu, args):
    import jax
    cpu = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
           if ln.startswith("model name")]
    skipped = (f" The reduced backend is skipped above N = {args.reduced_max} (`--reduced-max`): its compile time "
               "grows steeply with N." if args.reduced_max is not None and max(args.sizes) > args.reduced_max else "")
    return ["# Chain scaling: conserve (director, fresh director, dense director, reduced, ode) vs Exudyn", "",
            f"`taskset -c 0 python benchmarks/chain_scaling.py --sizes {' '.join(map(str, args.sizes))}` — "
            f"{args.steps} steps of Δt = {DT:g} s, same process, pinned to CPU {sorted(os.sched_getaffinity(0))}. "
            f"{cpu[0] if cpu else 'CPU unknown'}, {os.cpu_count()} cores, load average at start "
            f"{os.getloadavg()[0]:.2f} (1 min); conserve {cs.__version__}, jax {jax.__version__}, "
            f"Exudyn {exu.__version__ if exu else 'not installed'}.", "",
            f"conserve (compile='{COMPILE}'): compile time from a first one-step call, then best of {args.repeats} timed runs. "
            "ode = solve_ivp(DOP853, "
            "rtol 1e-10) with output every Δt (same nodes, not the same accuracy). Exudyn: one Euler-parameter "
            f"rigid body per bar, CreateSphericalJoint, generalized-α ρ∞ = {RHO:g} (GA) and trapezoidal index 2 "
            "(TR), default modified Newton, 1 thread, no output in timed runs; setup = model build + Assemble; "
            f"best of 3. Energy error = max |E − E0|/|E0| over the {args.steps} steps. Details in the docstring."
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
                       ("reduced", "conserve reduced (structured form)"), ("generalized-α", "Exudyn generalized-α")):
        if (s_key := slope(rows, key)) is not None:
            lines.append(f"- the same slope for {label}: {s_key:.2f}.")
    lines += [f"- 32-link chain, director: **{d32}** (target ≤ 1 ms/step).",
              f"- reduced compile at N = 64: {r64} with compile='{COMPILE}' (target ≤ 5 s; every code generation: "
              "benchmarks/results/compile_times.md)."]
    if ga:
        lines.append("- director ÷ Exudyn GA per N: " + ", ".join(f"N = {n}: {q:.2g}" for n, q in ga) + ".")
    return lines + [""]


def same_problem_section(rows, check):
    lines = ["## Same problem?", "",
             "Initial energy E0 of each code and the tip of the last bar over the timed runs (Δt = 1e-3): "
             "max over steps of ‖x_tip − x_tip,director‖ / (N L).", "",
             "| N | E0 director [J] | max relative E0 difference (reduced, ode, GA, TR) | tip GA − director "
             "| tip TR − director | tip reduced − director |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "director" not in r:
            continue
        E0 = r["director"]["E0"]
        others = [k for k in ("reduced", "ode", *SOLVERS) if k in r]
        dE0 = max(abs(r[k]["E0"] - E0) for k in others) / abs(E0)
        tips = [f"{tip_distance(r[k], r['director'], r['N']):.1e}" if k in r else "—" for k in (*SOLVERS, "reduced")]
        lines.append(f"| {r['N']} | {E0:.12g} | {dE0:.1e} | " + " | ".join(tips) + " |")
    if check:
        lines += ["", f"Small Δt: the {CHECK_N}-link chain over {CHECK_T:g} s, tip of Exudyn − tip of conserve "
                  "director (max over steps, / (N L)):", "", "| Δt | GA − director | TR − director |", "|---|---|---|"]
        lines += [f"| {dt:g} | {d[0]:.1e} | {d[1]:.1e} |" for dt, d in check.items()]
        big, small = max(check), min(check)
        shrink = [a / b for a, b in zip(check[big], check[small])]
        lines += ["", f"From Δt = {big:g} to {small:g} the difference shrinks {shrink[0]:.0f}× (GA) and "
                  f"{shrink[1]:.0f}× (TR); second order in both codes would give {(big / small) ** 2:.0f}×."]
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
    series += [("generalized-α", f"Exudyn GA ρ∞={RHO:g}", "D-"), ("trapezoidal", "Exudyn TR index 2", "v-")]
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="timed conserve runs per backend and N (best kept)")
    parser.add_argument("--reduced-max", type=int, default=None, help="skip the reduced backend above this N")
    parser.add_argument("--dense-max", type=int, default=32, help="skip the dense director above this N")
    parser.add_argument("--no-check", action="store_true", help="skip the small-Δt same-problem check")
    args = parser.parse_args(argv)
    pin_to_core0()
    exu = import_exudyn()
    t_start = time.perf_counter()
    lines = header(exu, args)
    rows = []
    for n in args.sizes:
        assembly = chain(n).assemble()
        row = {"N": n, "dof": assembly.degrees_of_freedom}
        for b in BACKENDS:
            if b == "reduced" and args.reduced_max is not None and n > args.reduced_max:
                continue
            if b == "dense" and n > args.dense_max:
                continue
            r = run_conserve(assembly, n, b, args.steps, repeats=args.repeats)
            if "failed" in r:
                row.setdefault("failed", {})[b] = r
                print(f"N = {n:2d} {b:13s}: compile {r['compile']:5.1f} s, {r['failed']}", flush=True)
                continue
            row[b] = r
            print(f"N = {n:2d} {b:13s}: {1e6 * r['per_step']:9.0f} µs/step, compile {r['compile']:5.1f} s, "
                  f"{r['unknowns']} unknowns, energy {r['drift']:.1e}", flush=True)
        for s in SOLVERS if exu is not None else ():
            try:
                row[s] = r = run_exudyn(exu, n, s, args.steps)
            except RuntimeError as e:
                row.setdefault("failed", {})[s] = {"failed": str(e)}
                print(f"N = {n:2d} {s:13s}: {e}", flush=True)
                continue
            print(f"N = {n:2d} {s:13s}: {1e6 * r['per_step']:9.0f} µs/step, setup {1e3 * r['setup']:5.1f} ms, "
                  f"{r['unknowns']} unknowns, energy {r['drift']:.1e}", flush=True)
        rows.append(row)
    check = small_dt_check(exu) if exu is not None and not args.no_check else None

    OUT.mkdir(exist_ok=True)
    plot(rows)
    lines += conserve_table(rows)
    if exu is None:
        lines += ["Exudyn not installed (pip install -e '.[bench]'): no comparison.", ""]
    else:
        lines += comparison_table(rows) + same_problem_section(rows, check)
    lines += targets_section(rows) + failures_section(rows)
    lines += ["![chain scaling](chain_scaling.png)", "", f"Benchmark wall time: {time.perf_counter() - t_start:.0f} s; "
              f"load average at the end {os.getloadavg()[0]:.2f} (1 min)."]
    (OUT / "chain_scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {OUT / 'chain_scaling.md'}, {OUT / 'chain_scaling.png'}")


if __name__ == "__main__":
    main()
