"""Benchmark: geometrically exact beams (``cs.Beam``) against Exudyn 1.13.6's beam element
(``ObjectBeamGeometricallyExact``, generalized-α), in the same run on the same core: cost against the
number of elements, energy and angular momentum of a free beam, and the cost of each code at equal
accuracy.

    taskset -c 0 python benchmarks/beams.py [--sizes 10 20 50 100 200] [--steps 200] [--repeats 3]
                                            [--free-t-end 60] [--free-dts 0.1 0.05]
                                            [--T 10] [--elements 4 8 16 32 64] [--dts 0.1 0.05 0.025 0.01]
                                            [--reference-elements 64 128] [--reference-dt 0.005]
                                            [--rounds 2] [--quick]

Writes benchmarks/results/beams.md and beams_conservation.png (``--quick``: small sizes and grid,
about a minute, prints only). The script pins itself to CPU 0 at
start (``_peers.pin_to_core0``: every thread, and every loaded OpenBLAS to one thread) and runs with
the persistent compilation cache off (``_peers``), so compile times are those of a first run.
Exudyn's side of every problem is ``benchmarks/_exudyn_beams.py`` (its docstring: problem data,
where they come from, Exudyn's settings, how its energy and momentum are computed); without Exudyn
the conserve columns are still measured.

conserve: director backend, ``compile="optimized"`` (XLA's faster code, as the other scaling
benchmarks), Newton's default tolerance. Its beam nodes are rigid bodies with lumped mass;
Exudyn's element has a consistent mass matrix. Both discretizations converge to the same rod at
second order in the element length, so per-step costs at equal element counts compare the same
mesh, not the same accuracy; part 3 compares accuracy.

1. **Scaling.** The free-flying beam (below) with ``--sizes`` elements, Δt = 0.05 s, a run of
   ``--steps`` (200: 10 s, the load pulse and 5 s of free flight). Per size: ``assemble()``; the
   first run (its ``sol.stats["compile_time"]``, and the rest of its wall time beyond compilation
   and the steps: finding the Newton matrix's structure, the Solution); every run timed by
   ``sol.stats["time_per_step"]`` (no compilation), best of ``--repeats`` rounds over all sizes
   (the first runs the first), Exudyn's ``free_beam`` (no energy post-processing) in the same rounds. A first run
   of the timed length, not of one step: the nodes' diagnostics of a longer run compile on first
   use (0.3 s at 10 elements, 0.75 s at 100), and count as compilation. Reported: µs per step, the
   least-squares log–log slope of µs per step against elements, Newton iterations per step, the
   Newton matrix's solver (``sol.stats["newton_matrix"]``), compile time and the other first-call
   costs per size. (A clamped straight cantilever was tried first; see the result file's notes.)
2. **Conservation.** The free-flying beam ("flying spaghetti", Simo & Vu-Quoc 1988): L = 10 m from
   (6, 0, 0) to (0, 0, 8), EA = GA = 1e4 N, EI = GJ = 500 N m², ρA = 1 kg/m, ρI = 10 kg m about
   each section axis (20 polar), 10 elements; dead force p(t) (20, 0, 0) N and moment
   p(t) (0, 200, 100) N m at (6, 0, 0), p the hat 0 → 1 → 0 on [0, 5] s (as examples/flying_beam.py).
   Δt = ``--free-dts`` to ``--free-t-end``; energy E and angular momentum L about the origin
   after the load (t ≥ 5 s): max |E − E(5)| / E(5) and max |L − L(5)| / |L(5)|, conserve's from
   the Solution, Exudyn's (generalized-α, ρ∞ = 0.8) from its own mass matrix and strain energy
   (``_exudyn_beams``). Time per step: best of two runs each.
3. **Equal accuracy.** Simo & Vu-Quoc's right-angle cantilever (``_exudyn_beams``: legs of 10 m
   from the clamp (0, 10, 0) to the elbow (10, 10, 0) and the tip (10, 0, 0), EA = GA = 1e6 N,
   EI = GJ = 1e3 N m², ρA = 1 kg/m, ρI = 10 kg m; out-of-plane dead force 50 q(t) N at the elbow, q
   the hat on [0, 2] s), to t = ``--T`` (10 s: the load and 8 s of free vibration; the 30 s of the
   literature would triple every cost). Both codes model it alike: two straight beams, the first
   clamped, the elbow a rigid joint between the legs' end nodes (conserve: ``cs.Fixed``; Exudyn: a
   generic joint). Every (elements per leg, Δt) of ``--elements`` × ``--dts`` in each code, every
   setting once per round, best of ``--rounds`` rounds. Reference: conserve at
   ``--reference-elements`` (64 and 128 per leg) and Δt = ``--reference-dt``, extrapolated in the
   element length (Richardson, second order) at every sample time; Exudyn's fine runs extrapolated
   alike check it. Tip error of a run: at T, ‖u(T) − u_ref(T)‖ / ‖u_ref(T)‖; and over the run,
   max_k ‖u(t_k) − u_ref(t_k)‖ / max_k ‖u_ref(t_k)‖, t_k every ``max(--dts)`` s (a run whose
   spatial and temporal errors happen to cancel at T does not look accurate over the run). Cost
   at a target error: the whole run's time (conserve ``sol.stats["run_time"]``, Exudyn the
   ``SolveDynamic`` call), log–log interpolated along each code's cheapest-for-its-error front of
   the grid between the two settings that bracket the target; also with conserve's first-call
   costs (compilation, structure) and Exudyn's setup added. Ratios conserve ÷ Exudyn.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402

import _exudyn_beams as xb  # noqa: E402
from _peers import cpu_name, git_commit, import_exudyn, loglog_slope, pin_to_core0, write_report  # noqa: E402

OUT = Path(__file__).parent / "results"
COMPILE = "optimized"
RHO = 0.8  # Exudyn generalized-α spectral radius at infinity
SCALING_DT = 0.05
FREE_ELEMENTS = 10
FREE_LOAD_END = 2 * xb.FREE_BEAM_RAMP  # s
TARGETS = (1e-2, 1e-3)
#: targets of the task: slope of µs/step against elements, compile time flat in elements
SLOPE_TARGET = 1.1
#: "flat": compile time at the largest size at most this factor times the smallest size's
FLAT_FACTOR = 1.5


def section(data):
    """A cs.Section of ``_exudyn_beams``' section data (d1, d2, d3 axes; ρJ must be ρI1 + ρI2, as
    conserve takes it)."""
    if abs(data["rhoJ"] - data["rhoI1"] - data["rhoI2"]) > 1e-12 * data["rhoJ"]:
        raise ValueError("conserve's polar rotary inertia is rhoI1 + rhoI2")
    return cs.Section(EA=data["EA"], GA=(data["GA1"], data["GA2"]), GJ=data["GJ"], EI=(data["EI1"], data["EI2"]),
                      rhoA=data["rhoA"], rhoI=(data["rhoI1"], data["rhoI2"]))


def hat(t, ramp):
    """0 → 1 on [0, ramp], 1 → 0 on [ramp, 2 ramp], then 0 (jax)."""
    return jnp.clip(jnp.minimum(t / ramp, 2.0 - t / ramp), 0.0, None)


def flying_beam(n):
    """(System, Beam): the free-flying beam of ``_exudyn_beams.free_beam`` with n elements."""
    beam = cs.Beam("beam", section(xb.FREE_BEAM_SECTION), [xb.FREE_BEAM_A, xb.FREE_BEAM_B], elements=n,
                   normal=(0.0, 1.0, 0.0))
    F, M = jnp.asarray(xb.FREE_BEAM_FORCE), jnp.asarray(xb.FREE_BEAM_MOMENT)
    load = cs.Force(beam.start, force=lambda t, s: hat(t, xb.FREE_BEAM_RAMP) * F,
                    torque=lambda t, s: hat(t, xb.FREE_BEAM_RAMP) * M)
    return cs.System([beam, load]), beam


def right_angle(n):
    """(System, tip node): the right-angle cantilever of ``_exudyn_beams.right_angle_cantilever``, n
    elements per leg, the legs two beams joined rigidly at the elbow."""
    s = section(xb.RIGHT_ANGLE_SECTION)
    normal = (0.0, 0.0, 1.0)
    leg1 = cs.Beam("leg1", s, [xb.RIGHT_ANGLE_CLAMP, xb.RIGHT_ANGLE_ELBOW], elements=n, normal=normal)
    leg2 = cs.Beam("leg2", s, [xb.RIGHT_ANGLE_ELBOW, xb.RIGHT_ANGLE_TIP], elements=n, normal=normal)
    peak = jnp.asarray(xb.RIGHT_ANGLE_FORCE)
    load = cs.Force(leg1.end, force=lambda t, st: hat(t, xb.RIGHT_ANGLE_RAMP) * peak)
    return cs.System([leg1, leg2, cs.Fixed(leg1.start, cs.ground, at=xb.RIGHT_ANGLE_CLAMP),
                      cs.Fixed(leg1.end, leg2.start, at=xb.RIGHT_ANGLE_ELBOW), load]), leg2.end


def first_call(assembly, t_end, dt):
    """The first run of a model (compiles): (compile time s, the rest of the call's wall time beyond
    compilation and the steps s, the Solution). A run of the length later timed, not one step: the
    nodes' diagnostics of a longer run are compiled on its first use, and count as compilation."""
    tic = time.perf_counter()
    sol = cs.simulate(assembly, t_end, dt, compile=COMPILE)
    wall = time.perf_counter() - tic
    return sol.stats["compile_time"], wall - sol.stats["compile_time"] - sol.stats["run_time"], sol


