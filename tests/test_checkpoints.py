"""Checkpoints and resume (issue 14): no lost runs, no spliced runs, no foreign code.

A directory holding a run is not overwritten unless asked; a directory in use is refused;
every piece carries its run id, index and node range and is checksummed, and resume verifies
the whole chain before taking a step; the model's laws are part of its fingerprint; corrupt or
foreign files get a clear error and are never unpickled. The last test kills two runs in two
directories at random moments (start-up, mid-run, mid-write) and resumes them until they finish:
bit-identical to runs never interrupted."""

import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve.run import checkpoint as checkpoints
from conserve import problems


@pytest.fixture(scope="module")
def top():
    return problems.HeavyTop().system().assemble()


@pytest.fixture(scope="module")
def run(top, tmp_path_factory):
    """A finished 300-step run in 6 pieces (nodes 0 | 1…64 | … | 257…300), and its Solution."""
    path = tmp_path_factory.mktemp("ckpt") / "run"
    return path, cs.simulate(top, 0.3, 1e-3, checkpoint=path, checkpoint_every=64)


@pytest.fixture(scope="module")
def other_run(top, tmp_path_factory):
    """Another run of the same system and settings: its pieces are foreign to ``run``."""
    path = tmp_path_factory.mktemp("ckpt") / "other"
    cs.simulate(top, 0.3, 1e-3, checkpoint=path, checkpoint_every=64)
    return path


def copy(path, tmp_path, name="copy"):
    target = tmp_path / name
    shutil.copytree(path, target)
    return target


def pieces(path):
    return sorted(Path(path).glob("piece-*.npz"))


def test_resume_continues_bit_for_bit(top, run, tmp_path):
    path, whole = run
    again = cs.resume(copy(path, tmp_path), top)  # a finished run resumes to itself
    for key in ("q", "v", "multipliers", "newton_iterations"):
        np.testing.assert_array_equal(getattr(again, key), getattr(whole, key))


def test_resume_needs_the_same_system(tmp_path):
    crane = problems.RotaryCrane().system("hybrid")
    sol = cs.simulate(crane, 0.05, 1e-2, checkpoint=tmp_path / "c")
    with pytest.raises(cs.ModelError, match=r"pass the system.*stores arrays, not code"):
        cs.resume(tmp_path / "c")
    np.testing.assert_array_equal(cs.resume(tmp_path / "c", problems.RotaryCrane().system("hybrid")).q, sol.q)
    with pytest.raises(cs.ModelError, match="not the one.*its parameters"):
        cs.resume(tmp_path / "c", problems.RotaryCrane(m_load=20.0).system("hybrid"))
    with pytest.raises(cs.ModelError, match="no checkpoint"):
        cs.resume(tmp_path / "nothing")


def test_a_run_in_the_directory_is_not_replaced_unless_asked(top, run, tmp_path):
    path = copy(run[0], tmp_path)
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with pytest.raises(cs.ModelError, match=r"already holds a checkpointed run.*cs\.resume.*overwrite=True"):
        cs.simulate(problems.free_body(), 0.1, 1e-2, checkpoint=path)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before  # nothing lost
    replaced = cs.simulate(problems.free_body(), 0.1, 1e-2, checkpoint=path, overwrite=True)
    assert len(pieces(path)) == 2  # the old run's six pieces are gone
    np.testing.assert_array_equal(cs.resume(path, problems.free_body()).q, replaced.q)


def test_a_directory_in_use_is_refused(top, run, tmp_path):
    path = copy(run[0], tmp_path)
    held = checkpoints._lock(path, "another run")  # as a live writer holds it
    try:
        with pytest.raises(cs.ModelError, match="in use by another run"):
            cs.resume(path, top)
        with pytest.raises(cs.ModelError, match="in use by another run"):
            cs.simulate(top, 0.1, 1e-3, checkpoint=path, overwrite=True)
    finally:
        held.close()
    cs.resume(path, top)  # free again


def _rewrite_run_record(path, edit):
    with np.load(path / "run.npz") as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(str(arrays["meta"]))
    edit(meta)
    arrays["meta"] = json.dumps(meta)
    np.savez(path / "run.npz", **arrays)


def _swap(path):
    a, b = pieces(path)[2:4]
    tmp = a.with_suffix(".swap")
    a.rename(tmp), b.rename(a), tmp.rename(b)


def _foreign(path, other, record=False):
    """Another run's piece 3 in place of ours (and, with ``record``, its checksum in our record)."""
    target = pieces(path)[3]
    shutil.copy(pieces(other)[3], target)
    if record:
        digest = checkpoints._sha256(target)
        _rewrite_run_record(path, lambda m: m["pieces"][3].update(sha256=digest))


