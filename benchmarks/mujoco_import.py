"""Benchmark: gymnasium's MuJoCo models imported with ``cs.from_mjcf`` and run by conserve beside
MuJoCo's own RK4 — does an imported model follow MuJoCo, how well do the integrators keep energy,
and what does a step cost.

    taskset -c 0 python benchmarks/mujoco_import.py [--models hopper ant ...] [--repeats 3]

Writes benchmarks/results/mujoco_import.md and mujoco_import.json (the raw numbers). Pinned to
CPU 0 at start (``_peers.pin_to_core0``); no persistent compilation cache (``_peers``).

* Models: the MJCF assets of the ``gymnasium`` package (``gymnasium/envs/mujoco/assets/``):
  pusher_v5 (bodies "object" and "goal" deleted with ``MjSpec.delete``, gravity (0, 0, −9.81): the
  file has none), reacher, inverted_double_pendulum, hopper, walker2d_v5, half_cheetah, ant,
  humanoid (stiffness and damping of every joint set to 0 in the spec: its two- and three-hinge
  bodies map to Universal / Spherical joints, which have no per-hinge spring or damper). Each is
  compiled by ``conserve.importers.mjcf.like_conserve(spec)`` (contacts and limits off, armature
  0); initial qpos = qpos0, qvel = 0.5 · a standard normal vector (numpy ``default_rng(SEED)``,
  rad/s or m/s), no control.
* conserve: ``cs.simulate(system, t_end=1, dt=2e-3, order=4)`` and ``order=2`` (default
  compilation, ``compile="auto"``), MuJoCo's qpos at the nodes from ``system.imported.qpos(sol)``.
* Reference: MuJoCo RK4 (``mj_step``) at h = 1e-4 and at h = 5e-5 (their distance checks the
  1e-4 reference), qpos every 2e-3 s. max |Δq| over the 501 nodes, split into hinge and slide
  entries (rad, m) and free/ball entries (free joints' position, m; quaternions of free and ball
  joints, the conserve quaternion's sign taken to match MuJoCo's). The target, agreement ≤ 1e-6
  over 1 s, is judged on all these entries against the h = 5e-5 reference. Also reported: the
  same of q − q(0) (constant offsets of the mapping removed), conserve's energy balance error
  ``max |sol.energy_balance_error| / sol.energy_scale`` and the initial energies (conserve's
  ``sol.energy.total[0]`` against MuJoCo's ``d.energy`` after ``mj_forward``).
* Energy drift on a conservative variant (damping and frictionloss of every joint 0 in the spec;
  springs and gravity kept): max |E − E0| / scale over 1 s, scale = max over the run of |kinetic|
  and |potential| (``Solution.energy_scale``'s definition), for conserve order 2 at Δt = 2e-3,
  MuJoCo RK4 at h = 2e-3 and MuJoCo at the file's own integrator and timestep (MuJoCo's energy:
  ``mjENBL_ENERGY``, ``d.energy.sum()`` after ``mj_forward`` at every node).
* Timing: conserve's ``sol.stats`` (``compile_time`` of the first call; ``time_per_step`` best of
  ``--repeats`` calls); MuJoCo RK4 at h = 2e-3: one ``mujoco.rollout`` call of the 500 steps on the
  calling thread, best of 20.
* A model that fails to import or run: the error in its row. Where the failure is in names only (a
  joint named like a body; a body without a name), the model is run again with the names
  completed in the spec, in a row marked "names completed".
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _peers import (MUJOCO_WARNINGS, cpu_name, git_commit, import_mujoco, mujoco_diverged, mujoco_state,  # noqa: E402
                    pin_to_core0, rollout, write_report)

import conserve as cs  # noqa: E402

OUT = Path(__file__).parent / "results" / "mujoco_import"
MODELS = ("pusher_v5", "reacher", "inverted_double_pendulum", "hopper", "walker2d_v5", "half_cheetah", "ant",
          "humanoid")
T, DT = 1.0, 2e-3
REF_H, CHECK_H = 1e-4, 5e-5
SEED, QVEL_SCALE = 0, 0.5
TARGET = 1e-6
MJ_TIMING_REPEATS = 20
FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3


def assets():
    import gymnasium

    return Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"


def _zero(value):
    """0 in the shape of a spec attribute (MuJoCo 4 keeps stiffness and damping as 3-vectors)."""
    return np.zeros_like(np.asarray(value, float)) if np.ndim(value) else 0.0


def spec_of(mj, name, conservative=False, complete_names=False):
    """The MjSpec of gymnasium's ``name``.xml with this benchmark's edits (module docstring)."""
    spec = mj.MjSpec.from_file(str(assets() / f"{name}.xml"))
    if name == "pusher_v5":
        for body in ("object", "goal"):
            spec.delete(spec.body(body))
        spec.option.gravity = [0.0, 0.0, -9.81]
    if name == "humanoid":
        for j in spec.joints:
            j.stiffness, j.damping = _zero(j.stiffness), _zero(j.damping)
    if conservative:
        for j in spec.joints:
            j.damping, j.frictionloss = _zero(j.damping), _zero(j.frictionloss)
    if complete_names:
        for k, body in enumerate(spec.bodies):
            if not body.name:
                body.name = f"unnamed_body{k}"
        bodies = {body.name for body in spec.bodies}
        for j in spec.joints:
            if j.name in bodies:
                for actuator in spec.actuators:  # actuators name their joint
                    if actuator.target == j.name:
                        actuator.target = f"{j.name}_joint"
                j.name = f"{j.name}_joint"
    return spec


def model_of(mj, name, **edits):
    from conserve.importers.mjcf import like_conserve

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # half_cheetah: MuJoCo's "settotalmass is deprecated"
        return like_conserve(spec_of(mj, name, **edits))


def error_text(err):
    text = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return (text[:197] + "…") if len(text) > 200 else text


# ---------------------------------------------------------------- MuJoCo
def mujoco_run(mj, m, qvel, h, integrator="RK4", every=DT, energy=False):
    """MuJoCo from qpos0, ``qvel``: qpos (K, nq) every ``every`` s over T, and with ``energy`` the
    (potential, kinetic) energies (K, 2) after ``mj_forward`` at each node; None if the run left its
    clock (MuJoCo resets a diverging run) or went non-finite."""
    m = copy.copy(m)
    if integrator is not None:
        m.opt.integrator = getattr(mj.mjtIntegrator, f"mjINT_{integrator}")
    m.opt.timestep = h
    if energy:
        m.opt.enableflags |= mj.mjtEnableBit.mjENBL_ENERGY
    d = mj.MjData(m)
    d.qpos[:], d.qvel[:] = m.qpos0, qvel
    mj.mj_forward(m, d)
    n, stride = int(round(T / h)), max(1, int(round(every / h)))
    q, E = [d.qpos.copy()], [d.energy.copy()]
    for k in range(n):
        mj.mj_step(m, d)
        if (k + 1) % stride == 0:
            q.append(d.qpos.copy())
            if energy:
                mj.mj_forward(m, d)
                E.append(d.energy.copy())
    q = np.array(q)
    ok = abs(d.time - n * h) < 0.5 * h and np.all(np.isfinite(q))
    return (q, np.array(E)) if ok else (None, None)


def mujoco_step_time(mj, m, qvel, h, repeats=MJ_TIMING_REPEATS):
    """(µs per step of MuJoCo RK4 at ``h`` over T: one ``mujoco.rollout`` call, best of ``repeats``;
    the time it diverged (MuJoCo then resets to the initial state and goes on) or None)."""
    m = copy.copy(m)
    m.opt.integrator, m.opt.timestep = mj.mjtIntegrator.mjINT_RK4, h
    d = mj.MjData(m)
    d.qpos[:], d.qvel[:] = m.qpos0, qvel
    state0 = mujoco_state(mj, m, d)
    steps = int(round(T / h))
    runs = [rollout(mj, m, state0, steps) for _ in range(repeats)]
    return 1e6 * min(wall for wall, _ in runs) / steps, mujoco_diverged(runs[0][1], h)


def drift(E):
    """max |E − E0| / scale of (K, 2) (potential, kinetic) energies."""
    total = E.sum(axis=1)
    return float(np.max(np.abs(total - total[0])) / np.max(np.abs(E)))


# ---------------------------------------------------------------- comparison
def qpos_entries(mj, m):
    """Per qpos entry: (label, kind) with kind "hinge", "slide", "free pos", "free quat", "ball quat";
    and the quaternion slices."""
    entries, quats = [None] * m.nq, []
    for j in range(m.njnt):
        a, t = int(m.jnt_qposadr[j]), int(m.jnt_type[j])
        name = mj.mj_id2name(m, mj.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
        if t == FREE:
            for k, s in enumerate(("x", "y", "z")):
                entries[a + k] = (f"{name}.{s}", "free pos")
            for k, s in enumerate(("qw", "qx", "qy", "qz")):
                entries[a + 3 + k] = (f"{name}.{s}", "free quat")
            quats.append(slice(a + 3, a + 7))
        elif t == BALL:
            for k, s in enumerate(("qw", "qx", "qy", "qz")):
                entries[a + k] = (f"{name}.{s}", "ball quat")
            quats.append(slice(a, a + 4))
        else:
            entries[a] = (name, "hinge" if t == HINGE else "slide")
    return entries, quats


def compare(q, ref, entries, quats):
    """max |Δq| of the hinge/slide entries (with the worst entry's label), of free positions and of
    quaternions, and of q − q(0) over hinge/slide entries; NaN entries of q counted."""
    q = np.array(q, float)
    for s in quats:  # q and −q are one rotation: take conserve's sign nearest MuJoCo's
        flip = np.einsum("ni,ni->n", q[:, s], ref[:, s]) < 0
        q[flip, s] *= -1.0
    dq = np.abs(q - ref)
    kinds = np.array([k for _, k in entries])
    out = {"nan_entries": int(np.sum(np.any(np.isnan(q), axis=0)))}
    joint = np.isin(kinds, ("hinge", "slide"))
    if joint.any():
        per = np.nanmax(dq[:, joint], axis=0)
        out["joint"] = float(per.max())
        out["worst"] = [e for e, j in zip(entries, joint) if j][int(np.argmax(per))][0]
        moved = np.abs((q - q[0]) - (ref - ref[0]))[:, joint]
        out["joint_displacement"] = float(np.nanmax(moved))
        at0 = dq[0, joint]
        out["offset0"] = float(np.nanmax(at0))
        k = int(np.flatnonzero(joint)[int(np.nanargmax(at0))])
        out["offset0_entry"], out["offset0_mujoco_qpos0"] = entries[k][0], float(ref[0, k])
    for key, mask in (("free_pos", kinds == "free pos"), ("quat", np.isin(kinds, ("free quat", "ball quat")))):
        if mask.any():
            out[key] = float(np.nanmax(dq[:, mask]))
    out["all"] = max(v for k, v in out.items() if k in ("joint", "free_pos", "quat"))
    return out


def fastest_passive(mj, m):
    """At qpos0 (armature 0): the largest damping rate |eig(M⁻¹ C)| and spring frequency
    √eig(M⁻¹ K) of the joints' dampers C and springs K, 1/s — the stiff modes of a step."""
    d = mj.MjData(m)
    d.qpos[:] = m.qpos0
    mj.mj_forward(m, d)
    M = np.zeros((m.nv, m.nv))
    try:
        mj.mj_fullM(m, d, M)
    except TypeError:  # MuJoCo < 3.3: mj_fullM(m, dst, qM)
        mj.mj_fullM(m, M, d.qM)
    K = np.zeros(m.nv)
    for j in range(m.njnt):
        if int(m.jnt_type[j]) in (HINGE, SLIDE):
            K[int(m.jnt_dofadr[j])] = m.jnt_stiffness[j]
    rate = np.abs(np.linalg.eigvals(np.linalg.solve(M, np.diag(m.dof_damping)))).max()
    omega = np.sqrt(np.abs(np.linalg.eigvals(np.linalg.solve(M, np.diag(K)))).max())
    return float(rate), float(omega)


def describe(system, m, entries):
    from conserve.model.joints import Joint

    kinds = {}
    for e in system.elements:
        if isinstance(e, Joint):
            kinds[type(e).__name__] = kinds.get(type(e).__name__, 0) + 1
    compared = {}
    for _, k in entries:
        compared[k] = compared.get(k, 0) + 1
    return {"bodies": sum(isinstance(e, cs.RigidBody) for e in system.elements), "nv": int(m.nv), "nq": int(m.nq),
            "joints": kinds, "free": int(np.sum(m.jnt_type == FREE)), "compared": compared,
            "unmapped": list(system.imported.unmapped)}


def simulate(system, order, repeats):
    """(first Solution, compile time s, best µs per step, warnings) of ``repeats`` identical runs."""
    sols, caught = [], []
    for _ in range(repeats):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sols.append(cs.simulate(system, t_end=T, dt=DT, order=order))
        caught += [f"{x.category.__name__}: {str(x.message).splitlines()[0]}" for x in w]
    return (sols[0], float(sols[0].stats["compile_time"]),
            1e6 * min(s.stats["time_per_step"] for s in sols), sorted(set(caught)))


# ---------------------------------------------------------------- one model
def study(mj, name, args, log, complete_names=False):
    r = {"model": name + (" (names completed)" if complete_names else "")}
    log(f"{r['model']}: import ...")
    try:
        m = model_of(mj, name, complete_names=complete_names)
        qvel = QVEL_SCALE * np.random.default_rng(SEED).standard_normal(m.nv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cs.ModelImportWarning)  # listed in system.imported.unmapped
            system = cs.from_mjcf(m, qvel=qvel)
        entries, quats = qpos_entries(mj, m)
        r.update(describe(system, m, entries))
        r["integrator"] = {0: "Euler", 1: "RK4", 2: "implicit", 3: "implicitfast"}.get(int(m.opt.integrator),
                                                                                       str(int(m.opt.integrator)))
        r["timestep"] = float(m.opt.timestep)
        r["damping_rate"], r["spring_omega"] = fastest_passive(mj, m)
    except Exception as err:  # noqa: BLE001 — recorded in the table
        r["error"] = "import: " + error_text(err)
        return r
    log(f"{r['model']}: MuJoCo RK4 references ...")
    refs = {h: mujoco_run(mj, m, qvel, h, energy=h == REF_H) for h in (REF_H, CHECK_H)}
    if refs[REF_H][0] is not None and refs[CHECK_H][0] is not None:
        r["ref_check"] = compare(refs[REF_H][0], refs[CHECK_H][0], entries, quats)["all"]
    else:
        r["ref_check"] = "diverged" if refs[REF_H][0] is None else "5e-5 diverged"
    E_mj = refs[REF_H][1] if refs[REF_H][1] is not None else mujoco_run(mj, m, qvel, CHECK_H, energy=True)[1]
    for order, repeats in ((4, args.repeats), (2, max(1, args.repeats - 1))):
        key = f"order{order}"
        log(f"{r['model']}: conserve order {order} ...")
        try:
            sol, compile_time, per_step, caught = simulate(system, order, repeats)
        except Exception as err:  # noqa: BLE001
            r[key] = {"error": "run: " + error_text(err)}
            continue
        res = {"compile_time": compile_time, "us_per_step": per_step, "compile": sol.stats.get("compile"),
               "newton_matrix": sol.stats.get("newton_matrix"), "warnings": caught,
               "balance": float(np.max(np.abs(sol.energy_balance_error)) / sol.energy_scale),
               "energy_scale": float(sol.energy_scale), "E0": float(sol.energy.total[0])}
        if E_mj is not None:
            res["E0_mujoco"] = float(E_mj[0].sum())
            res["E0_rel"] = abs(res["E0"] - res["E0_mujoco"]) / sol.energy_scale
        try:
            q = system.imported.qpos(sol)
            for h, (ref, _) in refs.items():
                if ref is not None:
                    res[f"vs_{h:g}"] = compare(q, ref, entries, quats)
        except Exception as err:  # noqa: BLE001
            res["qpos_error"] = "imported.qpos: " + error_text(err)
        r[key] = res
    log(f"{r['model']}: conservative variant ...")
    try:
        mc = model_of(mj, name, conservative=True, complete_names=complete_names)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cs.ModelImportWarning)
            sc = cs.from_mjcf(mc, qvel=qvel)
        sol = simulate(sc, 2, 1)[0]
        Ec = np.stack([sol.energy.potential, sol.energy.kinetic], axis=1)
        r["drift_conserve"] = drift(Ec)
    except Exception as err:  # noqa: BLE001
        r["drift_conserve"] = "run: " + error_text(err)
        mc = None
    if mc is not None:
        for key, integrator, h in (("drift_rk4", "RK4", DT), ("drift_default", None, float(mc.opt.timestep))):
            E = mujoco_run(mj, mc, qvel, h, integrator=integrator, every=h, energy=True)[1]
            r[key] = drift(E) if E is not None else "diverged"
    log(f"{r['model']}: timing MuJoCo RK4 ...")
    r["mujoco_us_per_step"], r["mujoco_rk4_diverged_at"] = mujoco_step_time(mj, m, qvel, DT)
    return r