def steps_of(t_end, dt):
    n = int(round(t_end / dt))
    if abs(n * dt - t_end) > 1e-9 * t_end:
        raise ValueError(f"t_end = {t_end:g} s is not a whole number of steps of {dt:g} s")
    return n


# ---------------------------------------------------------------- 1. scaling
def scaling(args, exu):
    """One row per size: the first run of each size (compiles), then ``--repeats`` − 1 rounds over all
    sizes (a busy minute of a shared machine then slows every size a little, not one size much);
    Exudyn once per round and size, beside conserve's run."""
    rows, assemblies = [], {}
    t_end = args.steps * SCALING_DT

    def timed(row, sol):
        if "conserve" not in row or sol.stats["time_per_step"] < row["conserve"]["per_step"]:
            row["conserve"] = {"per_step": sol.stats["time_per_step"], "sol": sol}
        if exu is None or "exudyn failed" in row:
            return
        try:
            r = xb.free_beam(SCALING_DT, t_end, row["N"], RHO, energies=False)
        except RuntimeError as e:
            row["exudyn failed"] = str(e)
            return
        if "exudyn" not in row or r["wall_run"] / r["steps"] < row["exudyn"]["per_step"]:
            row["exudyn"] = {"per_step": r["wall_run"] / r["steps"], "newton": r["newton_per_step"],
                             "jacobians": r["jacobians_per_step"], "setup": r["wall_setup"]}

    for n in args.sizes:
        tic = time.perf_counter()
        system, beam = flying_beam(n)
        assemblies[n] = system.assemble()
        row = {"N": n, "assemble": time.perf_counter() - tic, "recompiled": 0.0}
        row["compile"], row["first_other"], sol = first_call(assemblies[n], t_end, SCALING_DT)
        timed(row, sol)  # the first call's run is the first round's
        rows.append(row)
        print(f"scaling N = {n:3d}: compile {row['compile']:.1f} s, first-call rest {row['first_other']:.1f} s, "
              f"assemble {row['assemble']:.1f} s", flush=True)
    for _ in range(args.repeats - 1):
        for row in rows:
            sol = cs.simulate(assemblies[row["N"]], t_end, SCALING_DT, compile=COMPILE)
            row["recompiled"] = max(row["recompiled"], sol.stats["compile_time"])
            timed(row, sol)
    for row in rows:
        sol = row["conserve"].pop("sol")
        t, E = np.asarray(sol.t), np.asarray(sol.energy.total)
        free = t >= FREE_LOAD_END - 1e-9
        row["conserve"].update(newton=float(np.mean(sol.newton_iterations)), matrix=sol.stats["newton_matrix"],
                               unknowns=sol.stats["unknowns"], mode=sol.stats["compile"],
                               drift=float(np.max(np.abs(E[free] - E[free][0])) / E[free][0]) if free.any() else None)
        c = row["conserve"]
        ex = (f"; Exudyn {1e6 * row['exudyn']['per_step']:.0f} µs/step" if "exudyn" in row
              else f"; Exudyn {row.get('exudyn failed', 'not run')}")
        print(f"scaling N = {row['N']:3d}: {1e6 * c['per_step']:7.0f} µs/step, {c['newton']:.2f} Newton it./step, "
              f"matrix '{c['matrix']}'" + ex, flush=True)
    return rows


