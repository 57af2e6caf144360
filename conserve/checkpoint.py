"""Checkpoints of long runs (``simulate(..., checkpoint=path)``) and :func:`conserve.resume`.

A checkpoint is a directory:

- ``piece_<k>.npz``: the nodes, per-step records and diagnostics of the k-th stretch of steps
  (written once, never rewritten: the cost of checkpointing does not grow with the run);
- ``run.npz``: what the time loop needs to go on — the run's settings, the step count n, the
  carried state and multipliers at t_n, the number of valid pieces — and the assembly
  (pickled, when it can be).

Every file is written to a temporary name and renamed over the old one (atomic on POSIX), and
``run.npz`` only after its piece, so a crash at any moment leaves the last complete checkpoint:
a killed run loses at most the steps since then. The carried state is stored exactly (float64),
and the loop goes on with the same compiled chunk, so a resumed run is bit-for-bit the run that
was not interrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

import jax
import numpy as np

from .errors import ModelError
from .model.system import as_assembly
from .solution import layout_record

#: Version of the checkpoint layout.
FORMAT_VERSION = 1


def _atomic_savez(path: Path, **arrays):
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def fingerprint(assembly) -> str:
    """A hash of the model's structure, parameters and initial state: a resumed run must
    continue the same model."""
    h = hashlib.sha256(json.dumps(layout_record(assembly.layout), sort_keys=True, default=str).encode())
    for leaf in jax.tree.leaves((assembly.model, assembly.initial_state)):
        h.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return h.hexdigest()


def start(path, assembly, settings: dict):
    """Create (or reset) the checkpoint directory ``path`` for a new run."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for old in list(path.glob("piece_*.npz")) + list(path.glob("run.npz")):
        old.unlink()
    try:
        blob = pickle.dumps(assembly)
    except Exception:  # user callables (lambdas, closures): resume then needs the system again
        blob = b""
    return {"path": path, "settings": settings, "assembly": blob, "fingerprint": fingerprint(assembly), "pieces": 0}


def write(ckpt, n, carry, piece):
    """Append ``piece`` (a dict of arrays) and record the carried ``carry`` (a dict of arrays) at
    step ``n``."""
    k = ckpt["pieces"]
    _atomic_savez(ckpt["path"] / f"piece_{k:06d}.npz", **piece)
    ckpt["pieces"] = k + 1
    meta = {"format_version": FORMAT_VERSION, "settings": ckpt["settings"], "n": int(n),
            "pieces": ckpt["pieces"], "fingerprint": ckpt["fingerprint"]}
    _atomic_savez(ckpt["path"] / "run.npz", meta=json.dumps(meta),
                  assembly=np.frombuffer(ckpt["assembly"], np.uint8), **{f"carry_{k}": v for k, v in carry.items()})


def read(path, system=None):
    """(assembly, settings, n, carry, pieces, ckpt) of the checkpoint directory ``path``."""
    path = Path(path)
    run = path / "run.npz"
    if not run.exists():
        raise ModelError(f"resume: {path} holds no checkpoint (no run.npz); was the run started with "
                         "simulate(..., checkpoint=path) and did it reach its first checkpoint?")
    with np.load(run) as f:
        meta = json.loads(str(f["meta"]))
        if meta.get("format_version") != FORMAT_VERSION:
            raise ModelError(f"resume: {run} has format version {meta.get('format_version')}, "
                             f"this conserve reads {FORMAT_VERSION}.")
        blob = f["assembly"].tobytes()
        carry = {k[6:]: f[k] for k in f.files if k.startswith("carry_")}
    if system is not None:
        assembly = as_assembly(system, "resume")
    elif blob:
        assembly = pickle.loads(blob)
    else:
        raise ModelError(f"resume: the model of {path} could not be stored (it holds functions that cannot be "
                         "pickled, e.g. lambdas as motor laws); pass the same system: resume(path, system).")
    if fingerprint(assembly) != meta["fingerprint"]:
        raise ModelError(f"resume: the system given is not the one {path} was run with (structure, parameters "
                         "or initial state differ); pass the same system as to simulate.")
    pieces = []
    for k in range(meta["pieces"]):
        with np.load(path / f"piece_{k:06d}.npz") as f:
            pieces.append({name: f[name] for name in f.files})
    ckpt = {"path": path, "settings": meta["settings"], "assembly": blob, "fingerprint": meta["fingerprint"],
            "pieces": meta["pieces"]}
    return assembly, meta["settings"], meta["n"], carry, pieces, ckpt
