"""Checkpoints of long runs (``simulate(..., checkpoint=path)``) and :func:`conserve.resume`.

A checkpoint is a directory:

- ``piece-<run id>-<k>.npz``: the nodes, per-step records and diagnostics of the k-th stretch
  of the run, nodes ``start … stop − 1`` (piece 0: the initial node), stamped with the run id, k
  and that range; written once, never rewritten, so checkpointing costs the same at any length;
- ``run.npz``: what the time loop needs to go on — the run id, settings, the step count n, the
  carried state and multipliers at t_n, and the chain of pieces (file, node range, sha256) — and
  the model's fingerprint (:mod:`conserve.run.fingerprint`: structure, numbers and the laws' code);
- ``lock``: held (``flock``) by the process writing the run; the operating system releases it
  when that process ends, however it ends.

Every file is written to a temporary name unique to the writer and renamed over the old one
(atomic on POSIX), and ``run.npz`` only after its piece, so a crash at any moment leaves the
last complete checkpoint: a killed run loses at most the steps since then. Resume checks
everything before a step is taken — the format, the model against the fingerprint, each piece
against its checksum, run id and range, and that the ranges chain from node 0 to n without gap
or overlap — so a stale, swapped, foreign or corrupt file is refused with a message, never
spliced into the run. Nothing is unpickled: a checkpoint holds arrays and JSON only, so the
system is passed again to :func:`conserve.resume`. The carried state is stored exactly
(float64) and the loop goes on with the same compiled chunk, so a resumed run is bit-for-bit
the run that was not interrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import Carry, StepBackend
from ..errors import FileError, ModelError
from ..model.assembled import State
from ..results.files import json_record, load_npz
from .fingerprint import fingerprint

try:  # POSIX advisory locks; elsewhere a directory is not protected against a second writer
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

#: Version of the checkpoint layout (2: run ids, checksummed chain of pieces, no pickle).
FORMAT_VERSION = 2

RUN = "run.npz"


def _piece_name(run_id, k):
    return f"piece-{run_id}-{k:06d}.npz"


def _atomic_savez(path: Path, **arrays) -> str:
    """Write ``arrays`` to ``path`` through a temporary name of this writer; returns the file's sha256."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        digest = _sha256(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return digest


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _lock(path: Path, who):
    """Hold the directory's lock for this process (released by close() or when the process ends)."""
    handle = open(path / "lock", "a+")
    if fcntl is not None:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip()
            handle.close()
            raise ModelError(f"{who}: the checkpoint directory {path} is in use by another run "
                             f"({owner or 'a process'}); "
                             "wait for it to finish, or give this run its own directory.") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"process {os.getpid()}")
    handle.flush()
    return handle


def close(ckpt):
    """Release the directory's lock (idempotent)."""
    if ckpt is not None and not ckpt["lock"].closed:
        ckpt["lock"].close()