# ---------------------------------------------------------------- report
def fmt(x, spec=".2e"):
    if x is None:
        return "—"
    return format(x, spec) if isinstance(x, (int, float)) else str(x)


def summary(items):
    """Unmapped items grouped by their first word: "actuator ×12 (e.g. …); 2 tendons (…)"."""
    groups = {}
    for item in items:
        groups.setdefault(item.split()[0], []).append(item)
    return "; ".join(g[0] if len(g) == 1 else f"{word} ×{len(g)} (e.g. {g[0]})" for word, g in groups.items())


def joint_kinds(r):
    text = ", ".join(f"{k} ×{n}" for k, n in sorted(r["joints"].items()))
    return (f"free body ×{r['free']}" + (", " if text else "")) + text if r["free"] else text


def compared_text(r):
    return ", ".join(f"{n} {k}" for k, n in r["compared"].items())


def tables(results):
    lines = ["## Models and mapping", "",
             "| model | bodies (conserve) | nv | nq | mapped joints | qpos entries compared | not mapped "
             "(`system.imported.unmapped`) | E0: \\|conserve − MuJoCo\\| / scale |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | | |")
            continue
        unmapped = "; ".join(r["unmapped"]) if len(r["unmapped"]) <= 2 else summary(r["unmapped"])
        lines.append(f"| {r['model']} | {r['bodies']} | {r['nv']} | {r['nq']} | {joint_kinds(r)} | {compared_text(r)} "
                     f"| {unmapped or '—'} | {fmt(r['order4'].get('E0_rel'))} |")
    lines += ["", "## Agreement with MuJoCo RK4 over 1 s (conserve Δt = 2e-3)", "",
              f"max \\|q_conserve − q_MuJoCo\\| over the {int(round(T / DT)) + 1} nodes. Target ≤ {TARGET:g} on "
              f"every compared entry against RK4 at h = {CHECK_H:g}.", "",
              f"| model | RK4 h = {REF_H:g} vs {CHECK_H:g} | order 4: hinge/slide vs h = {REF_H:g} | "
              f"order 4: hinge/slide vs h = {CHECK_H:g} (worst entry) | order 4: free pos [m] / quaternion | "
              "order 4: hinge/slide, q − q(0) | target ≤ 1e-6 | order 2: all entries / hinge-slide q − q(0) | "
              "energy balance error order 4 / order 2 | fastest damping rate / spring ω [1/s] |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | | | | |")
            continue
        o4, o2 = r["order4"], r["order2"]
        stiff = f"{r['damping_rate']:.3g} / {r['spring_omega']:.3g}"
        if "error" in o4 or "qpos_error" in o4:
            msg = o4.get("error") or o4["qpos_error"]
            lines.append(f"| {r['model']} | {fmt(r['ref_check'])} | {msg} | | | | not measured | "
                         f"{fmt(o2.get(f'vs_{CHECK_H:g}', {}).get('all'))} | {fmt(o4.get('balance'))} / "
                         f"{fmt(o2.get('balance'))} | {stiff} |")
            continue
        a, c = o4.get(f"vs_{REF_H:g}", {}), o4.get(f"vs_{CHECK_H:g}", {})
        c2 = o2.get(f"vs_{CHECK_H:g}", {})
        free = f"{fmt(c.get('free_pos'))} / {fmt(c.get('quat'))}" if "quat" in c else "—"
        met = ("**met**" if c["all"] <= TARGET else "**not met**") + f" ({c['all']:.2e})" if c else "no reference"
        lines.append(f"| {r['model']} | {fmt(r['ref_check'])} | {fmt(a.get('joint'))} | {fmt(c.get('joint'))} "
                     f"({c.get('worst', '—')}) | {free} | {fmt(c.get('joint_displacement'))} | {met} | "
                     f"{fmt(c2.get('all'))} / {fmt(c2.get('joint_displacement'))} | {fmt(o4.get('balance'))} / "
                     f"{fmt(o2.get('balance'))} | {stiff} |")
    lines += ["", "## Energy drift, conservative variant (joint damping and frictionloss 0)", "",
              "max \\|E − E0\\| / scale over 1 s, scale = the largest \\|kinetic\\| or \\|potential\\| energy "
              "of the run.",
              "", "| model | conserve order 2, Δt = 2e-3 | MuJoCo RK4, h = 2e-3 | MuJoCo, the file's integrator "
              "and timestep |", "|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | |")
            continue
        lines.append(f"| {r['model']} | {fmt(r.get('drift_conserve'))} | {fmt(r.get('drift_rk4'))} | "
                     f"{fmt(r.get('drift_default'))} ({r['integrator']}, h = {r['timestep']:g}) |")
    lines += ["", "## Cost (pinned to one core)", "",
              "| model | conserve Newton matrix | compile order 4 [s] (mode) | compile order 2 [s] | "
              "conserve order 4 [µs/step] | conserve order 2 [µs/step] | MuJoCo RK4 h = 2e-3 [µs/step] | "
              "order 4 ÷ RK4 |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | | |")
            continue
        o4, o2 = r["order4"], r["order2"]
        if "error" in o4:
            lines.append(f"| {r['model']} | {o4['error']} | | | | | {r['mujoco_us_per_step']:.1f} | |")
            continue
        bad = "" if r["mujoco_rk4_diverged_at"] is None else \
            f" (diverges at t = {r['mujoco_rk4_diverged_at']:g} s and restarts: not comparable)"
        lines.append(f"| {r['model']} | {o4['newton_matrix']} | {o4['compile_time']:.1f} ({o4['compile']}) | "
                     f"{fmt(o2.get('compile_time'), '.1f')} | {o4['us_per_step']:.0f} | "
                     f"{fmt(o2.get('us_per_step'), '.0f')} | {r['mujoco_us_per_step']:.1f}{bad} | "
                     + (f"{o4['us_per_step'] / r['mujoco_us_per_step']:.0f}× |" if not bad else "— |"))
    return lines + [""]


