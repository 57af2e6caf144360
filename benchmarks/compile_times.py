"""Benchmark: what a model structure costs before its first step — compilation of every model in
``conserve.problems``, of a user's system (a 6-axis arm with a PD motor law of each joint's own,
:func:`robot_arm`) and of the N-link spherical chains (N = 32, 64) with the director and reduced
backends, each in a fresh process (no persistent compilation cache, no code compiled by another
model), pinned to one core.

    taskset -c 0 python benchmarks/compile_times.py [--chains 32 64] [--modes auto quick optimized]

Per model and backend: ``sol.stats['compile_time']`` of the first ``simulate`` call (tracing,
lowering and XLA's compilation of the run's compiled chunk and of its nodes' diagnostics: what the
issue's target of ≤ 5 s measures), the wall time of ``assemble()`` and of that first ``simulate`` (10 steps, including
structure detection, the first node's diagnostics and the steps), for each code generation
(``simulate(..., compile=...)``, :mod:`conserve.compilation`): "auto", the default (a run this short
compiles unoptimized), "quick" (what "auto" takes for runs of more than 10⁵ unknown-steps) and
"optimized".
Writes benchmarks/results/compile_times.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results"
TARGET = 5.0  # s, the bound on a structure's compilation

#: name -> expression building the System (evaluated in the child with conserve.problems imported)
MODELS = {
    "P1 heavy top": "heavy_top()",
    "P2 free body": "free_body()",
    "P3a spacecraft, hybrid wheels": "spacecraft('hybrid')",
    "P3a spacecraft, full-body wheels": "spacecraft('body')",
    "P4 spacecraft, hybrid": "p4_spacecraft('hybrid')",
    "P5 crane, hybrid winch": "RotaryCrane().system('hybrid')",
    "P5 crane, full-body winch": "RotaryCrane().system('body')",
    "P6 Thompson pendulum": "ThompsonPendulum().system()",
    "P7 double four-bar": "double_four_bar()",
    "double pendulum": "double_pendulum()",
    "slider-crank": "slider_crank()",
    **{f"P8 {name}": f"thompson_examples()[{name!r}][0]" for name in
       ("aircraft", "pendulum", "satellite", "connected joints", "rotorcraft", "wind turbine")},
    "6-axis arm, joint motors": "robot_arm()",
}


def robot_arm(n=6):
    """A user's system: an n-link arm standing on the ground, revolute joints about alternating
    axes, each driven by a PD motor tracking a sinusoid of its own (its law a closure with its
    own constants: the motors are one kind with a law table, ``conserve.model.lawtable``),
    under gravity."""
    import jax.numpy as jnp
    import numpy as np

    import conserve as cs

    axes = [(0, 0, 1), (0, 1, 0), (0, 1, 0), (1, 0, 0), (0, 1, 0), (1, 0, 0)]
    elements, previous, top, length = [], cs.ground, np.zeros(3), 0.4
    for i in range(n):
        link = cs.RigidBody(f"link{i}", mass=2.0 - 0.2 * i, inertia=(0.03, 0.03, 0.005),
                            position=top + [0.0, 0.0, length / 2])
        joint = cs.Revolute(previous, link, at=top, axis=axes[i % len(axes)], name=f"joint{i}")

        def pd(t, joint, amplitude=0.5, rate=1.0 + 0.3 * i):
            return (200.0 * (amplitude * jnp.sin(rate * t) - joint.value)
                    + 10.0 * (amplitude * rate * jnp.cos(rate * t) - joint.rate))

        elements += [link, joint, cs.JointMotor(joint, pd, name=f"motor{i}")]
        previous, top = link, top + [0.0, 0.0, length]
    return cs.System([*elements, cs.Gravity((0, 0, -9.81))])

CHILD = """
import json, sys, time
sys.path.insert(0, {bench!r})
tic = time.perf_counter()
import conserve as cs
from conserve.problems import *
from chain_scaling import chain
from compile_times import robot_arm
imported = time.perf_counter() - tic
system = eval({expr!r})
tic = time.perf_counter()
assembly = system.assemble()
assembled = time.perf_counter() - tic
tic = time.perf_counter()
sol = cs.simulate(assembly, 10 * {dt!r}, {dt!r}, backend={backend!r}, compile={mode!r})
first = time.perf_counter() - tic
print(json.dumps({{"import": imported, "assemble": assembled, "first": first, "code": sol.stats["compile"],
                   "compile": sol.stats["compile_time"], "unknowns": sol.stats["unknowns"]}}))
