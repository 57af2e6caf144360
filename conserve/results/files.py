"""Reading conserve's own npz files safely: arrays and JSON records only, never pickles.

A file that is not one conserve wrote (corrupt, truncated, another program's, a pickle) gets a
:class:`~conserve.errors.FileError` naming the file; it is not loaded and nothing in it runs.
"""

from __future__ import annotations

import hashlib
import json
import zipfile

import numpy as np

from ..errors import FileError


def load_npz(file, who):
    """{name: array} of an npz file; a :class:`FileError` (naming ``who``, the caller) for
    anything else. Object arrays are refused (``allow_pickle=False``)."""
    try:
        with np.load(file, allow_pickle=False) as f:
            return {name: f[name] for name in f.files}
    except FileNotFoundError:
        raise FileError(f"{who}: {file} does not exist.") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError, AttributeError) as err:
        raise FileError(f"{who}: {file} is not a readable conserve file (corrupt, truncated, or written by "
                        f"something else: {type(err).__name__}); it was not loaded, and nothing in it was "
                        "executed.") from None


def json_record(arrays, key, file, who):
    """The JSON record (a dict) stored under ``key`` in a loaded npz file."""
    try:
        record = json.loads(str(arrays[key]))
    except (KeyError, ValueError, TypeError):
        record = None
    if not isinstance(record, dict):
        raise FileError(f"{who}: {file} is not a conserve file of this kind (no readable '{key}' record).")
    return record


def content_digest(arrays) -> str:
    """sha256 (hex) of ``arrays`` ({name: array-like}) as they load back from an npz file: each
    entry's name, dtype, shape and bytes, in the order of the names. The same for the arrays
    before ``numpy.savez`` and after :func:`load_npz`, so it detects a file edited or damaged
    after it was written (what the zip format's own CRC does not see: a file rewritten whole)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(np.asarray(arrays[name]))
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()
