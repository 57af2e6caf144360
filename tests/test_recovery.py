"""Step failure recovery (on_failure="subdivide"), checkpoints and resume (issue 7)."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import conserve as cs
from conserve import problems


@pytest.fixture(scope="module")
def top():
    return problems.HeavyTop().system().assemble()


def test_a_failed_step_is_retried_as_conserving_substeps(top):
    """With 3 Newton iterations a step of 0.05 s fails; subdivided it is 2^k steps of the same
    scheme: exact energy balance and constraints, and the nodes of a run at the sub-step."""
    newton = cs.Newton(max_iterations=3)
    with pytest.raises(cs.ConvergenceError, match="on_failure='subdivide'"):
        cs.simulate(top, 0.2, 0.05, newton=newton)
    sol = cs.simulate(top, 0.2, 0.05, newton=newton, on_failure="subdivide")
    k = int(sol.substeps[0])
    assert len(sol) == 5 and k > 1 and np.all(sol.substeps >= 2) and sol.stats["subdivided_steps"] == 4
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * abs(sol.energy.total[0])
    assert np.max(sol.constraint_residual) <= 1e-12
    fine = cs.simulate(top, 0.2, 0.05 / k)
    np.testing.assert_allclose(sol.q[1], fine.q[k], atol=1e-10)
    # without failures the recovering step is the plain one
    np.testing.assert_array_equal(cs.simulate(top, 0.1, 1e-3, on_failure="subdivide").q, cs.simulate(top, 0.1, 1e-3).q)


def test_a_step_that_fails_even_subdivided_raises_with_the_partial_solution(top):
    with pytest.raises(cs.ConvergenceError, match="sub-steps") as err:
        cs.simulate(top, 0.2, 0.05, newton=cs.Newton(max_iterations=2), on_failure="subdivide", max_subdivisions=1)
    assert err.value.step == 0 and len(err.value.partial_solution) == 1


def test_resume_continues_bit_for_bit(top, tmp_path):
    whole = cs.simulate(top, 0.3, 1e-3, checkpoint=tmp_path / "a", checkpoint_every=64)
    again = cs.resume(tmp_path / "a")  # a finished run resumes to itself
    for key in ("q", "v", "multipliers", "newton_iterations"):
        np.testing.assert_array_equal(getattr(again, key), getattr(whole, key))


def test_resume_needs_the_same_system(tmp_path):
    crane = problems.RotaryCrane().system("hybrid")  # holds lambdas: cannot be pickled
    sol = cs.simulate(crane, 0.05, 1e-2, checkpoint=tmp_path / "c")
    with pytest.raises(cs.ModelError, match="pass the same system"):
        cs.resume(tmp_path / "c")
    np.testing.assert_array_equal(cs.resume(tmp_path / "c", crane).q, sol.q)
    with pytest.raises(cs.ModelError, match="not the one"):
        cs.resume(tmp_path / "c", problems.RotaryCrane(m_load=20.0).system("hybrid"))
    with pytest.raises(cs.ModelError, match="no checkpoint"):
        cs.resume(tmp_path / "nothing")


SCRIPT = """
import sys, time
import conserve as cs
from conserve import problems
cs.simulate(problems.HeavyTop().system(), 2.0, 1e-3, checkpoint=sys.argv[1], checkpoint_every=100,
            progress=lambda n, total: time.sleep(0.2))
"""


def test_a_killed_run_resumes_to_the_same_end_state(top, tmp_path):
    """Kill a run (SIGKILL, mid-way) and resume it from its checkpoint: the end state is
    bit-identical to the run that was not interrupted."""
    path = tmp_path / "run"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(path)])
    try:
        done, deadline = 0, time.monotonic() + 300
        while done < 500 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                with np.load(path / "run.npz") as f:
                    done = json.loads(str(f["meta"]))["n"]
            except (FileNotFoundError, OSError, ValueError, KeyError):
                pass  # not written yet
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert 500 <= done < 2000, "the run was not killed mid-way"
    resumed = cs.resume(path)
    whole = cs.simulate(top, 2.0, 1e-3, checkpoint=tmp_path / "whole", checkpoint_every=100)
    assert len(resumed) == len(whole) == 2001
    for key in ("q", "v", "p", "multipliers"):
        np.testing.assert_array_equal(getattr(resumed, key), getattr(whole, key))
