"""Benchmark: seconds to the first result — the README's heavy-top script as a fresh process, with
the persistent compilation cache cold, warm and off, against the same top in MuJoCo.

    python benchmarks/first_result.py     # writes benchmarks/results/first_result.md

Every case is a whole process (``python <script>``, started pinned to CPU 0 with ``taskset -c 0``,
wall time from the parent's start of the process to its exit), ``REPEATS`` times, the median and
the smallest reported:

* ``python -c "import conserve"`` and ``python -c "import jax"``;
* the README's heavy-top script (its first python block, read from README.md: 10⁴ steps of the P1
  top at Δt = 2e-3 and ``sol.summary()``), **cold**: a new, empty cache directory
  (``CONSERVE_COMPILATION_CACHE=<new directory>``) for every repetition; **warm**: the directory a
  cold run filled; **off**: ``CONSERVE_COMPILATION_CACHE=off``;
* MuJoCo (optional, ``pip install -e '.[bench]'``): ``import mujoco``, the same top as MJCF
  (benchmarks/heavy_top.py's ``mjcf``), RK4 at Δt = 2e-3, 10⁴ ``mj_step`` in Python — the
  shortest script a user writes for it.

Where the time of one cold and one warm run goes: the script instrumented in the child — the
import of jax (conserve's own import is light), the model's construction, and jax's own duration
events summed over every compilation of the process (``jax.monitoring``: tracing to jaxprs,
lowering to StableHLO, XLA's compilation or the cache's load), the rest of ``simulate`` (checks,
assembly, the steps, building the Solution) and the summary.

Targets of the issue: the script ≤ 2.0 s cold and ≤ 1.0 s warm; ``import conserve`` ≤ 0.6 s.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "first_result.md"
REPEATS = int(os.environ.get("REPEATS", 5))
TARGET_COLD, TARGET_WARM, TARGET_IMPORT = 2.0, 1.0, 0.6

#: prefix of the instrumented child: jax's duration events summed by name, phases timed
PROFILE = """
import json, sys, time
T = time.perf_counter
marks = {"start": T()}
import conserve as cs
marks["import conserve"] = T()
import jax
marks["import jax"] = T()
durations = {}
def _listen(event, seconds, **kwargs):
    durations[event] = durations.get(event, 0.0) + seconds
jax.monitoring.register_event_duration_secs_listener(_listen)
events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append(name.rsplit("/", 1)[-1]))
"""

MUJOCO = """
import mujoco, numpy as np
model = mujoco.MjModel.from_xml_string({xml!r})
data = mujoco.MjData(model)
data.qpos[:] = {qpos!r}
data.qvel[:] = {qvel!r}
for _ in range(10000):
    mujoco.mj_step(model, data)
print(data.qpos)
"""


def readme_script() -> str:
    """The README's first python block: the heavy-top model and its 10⁴-step run."""
    text = (ROOT / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def instrumented(script: str) -> str:
    """The script with phases timed: the model built (before ``sol = cs.simulate``), simulate,
    summary; prints the marks and jax's durations as JSON on its last line."""
    head, call, tail = script.partition("sol = cs.simulate(")
    call_line, _, rest = (call + tail).partition("\n")
    return (PROFILE + head + '\nmarks["model"] = T()\n' + call_line + '\nmarks["simulate"] = T()\n'
            + "_ = sol.summary()\nmarks['summary'] = T()\n"
            + "print(json.dumps({'marks': marks, 'durations': durations, 'hits': events.count('cache_hits'), "
              "'misses': events.count('cache_misses'), 'stats': {k: sol.stats[k] for k in "
              "('compile_time', 'run_time')}}))\n")


def process(code: str, env=None) -> tuple[float, str]:
    """(wall s, stdout) of ``python -c code`` started pinned to CPU 0, from the parent's view."""
    environment = {**os.environ, **(env or {})}
    tic = time.perf_counter()
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], env=environment, cwd=tempfile.gettempdir(),
                         capture_output=True, text=True, check=True)
    return time.perf_counter() - tic, out.stdout


def repeated(code: str, env_of) -> list[float]:
    """Wall times of REPEATS processes, ``env_of(k)`` the environment of the k-th."""
    return [process(code, env_of(k))[0] for k in range(REPEATS)]


def mujoco_code():
    """The MuJoCo script, or None without MuJoCo."""
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return None
    sys.path.insert(0, str(Path(__file__).parent))
    import numpy as np
    from heavy_top import initial_state, mjcf
    from scipy.spatial.transform import Rotation

    R0, omega, _ = initial_state()
    x, y, z, w = Rotation.from_matrix(R0).as_quat()
    return MUJOCO.format(xml=mjcf(2e-3, "RK4"), qpos=[float(v) for v in (w, x, y, z)],
                         qvel=[float(v) for v in np.asarray(R0).T @ omega])


