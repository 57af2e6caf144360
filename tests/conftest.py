import contextlib
import logging
import os
from pathlib import Path

# compiled programs shared by the parallel workers and by later runs (`pytest -m slow` reuses what
# `pytest` compiled): jax's persistent cache (conserve.compilation.cache), here in the checkout
# unless CONSERVE_COMPILATION_CACHE names another directory; read when conserve is imported, and
# the environment variable also reaches the tests' subprocesses
os.environ.setdefault("CONSERVE_COMPILATION_CACHE", str(Path(__file__).resolve().parents[1] / ".cache" / "jax"))

import conserve  # noqa: E402, F401, I001  (float64, XLA's options and the cache above, before jax)
import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from conserve.compilation.modes import jit_quick  # noqa: E402
from conserve.run.chunks import clear_compiled  # noqa: E402


def once(fn, **jit_kwargs):
    """``fn`` compiled as one program without optimisation (conserve's "unoptimized" mode), for a test's
    one-off evaluation of library internals: run op by op, jax compiles every primitive for its
    shapes separately (a random chain's random state: 206 compilations, 5.3 s; compiled once: 0.3 s)."""
    return jit_quick(fn, mode="unoptimized", **jit_kwargs)


@contextlib.contextmanager
def compiles_nothing():
    """Fails the test if jax traces and compiles a program inside the block (the records of
    ``jax_log_compiles``): what a repeated call of one model structure must not do."""
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    try:
        yield
    finally:
        jax.config.update("jax_log_compiles", False)
        logger.removeHandler(handler)
    compiled = [r.getMessage()[:120] for r in records if r.getMessage().startswith("Compiling")]
    assert not compiled, compiled


def relative_drift(x):
    """max_n |x_n − x_0| / |x_0| for a scalar or vector history (N+1, ...)."""
    x = np.asarray(x)
    return np.max(np.abs(x - x[0])) / np.max(np.abs(x[0]))


def fitted_order(dts, errors):
    """Slope of log(error) against log(dt) by least squares."""
    return np.polyfit(np.log(dts), np.log(errors), 1)[0]


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Free each module's compiled programs: XLA's CPU code takes ~1000–3000 memory mappings per
    model, and the whole suite in one process would exceed the kernel's limit (65 530)."""
    yield
    clear_compiled()
