"""Fingerprints of assembled models: what a checkpointed run must find unchanged to go on.

A model is its structure (layout, element kinds), its numbers (parameters, initial state) and
its *laws*: the user's motor, force, constraint and potential functions, compared by what they
compute (:mod:`conserve.model.identity`), so editing a gain in a closure or in a module constant
changes the fingerprint, while re-creating the same lambda in a new process does not. A law
whose state cannot be read is *opaque*: it is listed, and a resumed run refuses it unless the
caller vouches for it (``resume(..., trust_laws=True)``).
"""

from __future__ import annotations

import hashlib
import json

import jax
import numpy as np

from ..model.identity import LAW_FIELDS, LawHasher


def fingerprint(assembly) -> dict:
    """{"structure", "parameters", "initial_state", "laws": hex digests; "opaque": [what]}."""
    from ..results.solution import layout_record

    model = assembly.model
    leaves, treedef = jax.tree.flatten(model)
    laws = LawHasher()
    laws.add(tuple(x for f in LAW_FIELDS for x in (f.split("_")[0], getattr(model, f))))  # ("constraint", kinds, …)
    return {"structure": _digest(json.dumps(layout_record(assembly.layout), sort_keys=True, default=str),
                                 str(treedef.num_leaves), *(str(np.shape(x)) for x in leaves)),
            "parameters": _digest(*leaves),
            "initial_state": _digest(*jax.tree.leaves(assembly.initial_state)),
            "laws": laws.hexdigest(),
            "opaque": sorted(set(laws.opaque))}


def _digest(*items) -> str:
    h = hashlib.sha256()
    for x in items:
        h.update(x.encode() if isinstance(x, str) else np.ascontiguousarray(np.asarray(x)).tobytes())
        h.update(b"|")
    return h.hexdigest()