def scaling_section(rows, args):
    sizes = (min(args.sizes), max(args.sizes))
    slope = loglog_slope(rows, "conserve", sizes)
    slope_ex = loglog_slope(rows, "exudyn", sizes)
    compile_times = [r["compile"] for r in rows]
    n = np.log([r["N"] for r in rows])
    compile_slope = float(np.polyfit(n, np.log(compile_times), 1)[0]) if len(rows) > 1 else None
    lines = ["## 1. Cost against the number of elements (free-flying beam)", "",
             f"Δt = {SCALING_DT:g} s, {args.steps} steps ({args.steps * SCALING_DT:g} s: the load pulse and free "
             f"flight); best of {args.repeats} rounds over all sizes. conserve compiled with "
             f"`compile='{COMPILE}'`. *compile*: `sol.stats['compile_time']` of the first run (the first round's); "
             "*first call, rest*: that call's wall time beyond compilation and the steps (finding the Newton "
             "matrix's structure, building the Solution); *assemble*: `system.assemble()`. Energy error: "
             "max |E − E(5 s)| / E(5 s) after the load.", "",
             "| elements | unknowns | conserve µs/step | Exudyn GA µs/step | conserve ÷ Exudyn "
             "| conserve Newton it./step | Exudyn Newton it. / Jacobians per step | Newton matrix | compile [s] "
             "| first call, rest [s] | assemble [s] | conserve energy error |", "|" + "---|" * 12]
    for r in rows:
        c, e = r["conserve"], r.get("exudyn")
        ratio = f"**{c['per_step'] / e['per_step']:.2g}**" if e else "—"
        ex = f"{1e6 * e['per_step']:.0f}" if e else ("failed" if "exudyn failed" in r else "—")
        ex_it = f"{e['newton']:.1f} / {e['jacobians']:.2f}" if e else "—"
        drift = f"{c['drift']:.1e}" if c["drift"] is not None else "—"
        lines.append(f"| {r['N']} | {c['unknowns']} | {1e6 * c['per_step']:.0f} | {ex} | {ratio} | {c['newton']:.2f} | "
                     f"{ex_it} | {c['matrix']} | {r['compile']:.2f} | {r['first_other']:.2f} | {r['assemble']:.2f} | "
                     f"{drift} |")
    lines.append("")
    s_text = f"{slope:.3f}" if slope is not None else "not measured"
    lines.append(f"- log–log slope of conserve's µs per step against elements, {sizes[0]}…{sizes[1]} (least squares): "
                 f"**{s_text}** (target ≤ {SLOPE_TARGET:g}: "
                 + ("met" if slope is not None and slope <= SLOPE_TARGET else "not met") + ")"
                 + (f"; Exudyn's {slope_ex:.2f}." if slope_ex is not None else "."))
    if len(rows) >= 3:
        top = (rows[-3]["N"], rows[-1]["N"])
        per_element = ", ".join(f"{1e6 * r['conserve']['per_step'] / r['N']:.0f}" for r in rows)
        top_ex = loglog_slope(rows, "exudyn", top)
        lines.append(f"- over the largest sizes, {top[0]}…{top[1]}: {loglog_slope(rows, 'conserve', top):.2f}"
                     + (f" (Exudyn {top_ex:.2f})" if top_ex is not None else "")
                     + f"; conserve's µs per element-step at each size: {per_element}.")
    if compile_slope is not None:
        ratio = compile_times[-1] / compile_times[0]
        lines.append(f"- compile time {min(compile_times):.2f}–{max(compile_times):.2f} s; at {rows[-1]['N']} elements "
                     f"{ratio:.2f}× that at {rows[0]['N']}, log–log slope {compile_slope:.2f} (target: flat; taken "
                     f"here as ≤ {FLAT_FACTOR:g}× over the sizes: " + ("met" if ratio <= FLAT_FACTOR else "not met")
                     + ").")
        rest = [r["first_other"] + r["assemble"] for r in rows]
        lines.append(f"- but the first call's other costs grow: assemble + first call beyond compilation "
                     f"{rest[0]:.2f} s at {rows[0]['N']} elements, {rest[-1]:.2f} s at {rows[-1]['N']} (log–log slope "
                     f"{float(np.polyfit(n, np.log(rest), 1)[0]):.2f}).")
    recompiled = [r["N"] for r in rows if r.get("recompiled", 0.0) > 0.05]
    if recompiled:
        lines.append(f"- the timed runs compiled again at N = {recompiled} (their compile_time > 0.05 s).")
    return lines + [""]