def _vs(r):
    return r.get("order4", {}).get(f"vs_{CHECK_H:g}")


def _span(values, spec=".1e"):
    values = [v for v in values if isinstance(v, float)]
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return format(lo, spec) if lo == hi else f"{format(lo, spec)} … {format(hi, spec)}"


def observations(results):
    """The findings of the run, each line from its numbers."""
    compared = [r for r in results if _vs(r)]
    lines = []
    met = [f"{r['model']} {_vs(r)['all']:.1e}" for r in compared if _vs(r)["all"] <= TARGET]
    missed = [f"{r['model']} {_vs(r)['all']:.1e} ({_vs(r).get('worst')})" for r in compared if _vs(r)["all"] > TARGET]
    other = [f"{r['model']} ({(r.get('error') or r.get('order4', {}).get('error') or r['order4'].get('qpos_error'))})"
             for r in results if not _vs(r)]
    renamed = [r for r in results if r["model"].endswith("(names completed)")]
    rerun = ""
    if renamed:
        rerun = (" Failures in names only (conserve needs one name per body and joint; `qpos()` looks bodies up by "
                 "name) were run again with the names completed in the spec — a joint named like a body renamed "
                 "\"<name>_joint\" (and its actuators' target), unnamed bodies named: "
                 + "; ".join(f"{r['model'].split()[0]} → " + (f"{_vs(r)['all']:.1e}" if _vs(r) else
                                                             (r.get('error') or r['order4'].get('error')
                                                              or r['order4'].get('qpos_error')))
                             for r in renamed) + ".")
    lines.append(f"- Target ≤ {TARGET:g} over 1 s (order 4, Δt = {DT:g}, against RK4 h = {CHECK_H:g}): met on "
                 f"{len(met)} of {len(results)} rows ({len(results) - len(renamed)} models"
                 + (f" + {len(renamed)} rerun" if renamed else "") + f"): {', '.join(met) or 'none'}; "
                 f"not met: {', '.join(missed) or 'none'}"
                 + (f"; not measured: {'; '.join(other)}" if other else "") + "." + rerun)
    offset = [r for r in compared if _vs(r).get("offset0", 0.0) > 1e-9]
    if offset:
        parts = [f"{r['model']}: {_vs(r)['offset0_entry']} by {_vs(r)['offset0']:.3g} (MuJoCo's qpos0 there "
                 f"{_vs(r)['offset0_mujoco_qpos0']:.3g}), q − q(0) agrees to {_vs(r)['joint_displacement']:.1e}"
                 for r in offset]
        is_ref = all(abs(_vs(r)["offset0"] - abs(_vs(r)["offset0_mujoco_qpos0"])) < 1e-9 for r in offset)
        lines.append("- Already at t = 0 `system.imported.qpos(sol)` differs from MuJoCo's qpos0 — " + "; ".join(parts)
                     + (". Each offset equals MuJoCo's qpos0 of the entry, the joint's `ref`: `qpos()` leaves it out "
                        "for the joints of a combination (Planar, Translational), which it reconstructs from the "
                        "bodies' poses (an importer issue, not of the dynamics)." if is_ref else "."))
    for r in results:
        if isinstance(r.get("ref_check"), float) and r["ref_check"] <= 1e-7:
            continue
        if "ref_check" not in r:
            continue
        hl = REF_H * r["damping_rate"]
        limit = ", past RK4's stability limit 2.785 on the negative real axis" if hl > 2.785 else ""
        lines.append(f"- {r['model']}: RK4 at h = {REF_H:g} is no reference (distance to h = {CHECK_H:g}: "
                     f"{fmt(r['ref_check'])}): its fastest damping rate {r['damping_rate']:.3g} 1/s (no armature) "
                     f"gives h·λ = {hl:.2f}{limit}; conserve's implicit step (Δt·λ = {DT * r['damping_rate']:.0f}) "
                     f"against the h = {CHECK_H:g} run: "
                     + (f"q − q(0) to {_vs(r)['joint_displacement']:.1e}." if _vs(r) else "not compared."))
    dyn = [r for r in compared if _vs(r).get("joint_displacement", 0.0) > TARGET or _vs(r).get("quat", 0.0) > TARGET]
    if dyn:
        parts = [f"{r['model']} {max(_vs(r).get('joint_displacement', 0.0), _vs(r).get('quat', 0.0)):.1e} "
                 f"(Δt·rate {DT * r['damping_rate']:.2g}, Δt·ω {DT * r['spring_omega']:.2g})" for r in dyn]
        lines.append("- Motion (q − q(0), quaternions) off by more than the target: " + "; ".join(parts) + ". Stiff "
                     "armature-free joints (Δt·rate or Δt·ω ≳ 1) are resolved coarsely by a fixed Δt = 2e-3.")
    elif compared:
        lines.append("- The motion itself (q − q(0), quaternions) agrees within the target on every compared model, "
                     f"also where the passive modes are stiff at Δt = {DT:g} (largest Δt·rate "
                     f"{max(DT * r['damping_rate'] for r in compared):.2g}, Δt·ω "
                     f"{max(DT * r['spring_omega'] for r in compared):.2g}); order 2 at the same Δt: "
                     f"{_span([r['order2'].get(f'vs_{CHECK_H:g}', {}).get('joint_displacement') for r in compared])} "
                     "in q − q(0).")
    ok = [r for r in results if "drift_rk4" in r]
    lines.append(f"- Energy, conservative variants: conserve order 2 drifts {_span([r['drift_conserve'] for r in ok])} "
                 f"(its balance error, with the dampers: {_span([r['order4'].get('balance') for r in ok])}); MuJoCo "
                 f"RK4 at the same h {_span([r['drift_rk4'] for r in ok])}; MuJoCo at the files' own settings "
                 f"{_span([r['drift_default'] for r in ok])} ("
                 + ", ".join(f"{r['model']} {fmt(r['drift_default'])} {r['integrator']} h = {r['timestep']:g}"
                             for r in ok) + ").")
    timed = [r for r in results if "us_per_step" in r.get("order4", {})]
    if timed:
        stable = [r for r in timed if r["mujoco_rk4_diverged_at"] is None]
        lines.append(f"- Cost: conserve order 4 {_span([r['order4']['us_per_step'] for r in timed], '.0f')} µs/step, "
                     f"{_span([r['order4']['us_per_step'] / r['mujoco_us_per_step'] for r in stable], '.0f')}× MuJoCo "
                     f"RK4 at the same h ({_span([r['mujoco_us_per_step'] for r in stable], '.1f')} µs/step"
                     + "".join(f"; {r['model']}: RK4 at h = {DT:g} diverges" for r in timed if r not in stable)
                     + f"); compilation {_span([r['order4']['compile_time'] for r in timed], '.1f')} s (order 4), "
                     f"{_span([r['order2'].get('compile_time') for r in timed], '.1f')} s (order 2) per model.")
    return lines


