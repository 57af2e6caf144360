"""The one place where conserve switches jax to float64.

Conservation to 1e-10 is impossible in float32 (machine epsilon 1.2e-7), so importing
``conserve`` calls :func:`enable` before any of its modules imports jax, and every first use of
one of its names calls it again: x64 mode is on process-wide before conserve creates an array.
"""

import os
import sys


def enable():
    """Switch jax to float64: by ``jax.config`` when jax is imported, else by the environment
    variable ``JAX_ENABLE_X64=1``, which jax reads when it is imported (without importing jax
    here, so that ``import conserve`` and ``conserve --help`` stay light)."""
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_enable_x64", True)
    else:
        os.environ["JAX_ENABLE_X64"] = "1"


def x64_enabled() -> bool:
    """True when jax creates float64 arrays by default."""
    import jax

    return bool(jax.config.jax_enable_x64)