"""


def measure(expr, backend, mode, dt=1e-3):
    env = {**{k: v for k, v in os.environ.items() if "COMPILATION_CACHE" not in k},
           "CONSERVE_COMPILATION_CACHE": "off"}
    code = CHILD.format(bench=str(Path(__file__).parent), expr=expr, dt=dt, backend=backend, mode=mode)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, nargs="*", default=[32, 64])
    parser.add_argument("--modes", nargs="*", default=["auto", "quick", "optimized"],
                        choices=["auto", "unoptimized", "quick", "optimized"])
    parser.add_argument("--models", nargs="*", default=None, help="a subset of the model names")
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})  # children inherit the pinning
    models = {k: v for k, v in MODELS.items() if args.models is None or k in args.models}
    models.update({f"{n}-link chain": f"chain({n})" for n in args.chains})
    tic = time.perf_counter()
    rows = []
    for name, expr in models.items():
        for backend in ("director", "reduced"):
            row = {"model": name, "backend": backend}
            for mode in args.modes:
                row[mode] = measure(expr, backend, mode)
                print(name, backend, mode, row[mode], flush=True)
            rows.append(row)
    write(rows, args.modes, time.perf_counter() - tic)


def write(rows, modes, wall):
    import platform

    import jax

    import conserve

    lines = ["# Compile times: every model of conserve.problems, a 6-axis arm and the N-link chains", "",
             f"`taskset -c 0 python benchmarks/compile_times.py` — each model and backend in a fresh process "
             f"(no persistent compilation cache), pinned to CPU 0; {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, conserve {conserve.__version__}, jax {jax.__version__}.", "",
             "compile = `sol.stats['compile_time']` of the first `simulate` (tracing, lowering and XLA's compilation "
             "of the run's chunk and of what its loop compiles on first use, its nodes' diagnostics; the target: "
             "≤ 5 s); first call = wall time of that `simulate` (10 steps of 1 ms, "
             "with structure detection and the first node's diagnostics); assemble = `system.assemble()` (checks "
             "compiled there). Code generation (`simulate(..., compile=...)`, `conserve/compilation.py`): 'auto', "
             "the default, which compiles a run this short unoptimized (LLVM -O0) and runs of more than 10⁵ "
             "unknown-steps (steps × director unknowns) as 'quick'; 'quick' (LLVM -O1, classic emitters); "
             "'optimized' (XLA's defaults).", ""]
    head = "| model | backend | unknowns |" + "".join(f" compile {m} [s] | first call {m} [s] |" for m in modes)
    lines += [head + " assemble [s] |", "|" + "---|" * (3 + 2 * len(modes) + 1)]
    worst = {m: (0.0, "") for m in modes}
    for row in rows:
        first = row[modes[0]]
        if "error" in first:
            lines.append(f"| {row['model']} | {row['backend']} | — |" + " failed: " + first["error"][:80] + " |")
            continue
        cells = ""
        for m in modes:
            r = row[m]
            cells += f" {r['compile']:.2f}{'' if r['code'] == m else ' (' + r['code'] + ')'} | {r['first']:.2f} |"
            if r["compile"] > worst[m][0]:
                worst[m] = (r["compile"], f"{row['model']} ({row['backend']})")
        lines.append(f"| {row['model']} | {row['backend']} | {first['unknowns']} |{cells} {first['assemble']:.2f} |")
    lines += [""]
    for m in modes:
        ok = [row for row in rows if "error" not in row[m]]
        over = [f"{row['model']} ({row['backend']}) {row[m]['compile']:.1f} s" for row in ok
                if row[m]["compile"] > TARGET]
        lines.append(f"- {m}: largest compile time {worst[m][0]:.2f} s, {worst[m][1]}; "
                     + (f"above {TARGET:g} s: {', '.join(over)}." if over else f"every model ≤ {TARGET:g} s (met)."))
    lines += ["", f"Benchmark wall time: {wall:.0f} s."]
    OUT.mkdir(exist_ok=True)
    (OUT / "compile_times.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