@pytest.mark.parametrize("damage, words", [
    (lambda path, other: _swap(path), "checksum differs"),
    (lambda path, other: _foreign(path, other), "checksum differs"),
    (lambda path, other: pieces(path)[2].unlink(), "missing"),
    (lambda path, other: pieces(path)[4].write_bytes(pieces(path)[4].read_bytes()[:300]), "checksum differs"),
    (lambda path, other: _rewrite_run_record(path, lambda m: m["pieces"].pop(2)), "do not chain"),
    (lambda path, other: _rewrite_run_record(path, lambda m: m.update(n=m["n"] + 64)), "end at node"),
    (lambda path, other: _rewrite_run_record(path, lambda m: m["pieces"][2].update(start=60)), "do not chain"),
    (lambda path, other: _foreign(path, other, record=True), "belongs to another run"),
], ids=["swapped", "foreign", "missing", "truncated", "gap", "short", "overlap", "foreign-recorded"])
def test_resume_refuses_a_broken_chain(top, run, other_run, tmp_path, damage, words):
    """Swapped, foreign (same system, another run), missing, truncated pieces and records that
    leave a gap or overlap are refused before any step is taken."""
    path = copy(run[0], tmp_path)
    damage(path, other_run)
    with pytest.raises(cs.ModelError, match=words):
        cs.resume(path, top)


def test_a_crash_mid_write_leaves_a_resumable_run(top, tmp_path):
    """What a kill during a write leaves: the next piece written but the run record not yet (it
    still lists the earlier pieces), and a half-written temporary file. Resume continues from the
    record, rewrites that piece and ends bit-identical to the run that was not interrupted."""
    path, snapshot = tmp_path / "run", tmp_path / "snapshot"

    def progress(n, total):
        if n == 128:  # the record after pieces 0, 1, 2
            shutil.copytree(path, snapshot)

    whole = cs.simulate(top, 0.3, 1e-3, checkpoint=path, checkpoint_every=64, progress=progress)
    piece3 = pieces(path)[3]
    shutil.copy(piece3, snapshot / piece3.name)  # written, not yet recorded
    (snapshot / ".run.npz.4242.deadbeef.tmp").write_bytes(b"PK\x03\x04 half a file")
    resumed = cs.resume(snapshot, top)
    for key in ("q", "v", "multipliers", "newton_iterations"):
        np.testing.assert_array_equal(getattr(resumed, key), getattr(whole, key))


def gain_system(gain, extra=None):
    """A free body with a torque law: the law's gain lives in a closure."""
    body = cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5), angular_velocity=(0.1, 0.2, 0.3))
    k = gain

    def law(t, state):
        return k * jnp.array([jnp.sin(t), 0.0, 0.0]) + (0.0 if extra is None else 0.0 * len(extra.args))

    return cs.System([body, cs.Torque(body, law, name="actuator")])


def test_resume_checks_the_laws(tmp_path):
    """The fingerprint covers the laws' code and the values they close over: a changed gain is
    refused (before: accepted, and the run went on with another law); trust_laws=True skips it."""
    sol = cs.simulate(gain_system(0.05), 0.05, 1e-2, checkpoint=tmp_path / "a")
    with pytest.raises(cs.ModelError, match="its laws"):
        cs.resume(tmp_path / "a", gain_system(0.06))
    np.testing.assert_array_equal(cs.resume(tmp_path / "a", gain_system(0.05)).q, sol.q)
    cs.resume(tmp_path / "a", gain_system(0.06), trust_laws=True)


def test_laws_whose_state_cannot_be_read_need_trust(tmp_path):
    opaque = type("Holder", (), {"args": ()})()
    system = gain_system(0.05, extra=opaque)
    cs.simulate(system, 0.05, 1e-2, checkpoint=tmp_path / "a")
    cs.resume(tmp_path / "a", system)  # a plain object: its __dict__ is fingerprinted
    from conserve.run.fingerprint import fingerprint

    body = cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5))
    handle = iter(())  # an iterator: no readable state
    law = lambda t, state, h=handle: jnp.zeros(3)  # noqa: E731
    system = cs.System([body, cs.Torque(body, law, name="actuator")])
    assert fingerprint(system.assemble())["opaque"]
    cs.simulate(system, 0.05, 1e-2, checkpoint=tmp_path / "b")
    with pytest.raises(cs.ModelError, match="cannot be checked.*trust_laws=True"):
        cs.resume(tmp_path / "b", system)
    cs.resume(tmp_path / "b", system, trust_laws=True)


class Payload:
    """Unpickling it would create a marker file: the proof that a file was executed."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.mark.parametrize("content", ["garbage", "pickle", "object array", "npz without records", "truncated"])
def test_corrupt_or_foreign_files_get_a_clear_error_and_are_never_unpickled(top, run, tmp_path, content):
    marker = tmp_path / "executed"
    target = tmp_path / "file.npz"
    if content == "garbage":
        target.write_bytes(os.urandom(1000))
    elif content == "pickle":
        target.write_bytes(pickle.dumps(Payload(marker)))
    elif content == "object array":
        np.savez(target, meta=np.array([Payload(marker)], dtype=object))
    elif content == "npz without records":
        np.savez(target, q=np.zeros(3))
    else:
        run[1].save(target)
        target.write_bytes(target.read_bytes()[:2000])
    with pytest.raises(cs.FileError) as err:
        cs.Solution.load(target)
    assert "allow_pickle" not in str(err.value) and str(target) in str(err.value)
    # the same file as a checkpoint's run record
    path = copy(run[0], tmp_path)
    shutil.copy(target, path / "run.npz")
    with pytest.raises(cs.FileError) as err:
        cs.resume(path, top)
    assert "allow_pickle" not in str(err.value)
    assert not marker.exists()


WORKER = """
import sys, time
import conserve as cs
from conserve import problems
which, path, mode = sys.argv[1:4]
system = problems.HeavyTop().system() if which == "top" else problems.free_body()
slow = lambda n, total: time.sleep(0.25)  # 40 chunks: >= 10 s of stepping per whole run
if mode == "start":
    cs.simulate(system, 1.0, 1e-3, checkpoint=path, checkpoint_every=25, progress=slow, overwrite=False)