def start(path, assembly, settings: dict, overwrite=False):
    """Open the checkpoint directory ``path`` for a new run. A run already there is refused
    unless ``overwrite`` (then its files are removed)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ModelError(f"simulate: checkpoint={str(path)!r} is a file, not a directory; give a directory (it is "
                         "created) for the run's pieces.") from None
    except OSError as err:
        raise ModelError(f"simulate: the checkpoint directory {str(path)!r} cannot be created ({err.strerror}); give "
                         "a directory this process can write.") from None
    lock = _lock(path, "simulate")
    try:
        if (path / RUN).exists():
            if not overwrite:
                raise ModelError(f"simulate: {path} already holds a checkpointed run; continue it with "
                                 f"cs.resume({str(path)!r}, system), or pass overwrite=True to replace it.")
            for old in [path / RUN, *path.glob("piece-*.npz"), *path.glob(".*.tmp")]:
                old.unlink()
    except BaseException:
        lock.close()
        raise
    return {"path": path, "run_id": uuid.uuid4().hex[:12], "settings": settings, "fingerprint": fingerprint(assembly),
            "pieces": [], "lock": lock}


def write(ckpt, n, carry, piece):
    """Append ``piece`` (a dict of arrays: the nodes after the last piece's, up to t_n) and record
    the carried ``carry`` (a dict of arrays) at step ``n``."""
    k = len(ckpt["pieces"])
    start = ckpt["pieces"][-1]["stop"] if k else 0
    stop = n + 1
    name = _piece_name(ckpt["run_id"], k)
    stamp = json.dumps({"run_id": ckpt["run_id"], "index": k, "start": start, "stop": stop})
    digest = _atomic_savez(ckpt["path"] / name, piece_meta=stamp, **piece)
    ckpt["pieces"].append({"file": name, "start": start, "stop": stop, "sha256": digest})
    meta = {"format_version": FORMAT_VERSION, "run_id": ckpt["run_id"], "settings": ckpt["settings"], "n": int(n),
            "pieces": ckpt["pieces"], "fingerprint": ckpt["fingerprint"]}
    _atomic_savez(ckpt["path"] / RUN, meta=json.dumps(meta), **{f"carry_{k}": v for k, v in carry.items()})


def read(path, system, trust_laws=False):
    """(assembly, settings, n, carry, pieces, ckpt) of the checkpoint directory ``path``, each
    piece verified (see the module docstring); the directory is locked for the caller."""
    from ..model.assembled import State
    from ..model.system import as_assembly

    path = Path(path)
    who = "resume"
    if not (path / RUN).exists():
        raise ModelError(f"resume: {path} holds no checkpoint (no {RUN}); was the run started with "
                         "simulate(..., checkpoint=path) and did it reach its first checkpoint?")
    if system is None:
        raise ModelError(f"resume: pass the system the run in {path} was started with, resume(path, system): a "
                         "checkpoint stores arrays, not code (loading code from a file could run anything), and the "
                         "system is checked against the stored fingerprint.")
    lock = _lock(path, who)
    try:
        run = load_npz(path / RUN, who)
        meta = json_record(run, "meta", path / RUN, who)
        if meta.get("format_version") != FORMAT_VERSION:
            raise FileError(f"resume: {path / RUN} has format version {meta.get('format_version')}, this conserve "
                            "reads "
                             f"{FORMAT_VERSION}; rerun it with simulate(..., checkpoint=path, overwrite=True).")
        assembly = as_assembly(system, who)
        try:
            _check_fingerprint(meta["fingerprint"], fingerprint(assembly), path, trust_laws)
            pieces = _verified_pieces(path, meta)
            carry = {k[6:]: run[k] for k in (*(f"carry_{f}" for f in State._fields), "carry_lam")}
            carry.update({k[6:]: run[k] for k in run if k.startswith(("carry_memory", "carry_trend"))})
            n, settings = int(meta["n"]), dict(meta["settings"])
        except ModelError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
            raise FileError(f"resume: the records of {path} are malformed ({type(err).__name__}: {err}); not a "
                            "checkpoint this conserve wrote.") from None
    except BaseException:
        lock.close()
        raise
    ckpt = {"path": path, "run_id": meta["run_id"], "settings": meta["settings"], "fingerprint": meta["fingerprint"],
            "pieces": meta["pieces"], "lock": lock}
    return assembly, settings, n, carry, pieces, ckpt


def _check_fingerprint(stored, given, path, trust_laws):
    what = {"structure": "its structure (parts, joints, forces)", "parameters": "its parameters",
            "initial_state": "its initial state", "laws": "its laws (motor, force, constraint or potential functions)"}
    differ = [what[k] for k in what if stored.get(k) != given[k] and not (k == "laws" and trust_laws)]
    if differ:
        raise ModelError(f"resume: the system given is not the one {path} was run with: {', '.join(differ)} "
                         "differ; pass the same system as to simulate"
                         + ("" if trust_laws else " (if only the laws' code moved and you are sure it computes the "
                            "same, trust_laws=True skips their check)") + ".")
    if stored.get("opaque") and not trust_laws:
        raise ModelError(f"resume: the run in {path} has laws that hold {', '.join(stored['opaque'])}, whose state "
                         "cannot be read, so it cannot be checked that they are unchanged; if they are, pass "
                         "trust_laws=True.")


def _verified_pieces(path, meta):
    """The pieces' arrays, after checking checksum, run id, index and the chain of node ranges."""
    who = "resume"
    pieces, expected = [], 0
    for k, entry in enumerate(meta["pieces"]):
        if entry["start"] != expected or entry["stop"] <= entry["start"]:
            raise ModelError(f"resume: the pieces of {path} do not chain: piece {k} holds nodes {entry['start']}…"
                             f"{entry['stop'] - 1}, expected to start at node {expected} (a gap or overlap).")
        file = path / entry["file"]
        if not file.exists():
            raise ModelError(f"resume: piece {k} of the run in {path} ({entry['file']}) is missing; the checkpoint "
                             "cannot be continued (rerun with overwrite=True).")
        if _sha256(file) != entry["sha256"]:
            raise FileError(f"resume: {file} is not the piece the run wrote there (its checksum differs: replaced, "
                            "stale or corrupt); the checkpoint cannot be continued (rerun with overwrite=True).")
        arrays = load_npz(file, who)
        stamp = json_record(arrays, "piece_meta", file, who)
        if stamp != {"run_id": meta["run_id"], "index": k, "start": entry["start"], "stop": entry["stop"]}:
            raise FileError(f"resume: {file} belongs to another run or place in the run ({stamp}); refusing to "
                            "splice it in.")
        if len(arrays["node_q"]) != entry["stop"] - entry["start"]:
            raise FileError(f"resume: {file} holds {len(arrays['node_q'])} nodes, its record says "
                            f"{entry['stop'] - entry['start']}.")
        expected = entry["stop"]
        pieces.append({name: a for name, a in arrays.items() if name != "piece_meta"})
    if expected != meta["n"] + 1:
        raise ModelError(f"resume: the pieces of {path} end at node {expected - 1}, the run at step {meta['n']}.")
    return pieces


def carry_arrays(carry: Carry):
    """The carry as plain arrays for a checkpoint (the multipliers under "lam", the leaves of the
    Newton memory under "memory0", "memory1", …, those of the trend under "trend0", …, those of
    the controllers' carry under "control0", …)."""
    extra = {f"{name}{i}": np.asarray(a) for name in ("memory", "trend", "control")
             for i, a in enumerate(jax.tree.leaves(getattr(carry, name)))}
    return {**{k: np.asarray(a) for k, a in carry.state._asdict().items()}, "lam": np.asarray(carry.multipliers),
            **extra}


def restored_carry(backend: StepBackend, assembly, stored) -> Carry:
    """The carry of a checkpoint: state and multipliers, and the Newton memory, the trend and the
    controllers' carry in the structure the backend's init gives (as init makes them if the checkpoint holds none)."""
    state = State(*(jnp.asarray(stored[k]) for k in State._fields))
    template = backend.init(assembly.model, state)

    def restored(name):
        leaves, treedef = jax.tree.flatten(getattr(template, name))
        if all(f"{name}{i}" in stored for i in range(len(leaves))):
            leaves = [jnp.asarray(stored[f"{name}{i}"], a.dtype) for i, a in enumerate(leaves)]
        return jax.tree.unflatten(treedef, leaves)

    return Carry(state, jnp.asarray(stored["lam"]), restored("memory"), restored("trend"), restored("control"))
