"""Reading conserve's own npz files safely: arrays and JSON records only, never pickles.

A file that is not one conserve wrote (corrupt, truncated, another program's, a pickle) gets a
:class:`~conserve.errors.FileError` naming the file; it is not loaded and nothing in it runs.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np

from .errors import FileError


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