# ---------------------------------------------------------------- 2. conservation
def conservation(args, exu):
    """{dt: {"conserve": {...}, "exudyn": {...}}} for the free beam of FREE_ELEMENTS elements."""
    assembly = flying_beam(FREE_ELEMENTS)[0].assemble()
    out = {}
    for dt in args.free_dts:
        steps_of(args.free_t_end, dt)
        runs = [cs.simulate(assembly, args.free_t_end, dt, compile=COMPILE) for _ in range(2)]
        sol = min(runs, key=lambda s: s.stats["run_time"])
        t, E, L = np.asarray(sol.t), np.asarray(sol.energy.total), np.asarray(sol.angular_momentum)
        c = first_integrals(t, E, L)
        c.update(per_step=sol.stats["time_per_step"], compile=runs[0].stats["compile_time"],
                 newton=float(np.mean(sol.newton_iterations)), balance=float(np.max(np.abs(sol.energy_balance_error))
                                                                        / np.max(np.abs(E))))
        out[dt] = {"conserve": c}
        line = (f"conservation Δt = {dt:g}: conserve E(5) = {c['E5']:.6g} J, max |ΔE|/E {c['dE']:.1e}, "
                f"max |ΔL|/|L| {c['dL']:.1e}, {1e6 * c['per_step']:.0f} µs/step")
        if exu is not None:
            try:
                r = xb.free_beam(dt, args.free_t_end, FREE_ELEMENTS, RHO)
                again = xb.free_beam(dt, args.free_t_end, FREE_ELEMENTS, RHO, energies=False)
                x = first_integrals(r["t"], r["energy"], r["angular_momentum"])
                x.update(per_step=min(r["wall_run"], again["wall_run"]) / r["steps"], newton=r["newton_per_step"],
                         jacobians=r["jacobians_per_step"])
                out[dt]["exudyn"] = x
                line += (f"; Exudyn E(5) = {x['E5']:.6g} J, max |ΔE|/E {x['dE']:.1e}, max |ΔL|/|L| {x['dL']:.1e}, "
                         f"{1e6 * x['per_step']:.0f} µs/step")
            except RuntimeError as e:
                out[dt]["exudyn failed"] = str(e)
                line += f"; Exudyn {e}"
        print(line, flush=True)
    return out


def free_check(exu, elements=(10, 40), dt=0.01):
    """Same problem? {elements: {code: (E(5 s) J, L(5 s) (3,))}} of both codes at a small step: the
    energy and momentum the load pulse leaves differ by the two meshes' errors, which shrink with them."""
    out = {}
    for n in elements:
        sol = cs.simulate(flying_beam(n)[0], FREE_LOAD_END, dt, compile="auto")
        out[n] = {"conserve": (float(np.asarray(sol.energy.total)[-1]), np.asarray(sol.angular_momentum)[-1])}
        if exu is not None:
            r = xb.free_beam(dt, FREE_LOAD_END, n, RHO)
            out[n]["exudyn"] = (float(r["energy"][-1]), np.asarray(r["angular_momentum"])[-1])
        text = ", ".join(f"{code} E(5) = {v[0]:.6g} J" for code, v in out[n].items())
        print(f"free beam, {n} elements, Δt = {dt:g}: {text}", flush=True)
    return {"dt": dt, "runs": out}


def first_integrals(t, E, L):
    """Energy and angular momentum after the load: the series from t = 5 s and their largest and final
    relative changes."""
    t, E, L = np.asarray(t), np.asarray(E), np.asarray(L)
    free = t >= FREE_LOAD_END - 1e-9
    t, E, L = t[free], E[free], L[free]
    dE = (E - E[0]) / E[0]
    dL = np.linalg.norm(L - L[0], axis=1) / np.linalg.norm(L[0])
    return {"t": t, "E": dE, "L": dL, "E5": float(E[0]), "L5": L[0], "dE": float(np.max(np.abs(dE))),
            "dE_end": float(dE[-1]), "dL": float(np.max(dL))}


