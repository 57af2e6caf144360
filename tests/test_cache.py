"""The persistent compilation cache (conserve.cache): a second process running the same model
structure loads the compiled step instead of compiling it, and computes the same numbers."""

import json
import os
import subprocess
import sys

RUN = """
import json, sys
import jax
events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append(name.rsplit("/", 1)[-1]))
import conserve as cs
body = cs.RigidBody("body", 1.0, (1.0, 2.0, 3.0), angular_velocity=(0.3, 2.0, 0.1))
sol = cs.simulate(cs.System([body]), 0.5, 1e-2)
print(json.dumps({"hits": events.count("cache_hits"), "misses": events.count("cache_misses"),
                  "q": sol.q[-1].tolist(), "dir": cs.cache.compilation_cache_directory()}))
"""


def _run(directory):
    env = {**os.environ, "CONSERVE_COMPILATION_CACHE": str(directory)}
    out = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_step_and_computes_the_same(tmp_path):
    first = _run(tmp_path / "jax")
    assert first["dir"] == str(tmp_path / "jax") and first["misses"] > 10
    assert any((tmp_path / "jax").iterdir())
    second = _run(tmp_path / "jax")
    # everything the first process compiled (the step's chunk, diagnostics, helpers) is loaded
    assert second["misses"] == 0 and second["hits"] >= first["misses"]
    assert second["q"] == first["q"]  # bit-identical