def phases(record) -> list[tuple[str, float]]:
    """(phase, s) of an instrumented run, from its marks and jax's duration events."""
    m, d = record["marks"], record["durations"]
    trace = d.get("/jax/core/compile/jaxpr_trace_duration", 0.0)
    lower = d.get("/jax/core/compile/jaxpr_to_mlir_module_duration", 0.0)
    xla = d.get("/jax/core/compile/backend_compile_duration", 0.0)
    simulate = m["simulate"] - m["model"]
    return [("import conserve", m["import conserve"] - m["start"]),
            ("import jax", m["import jax"] - m["import conserve"]),
            ("build the model (numpy, first jax arrays)", m["model"] - m["import jax"]),
            ("simulate: tracing (jaxprs)", trace), ("simulate: lowering (StableHLO)", lower),
            ("simulate: XLA compilation or the cache's load", xla),
            ("simulate: the rest (checks, assembly, 10⁴ steps, the Solution)", simulate - trace - lower - xla),
            ("sol.summary()", m["summary"] - m["simulate"])]


def row(label, times, target=None):
    med, best = statistics.median(times), min(times)
    verdict = "" if target is None else (f"≤ {target:g} s: {'met' if med <= target else 'not met'}")
    return f"| {label} | {med:.2f} s | {best:.2f} s | {verdict} |"


def main():
    script = readme_script()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = lambda k: {"CONSERVE_COMPILATION_CACHE": f"{tmp}/cold{k}"}  # noqa: E731
        warm_dir = {"CONSERVE_COMPILATION_CACHE": f"{tmp}/warm"}
        process(script, warm_dir)  # fills the warm directory
        import_conserve = repeated("import conserve", lambda k: {})
        import_jax = repeated("import jax", lambda k: {})
        cold = repeated(script, fresh)
        warm = repeated(script, lambda k: warm_dir)
        off = repeated(script, lambda k: {"CONSERVE_COMPILATION_CACHE": "off"})
        profile_cold = json.loads(process(instrumented(script), {"CONSERVE_COMPILATION_CACHE": f"{tmp}/p"})[1]
                                  .splitlines()[-1])
        profile_warm = json.loads(process(instrumented(script), {"CONSERVE_COMPILATION_CACHE": f"{tmp}/p"})[1]
                                  .splitlines()[-1])
    mj = mujoco_code()
    mujoco = repeated(mj, lambda k: {}) if mj else None
    import jax
    import numpy

    lines = ["# Seconds to the first result", "",
             "Written by `python benchmarks/first_result.py` (see its docstring). Whole processes started "
             f"pinned to CPU 0, {REPEATS} of each; python {sys.version.split()[0]}, jax {jax.__version__}, "
             f"numpy {numpy.__version__}.", "",
             "| process | median | smallest | target |", "|---|---|---|---|",
             row("`python -c \"import conserve\"`", import_conserve, TARGET_IMPORT),
             row("`python -c \"import jax\"`", import_jax),
             row("README heavy-top script, cache cold (new directory)", cold, TARGET_COLD),
             row("README heavy-top script, cache warm", warm, TARGET_WARM),
             row("README heavy-top script, cache off", off)]
    if mujoco:
        lines.append(row("MuJoCo: import, the top as MJCF, 10⁴ RK4 steps", mujoco))
    lines += ["", "Where one run's time goes (the script instrumented in the child; jax's duration events summed "
              "over every compilation of the process):", "",
              "| phase | cold | warm |", "|---|---|---|"]
    for (name, a), (_, b) in zip(phases(profile_cold), phases(profile_warm)):
        lines.append(f"| {name} | {a:.3f} s | {b:.3f} s |")
    lines += [f"| (programs compiled / loaded from the cache) | {profile_cold['misses']} / {profile_cold['hits']} | "
              f"{profile_warm['misses']} / {profile_warm['hits']} |", "",
              f"`sol.stats`: compile_time {profile_cold['stats']['compile_time']:.2f} s cold, "
              f"{profile_warm['stats']['compile_time']:.2f} s warm; run_time "
              f"{profile_cold['stats']['run_time']:.3f} s (10⁴ steps)."]
    if mujoco:
        lines += ["", f"Script ÷ MuJoCo's: **{statistics.median(cold) / statistics.median(mujoco):.1f}×** cold, "
                  f"**{statistics.median(warm) / statistics.median(mujoco):.1f}×** warm."]
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