else:
    cs.resume(path, system, progress=slow)
"""


@pytest.mark.slow
def test_runs_killed_at_random_moments_in_two_directories_resume_bit_for_bit(tmp_path):
    """Two runs (a heavy top and a free body) in two directories, each killed with SIGKILL at
    random moments (during start-up, compilation, stepping or a checkpoint write) and resumed
    until it finishes; meanwhile an intruder tries to start a run in a directory in use. Every
    run ends bit-identical to one that was never interrupted: nothing lost, nothing spliced."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    rng = random.Random(14)
    dirs = {"top": tmp_path / "top", "free": tmp_path / "free"}
    procs, kills, intruder_refused = {}, {k: 0 for k in dirs}, False
    deadline = time.monotonic() + 400

    def launch(which):
        mode = "resume" if (dirs[which] / "run.npz").exists() else "start"
        proc = subprocess.Popen([sys.executable, str(script), which, str(dirs[which]), mode],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # a launch lives at most 5 s, so it steps at most 20 of the 40 chunks: each run is killed at
        # least twice whatever start-up costs (with a warm compilation cache start-up is short)
        return proc, time.monotonic() + rng.uniform(1.0, 5.0)

    for which in dirs:
        procs[which] = launch(which)
    done = set()
    while len(done) < len(dirs) and time.monotonic() < deadline:
        time.sleep(0.02)
        for which, (proc, kill_at) in list(procs.items()):
            if which in done:
                continue
            if proc.poll() is not None:
                out, err = proc.communicate()
                assert proc.returncode == 0, err[-2000:]
                done.add(which)
            elif time.monotonic() >= kill_at and kills[which] < 6:
                if not intruder_refused and (dirs[which] / "run.npz").exists():
                    intruder = subprocess.run([sys.executable, str(script), "free", str(dirs[which]), "start"],
                                              capture_output=True, text=True)
                    assert intruder.returncode != 0
                    assert "in use by another run" in intruder.stderr or "already holds" in intruder.stderr
                    intruder_refused = "in use by another run" in intruder.stderr
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills[which] += 1
                procs[which] = launch(which)
    assert done == set(dirs), f"runs did not finish ({kills} kills)"
    assert sum(kills.values()) >= 4
    for which, system in (("top", problems.HeavyTop().system()), ("free", problems.free_body())):
        resumed = cs.resume(dirs[which], system)  # the finished run, read back and verified
        whole = cs.simulate(system, 1.0, 1e-3, checkpoint=tmp_path / f"whole-{which}", checkpoint_every=25)
        for key in ("q", "v", "multipliers", "newton_iterations"):
            np.testing.assert_array_equal(getattr(resumed, key), getattr(whole, key))


#: A user's module and class whose attributes laws read (``cfg.GAIN``-style settings)
settings = types.ModuleType("settings_of_a_user")
settings.GAIN = 1.0


class Settings:
    gain = 1.0


def test_laws_reading_another_modules_or_a_class_attribute_see_its_changes(monkeypatch, tmp_path):
    """Systems built alike share their laws (and compiled code) when the laws compute the same: a
    law reading a module's attribute or a class attribute computes something else when it changed
    (before: the first system's law ran on with the old gain, and a resumed run took the new one
    as unchanged). A constant torque τ about the principal axis e1 (J = 1) of a body at rest spins
    it up to ω1 = τ t."""
    def build():
        body = cs.RigidBody("plate", mass=1.0, inertia=(1.0, 2.0, 2.5))
        law = lambda t, state: jnp.array([settings.GAIN + Settings.gain, 0.0, 0.0])  # noqa: E731
        return cs.System([body, cs.Torque(body, law, name="actuator")])

    T = 0.02
    for gain, change in [(1.0, None), (2.0, "module"), (3.0, "class")]:
        if change == "module":
            monkeypatch.setattr(settings, "GAIN", gain)
        elif change == "class":
            monkeypatch.setattr(Settings, "gain", gain)
        omega = cs.simulate(build(), T, 1e-3, checkpoint=tmp_path / str(gain))["plate"].angular_velocity[-1]
        np.testing.assert_allclose(omega, [(settings.GAIN + Settings.gain) * T, 0.0, 0.0], atol=1e-12)
    with pytest.raises(cs.ModelError, match="its laws"):  # run with gains 1 + 1, settings now 2 + 3
        cs.resume(tmp_path / "1.0", build())