def free_check_lines(check):
    runs = check["runs"]
    if not all("exudyn" in r for r in runs.values()):
        return []
    lines = [f"Same problem? The energy and angular momentum the load pulse leaves, both codes at Δt = "
             f"{check['dt']:g} s (their difference is the two meshes' discretization errors, lumped against "
             "consistent mass):", "",
             "| elements | conserve E(5) [J] | Exudyn E(5) [J] | relative difference | conserve L(5) [kg m²/s] "
             "| Exudyn L(5) [kg m²/s] | \\|ΔL(5)\\| / \\|L(5)\\| |", "|" + "---|" * 7]
    for n, r in runs.items():
        (Ec, Lc), (Ex, Lx) = r["conserve"], r["exudyn"]
        lines.append(f"| {n} | {Ec:.6g} | {Ex:.6g} | {(Ec - Ex) / Ex:+.1e} | {np.round(Lc, 2).tolist()} | "
                     f"{np.round(Lx, 2).tolist()} | {np.linalg.norm(Lc - Lx) / np.linalg.norm(Lx):.1e} |")
    return lines + [""]


def conservation_section(out, check, args):
    lines = ["## 2. Energy and angular momentum of the free-flying beam", "",
             f"{FREE_ELEMENTS} elements, to t = {args.free_t_end:g} s; after the load (t ≥ {FREE_LOAD_END:g} s) the "
             "energy and the angular momentum about the origin are first integrals of the rod. ΔE = E − E(5 s), "
             "ΔL = L − L(5 s). Exudyn: generalized-α ρ∞ = 0.8, its energy ½ q̇ᵀ M(q) q̇ + strain energy and the "
             "Noether momentum of that kinetic energy (`_exudyn_beams`). Time per step: best of two runs each "
             "(Exudyn's sensors record every step; the energy post-processing is not timed).", "",
             "| Δt [s] | code | E(5 s) [J] | max \\|ΔE\\| / E(5) | ΔE(end) / E(5) | max \\|ΔL\\| / \\|L(5)\\| "
             "| µs/step | Newton it./step |", "|" + "---|" * 8]
    for dt, r in out.items():
        c = r["conserve"]
        lines.append(f"| {dt:g} | conserve | {c['E5']:.6g} | {c['dE']:.1e} | {c['dE_end']:+.1e} | {c['dL']:.1e} | "
                     f"{1e6 * c['per_step']:.0f} | {c['newton']:.2f} |")
        if "exudyn" in r:
            x = r["exudyn"]
            lines.append(f"| {dt:g} | Exudyn GA | {x['E5']:.6g} | {x['dE']:.1e} | {x['dE_end']:+.1e} | {x['dL']:.1e} | "
                         f"{1e6 * x['per_step']:.0f} | {x['newton']:.1f} ({x['jacobians']:.2f} Jacobians) |")
        elif "exudyn failed" in r:
            lines.append(f"| {dt:g} | Exudyn GA | {r['exudyn failed']} | | | | | |")
    lines.append("")
    ratios = [f"Δt = {dt:g}: {r['conserve']['per_step'] / r['exudyn']['per_step']:.2g}×" for dt, r in out.items()
              if "exudyn" in r]
    if ratios:
        lines.append("conserve ÷ Exudyn per step: " + ", ".join(ratios) + ". conserve's energy balance "
                     "(work of the loads included) over the whole run: "
                     + ", ".join(f"{r['conserve']['balance']:.1e}" for r in out.values()) + " of the largest energy.")
        lines.append("")
    lines += free_check_lines(check)
    lines += ["![energy and angular momentum after the load](beams_conservation.png)", ""]
    return lines