def header(args, mj):
    import gymnasium
    import jax

    commit = git_commit()
    importer = Path(cs.__file__).parent / "importers" / "mjcf.py"
    digest = hashlib.sha256(importer.read_bytes()).hexdigest()[:12]
    load = os.getloadavg()[0]
    argv = " ".join(sys.argv[1:])
    lines = ["# MuJoCo models imported: `cs.from_mjcf` on gymnasium's MJCF assets against MuJoCo RK4", ""]
    if load > 1.0:
        lines += [f"> **Measured under load**: a {os.cpu_count()}-core machine shared with other jobs (load "
                  f"average {load:.2f} at the start); another process may share the second core. Timings are "
                  "indicative; accuracy and energy numbers do not depend on it.", ""]
    lines += [f"`taskset -c 0 python benchmarks/mujoco_import.py{' ' + argv if argv else ''}`, pinned to CPU "
              f"{sorted(os.sched_getaffinity(0))}. {time.strftime('%Y-%m-%d', time.gmtime())}, "
              f"{cpu_name()}, {os.cpu_count()} cores (`nproc`), load average at start "
              f"{load:.2f} (1 min); conserve {cs.__version__} (git {commit}; conserve/importers/mjcf.py sha256 "
              f"{digest}…), jax {jax.__version__}, MuJoCo {mj.__version__}, gymnasium {gymnasium.__version__}; "
              f"persistent compilation cache {os.environ.get('CONSERVE_COMPILATION_CACHE', 'default')}.", "",
              "Each model: `like_conserve(spec)` (contacts and limits off, armature 0), from qpos0 with qvel = "
              f"{QVEL_SCALE:g} · N(0, 1) (`numpy.random.default_rng({SEED})`, rad/s, m/s), no control, T = {T:g} s. "
              f"conserve: `cs.simulate(system, t_end={T:g}, dt={DT:g}, order=4)` (and order 2), MuJoCo's qpos from "
              "`system.imported.qpos(sol)`. Reference: MuJoCo RK4 at h = 1e-4 and 5e-5. pusher_v5: bodies "
              "\"object\" and \"goal\" deleted, gravity (0, 0, −9.81) set (the file has none). humanoid: stiffness "
              "and damping of **all** joints set to 0 in the spec (its multi-hinge bodies map to Universal / "
              "Spherical joints, which have no per-hinge spring or damper). Details in the script's docstring.", ""]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--repeats", type=int, default=3, help="conserve order-4 runs per model (best µs/step kept)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    t_start = time.perf_counter()
    pin_to_core0()
    mj = import_mujoco()
    if mj is None:
        sys.exit("mujoco_import.py needs MuJoCo: pip install -e '.[import]'")
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    lines = header(args, mj)
    results = []
    for name in args.models:
        r = study(mj, name, args, log)
        results.append(r)
        failed = r.get("error") or r.get("order4", {}).get("error") or r.get("order4", {}).get("qpos_error")
        if failed and any(s in failed for s in ("used more than once", "Invalid name")):
            results.append(study(mj, name, args, log, complete_names=True))
    lines += tables(results)
    lines += ["## Observations", ""] + observations(results) + [""]
    importer = Path(cs.__file__).parent / "importers" / "mjcf.py"
    digest = hashlib.sha256(importer.read_bytes()).hexdigest()[:12]
    lines += [f"conserve/importers/mjcf.py sha256 at the end: {digest}…; "
              f"MuJoCo warnings during the run: {len(MUJOCO_WARNINGS)}"
              + (f" (first: {MUJOCO_WARNINGS[0].strip()[:120]})" if MUJOCO_WARNINGS else "") + ".", ""]
    if args.no_write:
        print("\n".join(lines))
        return
    OUT.parent.mkdir(exist_ok=True)
    OUT.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    write_report(OUT.with_suffix(".md"), lines, t_start)


if __name__ == "__main__":
    main()