def conservation_plot(out, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    floor = 1e-17
    styles = {"conserve": "-", "exudyn": "--"}
    colours = dict(zip(out, ("C0", "C1", "C2", "C3")))
    for dt, r in out.items():
        for code, label in (("conserve", "conserve"), ("exudyn", "Exudyn GA ρ∞=0.8")):
            if code not in r:
                continue
            x = r[code]
            for ax, key in zip(axes, ("E", "L")):
                ax.semilogy(x["t"], np.maximum(np.abs(x[key]), floor), styles[code], color=colours[dt], lw=1.2,
                            label=f"{label}, Δt = {dt:g} s")
    axes[0].set(xlabel="t (s)", ylabel="|E − E(5 s)| / E(5 s)", title="energy after the load")
    axes[1].set(xlabel="t (s)", ylabel="|L − L(5 s)| / |L(5 s)|", title="angular momentum after the load")
    for ax in axes:
        ax.set_ylim(floor / 2, 1e-1)
        ax.grid(alpha=0.3, which="major")
    axes[0].legend(fontsize=8, loc="center right")
    fig.suptitle(f"Free-flying beam, {FREE_ELEMENTS} elements (values below {floor:g} drawn at {floor:g})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- 3. equal accuracy
def sample_index(dt, period, T):
    """Indices of the nodes at t = period, 2 period, …, T of a run of step dt."""
    k = period / dt
    if abs(k - round(k)) > 1e-9:
        raise ValueError(f"Δt = {dt:g} s does not divide the sampling period {period:g} s")
    return np.arange(1, steps_of(T, period) + 1) * int(round(k))


def conserve_tip(assembly, tip, T, dt, period):
    sol = cs.simulate(assembly, T, dt, compile=COMPILE)
    u = np.asarray(sol[tip.name].position)[sample_index(dt, period, T)] - np.asarray(tip.position)
    return sol, u


def exudyn_tip(n, T, dt, period):
    r = xb.right_angle_cantilever(dt, T, n, RHO, energies=False)
    return r, r["tip_displacement"][sample_index(dt, period, T)]


def errors(u, ref):
    """(relative tip error at T, relative tip error over the run) against the reference samples."""
    at_T = float(np.linalg.norm(u[-1] - ref[-1]) / np.linalg.norm(ref[-1]))
    over = float(np.max(np.linalg.norm(u - ref, axis=1)) / np.max(np.linalg.norm(ref, axis=1)))
    return at_T, over


def equal_accuracy(args, exu):
    T, period = args.T, max(args.dts)
    models = {}

    def model(n):  # (assembly, tip, compile s, first-call rest s), built and compiled once per size
        if n not in models:
            tic = time.perf_counter()
            system, tip = right_angle(n)
            assembly = system.assemble()
            assemble = time.perf_counter() - tic
            compile_time, rest, _ = first_call(assembly, T, max(args.dts))
            models[n] = (assembly, tip, compile_time, rest + assemble)
            print(f"right angle, {n} per leg: compile {compile_time:.1f} s, assemble + first-call rest "
                  f"{rest + assemble:.1f} s", flush=True)
        return models[n]

    # the references: conserve (and Exudyn) at two fine meshes, extrapolated in the element length
    ref = {}
    coarse, fine = args.reference_elements
    for code in ("conserve", "exudyn") if exu is not None else ("conserve",):
        u = {}
        for n in (coarse, fine):
            tic = time.perf_counter()
            if code == "conserve":
                assembly, tip, *_ = model(n)
                u[n] = conserve_tip(assembly, tip, T, args.reference_dt, period)[1]
            else:
                u[n] = exudyn_tip(n, T, args.reference_dt, period)[1]
            print(f"reference {code}, {n} per leg, Δt = {args.reference_dt:g}: {time.perf_counter() - tic:.1f} s, "
                  f"tip at T {np.round(u[n][-1], 6).tolist()} m", flush=True)
        q = (fine / coarse) ** 2
        ref[code] = {"fine": u[fine], "coarse": u[coarse], "extrapolated": u[fine] + (u[fine] - u[coarse]) / (q - 1)}
        models.pop(fine, None)  # not in the grid: free its compiled run's memory with the model
    reference = ref["conserve"]["extrapolated"]

    grid = {"conserve": {}, "exudyn": {}}
    for rnd in range(args.rounds):
        for n in args.elements:
            assembly, tip, compile_time, rest = model(n)
            for dt in args.dts:
                key = (n, dt)
                sol, u = conserve_tip(assembly, tip, T, dt, period)
                c = grid["conserve"].get(key)
                if c is None or sol.stats["run_time"] < c["run"]:
                    grid["conserve"][key] = {"run": sol.stats["run_time"], "setup": compile_time + rest,
                                             "newton": float(np.mean(sol.newton_iterations)),
                                             "per_step": sol.stats["time_per_step"], "errors": errors(u, reference)}
                if exu is None or grid["exudyn"].get(key, {}).get("failed"):
                    continue
                try:
                    r, u = exudyn_tip(n, T, dt, period)
                except RuntimeError as e:
                    grid["exudyn"][key] = {"failed": str(e)}
                    continue
                x = grid["exudyn"].get(key)
                if x is None or r["wall_run"] < x["run"]:
                    grid["exudyn"][key] = {"run": r["wall_run"], "setup": r["wall_setup"],
                                           "newton": r["newton_per_step"], "per_step": r["wall_run"] / r["steps"],
                                           "errors": errors(u, reference)}
            if rnd == args.rounds - 1:
                for dt in args.dts:
                    c, x = grid["conserve"][(n, dt)], grid["exudyn"].get((n, dt), {})
                    ex = (f"Exudyn {x['run']:.3f} s, errors {x['errors'][0]:.1e} / {x['errors'][1]:.1e}" if "run" in x
                          else f"Exudyn {x.get('failed', 'not run')}")
                    print(f"right angle {n:3d} per leg, Δt = {dt:<6g}: conserve {c['run']:.3f} s, errors "
                          f"{c['errors'][0]:.1e} / {c['errors'][1]:.1e}; " + ex, flush=True)
    return {"grid": grid, "ref": ref, "reference": reference, "period": period}


def front(points):
    """The cheapest-for-its-error front of (cost, error, setting) points: sorted by cost, each point
    more accurate than every cheaper one."""
    out, best = [], np.inf
    for p in sorted(points, key=lambda p: p[0]):
        if p[1] < best:
            out.append(p)
            best = p[1]
    return out


def cost_at(points, target):
    """(cost at error ``target`` log–log interpolated along the front, how: "interpolated" between two
    settings, "≤" when the cheapest setting is already below the target, None when no setting
    reaches it), and the bracketing settings."""
    f = front(points)
    if not f or f[-1][1] > target:
        return None, "not reached", None
    if f[0][1] <= target:
        return f[0][0], "≤", (f[0][2],)
    for (c0, e0, s0), (c1, e1, s1) in zip(f, f[1:]):
        if e1 <= target < e0:
            w = np.log(target / e0) / np.log(e1 / e0)
            return float(np.exp(np.log(c0) + w * np.log(c1 / c0))), "interpolated", (s0, s1)
    return None, "not reached", None


def setting(s):
    return f"{s[0]}/leg, Δt {s[1]:g}"


def accuracy_section(acc, args, exu):
    grid, ref, T = acc["grid"], acc["ref"], args.T
    r_fine, r_coarse = args.reference_elements[1], args.reference_elements[0]
    reference = acc["reference"]
    scale_T, scale_run = np.linalg.norm(reference[-1]), np.max(np.linalg.norm(reference, axis=1))
    lines = ["## 3. Cost at equal accuracy (right-angle cantilever)", "",
             f"T = {T:g} s (the load on [0, 2] s, then free vibration; reduced from the literature's 30 s to keep the "
             f"run short). Reference: conserve at {r_coarse} and {r_fine} elements per leg, Δt = {args.reference_dt:g} "
             f"s, extrapolated in the element length (Richardson, second order) at every t_k = k·{acc['period']:g} s. "
             f"u_ref(T) = {np.round(reference[-1], 5).tolist()} m (‖u_ref(T)‖ = {scale_T:.4f} m, max over the run "
             f"{scale_run:.4f} m).", ""]
    c_ref = ref["conserve"]
    fine_err = errors(c_ref["fine"], reference)
    lines.append(f"- conserve's {r_fine}-per-leg run differs from the extrapolation by {fine_err[0]:.1e} at T and "
                 f"{fine_err[1]:.1e} over the run (relative), its {r_coarse}-per-leg run by "
                 f"{errors(c_ref['coarse'], reference)[0]:.1e} / {errors(c_ref['coarse'], reference)[1]:.1e}: second "
                 "order in the element length.")
    if "exudyn" in ref:
        x_ref = ref["exudyn"]
        d, e_fine = errors(x_ref["extrapolated"], reference), errors(x_ref["fine"], reference)
        lines.append(f"- **Same problem:** Exudyn's runs at {r_coarse} and {r_fine} per leg "
                     f"(Δt = {args.reference_dt:g}), extrapolated alike, differ from conserve's extrapolation by "
                     f"**{d[0]:.1e}** at T and {d[1]:.1e} over the run; unextrapolated, Exudyn's {r_fine}-per-leg run "
                     f"by {e_fine[0]:.1e} / {e_fine[1]:.1e}. Errors below that difference do not distinguish the "
                     "two references.")
    lines += ["", "Every setting: whole-run time [s] (best of the rounds) and relative tip error at T / over the run; "
              "conserve's first-call costs (compilation and structure, once per mesh) and Exudyn's setup are not in "
              "the run time.", "",
              "| elements/leg | Δt [s] | conserve run [s] | conserve error at T / over run "
              "| conserve µs/step (Newton it.) | Exudyn run [s] | Exudyn error at T / over run "
              "| Exudyn µs/step (Newton it.) | conserve first call [s] |",
              "|" + "---|" * 9]
    for (n, dt), c in sorted(grid["conserve"].items()):
        x = grid["exudyn"].get((n, dt))
        if x and "run" in x:
            ex = (f"{x['run']:.3f} | {x['errors'][0]:.1e} / {x['errors'][1]:.1e} | "
                  f"{1e6 * x['per_step']:.0f} ({x['newton']:.1f}) |")
        else:
            ex = ("failed | — | — |" if x else "— | — | — |")
        lines.append(f"| {n} | {dt:g} | {c['run']:.3f} | {c['errors'][0]:.1e} / {c['errors'][1]:.1e} | "
                     f"{1e6 * c['per_step']:.0f} ({c['newton']:.1f}) | {ex} {c['setup']:.1f} |")
    failed = [(k, v["failed"]) for k, v in grid["exudyn"].items() if "failed" in v]
    lines.append("")
    if failed:
        lines += ["Exudyn failed: " + "; ".join(f"{setting(k)}: {m}" for k, m in failed), ""]
    if exu is None:
        return lines + ["Exudyn not installed: no comparison.", ""], []
    lines += ["Cost to reach a relative tip error (log–log interpolated along each code's cheapest-for-its-error "
              "front between the two bracketing settings; \"≤\": the cheapest setting run is already below the target, "
              "so the cost is at most that). *with setup*: the same plus conserve's first call beyond its step "
              "(compilation, structure, `assemble()`) of the settings used, or Exudyn's model setup.", "",
              "| error measure | target | conserve [s] | settings | Exudyn GA [s] | settings | **conserve ÷ Exudyn** "
              "| with setup: conserve / Exudyn [s] | ratio with setup |", "|" + "---|" * 9]
    summary = []
    for m, label in ((0, "at T"), (1, "over the run")):
        for target in TARGETS:
            res = {}
            for code in ("conserve", "exudyn"):
                pts = [(v["run"], v["errors"][m], k) for k, v in grid[code].items() if "run" in v]
                pts_setup = [(v["run"] + v["setup"], v["errors"][m], k) for k, v in grid[code].items() if "run" in v]
                res[code] = cost_at(pts, target), cost_at(pts_setup, target)
            (cc, ch, cs_), (cw, _, _) = res["conserve"][0], res["conserve"][1]
            (xc, xh, xs), (xw, _, _) = res["exudyn"][0], res["exudyn"][1]
            fmt = lambda v, h: "not reached" if v is None else ("≤ " if h == "≤" else "") + f"{v:.3f}"  # noqa: E731
            where = lambda s: " – ".join(setting(k) for k in s) if s else "—"  # noqa: E731
            ratio = f"**{cc / xc:.2g}**" if cc is not None and xc is not None else "—"
            if cc is not None and xc is not None and (ch == "≤" or xh == "≤"):
                ratio += " (bound)"
            ratio_w = f"{cw / xw:.2g}" if cw is not None and xw is not None else "—"
            w_text = (f"{cw:.2f} / {xw:.3f}" if cw is not None and xw is not None else "—")
            lines.append(f"| {label} | {target:g} | {fmt(cc, ch)} | {where(cs_)} | {fmt(xc, xh)} | {where(xs)} "
                         f"| {ratio} | {w_text} | {ratio_w} |")
            summary.append((label, target, cc, xc, cw, xw))
    return lines + [""], summary


# ---------------------------------------------------------------- report
def header(args, exu):
    import jax
    commit = git_commit()
    argv = " ".join(f"--{k.replace('_', '-')} " + (" ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v))
                    for k, v in vars(args).items() if k != "quick")
    return ["# Geometrically exact beams: conserve vs Exudyn", "",
            f"`taskset -c 0 python benchmarks/beams.py` ({argv}) — pinned to CPU {sorted(os.sched_getaffinity(0))}. "
            f"{cpu_name()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d', time.gmtime())}, "
            f"load average at start {os.getloadavg()[0]:.2f} (1 min); conserve {cs.__version__} (git {commit}), "
            f"jax {jax.__version__}, numpy {np.__version__}, Exudyn {exu.__version__ if exu else 'not installed'}; "
            f"persistent compilation cache {os.environ.get('CONSERVE_COMPILATION_CACHE', 'default')}.", "",
            "conserve: director backend, `compile='optimized'`, lumped node masses. Exudyn: "
            "`ObjectBeamGeometricallyExact` (consistent mass), generalized-α ρ∞ = 0.8, modified Newton, "
            "EigenSparse, one thread (`benchmarks/_exudyn_beams.py`). Problems, settings and error measures: the "
            "script's docstring.",
            ""]


def targets_section(rows, out, summary, args):
    sizes = (min(args.sizes), max(args.sizes))
    slope = loglog_slope(rows, "conserve", sizes)
    compile_times = [r["compile"] for r in rows]
    lines = ["## Targets and headline", ""]
    if slope is not None:
        lines.append(f"- slope of µs/step against elements: **{slope:.3f}** (≤ {SLOPE_TARGET:g}: "
                     + ("met" if slope <= SLOPE_TARGET else "not met") + ").")
    per_size = ", ".join(f"{r['N']}: {r['compile']:.1f} s" for r in rows)
    lines.append(f"- compile time against elements: {per_size} "
                 f"(flat, ≤ {FLAT_FACTOR:g}× over the sizes: "
                 + ("met" if compile_times[-1] / compile_times[0] <= FLAT_FACTOR else "not met") + ").")
    for dt, r in out.items():
        c = r["conserve"]
        text = f"- free beam, Δt = {dt:g}: conserve max |ΔE|/E {c['dE']:.1e}, |ΔL|/|L| {c['dL']:.1e}"
        if "exudyn" in r:
            x = r["exudyn"]
            text += (f"; Exudyn GA {x['dE']:.1e}, {x['dL']:.1e}; per step conserve ÷ Exudyn "
                     f"{c['per_step'] / x['per_step']:.2g}")
        lines.append(text + ".")
    for label, target, cc, xc, cw, xw in summary:
        if cc is not None and xc is not None:
            lines.append(f"- right-angle cantilever, tip error {label} ≤ {target:g}: conserve ÷ Exudyn "
                         f"**{cc / xc:.2g}** (run time), {cw / xw:.2g} with compilation and setup.")
        else:
            lines.append(f"- right-angle cantilever, tip error {label} ≤ {target:g}: not reached by "
                         + ("conserve" if cc is None else "Exudyn") + " in the grid.")
    return lines + [""]


NOTES = ["## Notes", "",
         "- Scaling uses the free beam, not a clamped cantilever: a clamped straight cantilever (EA = GA = 1e6 N, "
         "EI = GJ = 1e3 N m², 10 m, gravity, released straight) stopped with \"Newton produced NaN/inf\" after "
         "8–13 steps of Δt = 0.01 s at 30, 50 and 100 elements (not at 20 or 40; not at Δt = 0.001; not with "
         "the reduced backend; depending on the code generation), reported separately.",
         "- Exudyn's right-angle runs use Newton's relative tolerance 1e-6 (`RIGHT_ANGLE_RELATIVE_TOLERANCE`): with "
         "the default 1e-8 (and 1e-7) they stop at the first step from 16 (64) elements per leg on.", ""]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 50, 100, 200])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--free-t-end", type=float, default=60.0)
    parser.add_argument("--free-dts", type=float, nargs="+", default=[0.1, 0.05])
    parser.add_argument("--T", type=float, default=10.0)
    parser.add_argument("--elements", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--dts", type=float, nargs="+", default=[0.1, 0.05, 0.025, 0.01])
    parser.add_argument("--reference-elements", type=int, nargs=2, default=[64, 128])
    parser.add_argument("--reference-dt", type=float, default=0.005)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and grid, to try the script (prints only, writes nothing)")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.steps, args.repeats, args.free_t_end = [10, 20], 120, 1, 10.0
        args.T, args.elements, args.dts, args.reference_elements, args.rounds = 4.0, [4, 8], [0.1, 0.05], [8, 16], 1
        args.reference_dt = 0.025
    pin_to_core0()
    exu = import_exudyn()
    t_start = time.perf_counter()
    lines = header(args, exu)
    rows = scaling(args, exu)
    out = conservation(args, exu)
    check = free_check(exu)
    acc = equal_accuracy(args, exu)
    lines += scaling_section(rows, args) + conservation_section(out, check, args)
    acc_lines, summary = accuracy_section(acc, args, exu)
    lines += acc_lines + targets_section(rows, out, summary, args) + NOTES
    if args.quick:  # a trial: printed, the result files kept
        print("\n".join(lines) + f"\n(--quick: nothing written; {time.perf_counter() - t_start:.0f} s)")
        return
    OUT.mkdir(exist_ok=True)
    conservation_plot(out, OUT / "beams_conservation.png")
    write_report(OUT / "beams.md", lines, t_start)


if __name__ == "__main__":
    main()
