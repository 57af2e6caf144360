"""How compiled code is made and kept: XLA's code generation (quick or optimized) and a
persistent compilation cache shared across processes.

**Code generation.** A run's time is compilation (once per model structure) plus steps. XLA's CPU
compiler spends most of a step's compilation generating machine code for a few hundred small
kernels, and two of its settings trade compilation for speed per step (pinned to one core,
measured on the heavy top / spatial slider-crank / 32-link chain, director backend):

* ``"quick"`` (default): XLA's classic elemental emitters and LLVM at -O1,
  :data:`QUICK`: compilation 1.5 / 2.5 / 2.5 s, steps 37 / 165 / 388 µs;
* ``"optimized"``: XLA's defaults (its MLIR fusion emitters, LLVM at -O2): compilation 3.2 / 4.7 /
  4.0 s, steps 35 / 135 / 359 µs.

"quick" pays off for runs of up to roughly 10⁵ steps (the compilation saved is worth that many
steps' difference), hence the default; ``simulate(..., compile="optimized")`` for long production
runs and benchmarks. Both compile the same program: the steps agree to round-off (their floating
point operations are ordered and contracted differently) and conserve alike. Functions that run
once per model or run (assembly checks, structure detection, diagnostics, post-processing) are
compiled without optimisation (:data:`ONCE`, :func:`jit_quick`). A jaxlib that does not know
these options gets its defaults.

**Persistent cache.** jax can keep compiled executables on disk, keyed by the program and the
compiler options, so that another process running the same model structure (the same element
kinds, array shapes and law code) loads the executable instead of compiling it again. Off by
default, as in jax (it writes to disk); on with :func:`conserve.enable_compilation_cache` or by
the environment variable ``CONSERVE_COMPILATION_CACHE=<directory>`` (read when conserve is
imported). The test suite turns it on (``tests/conftest.py``), so its two parallel workers and
its slow step share what the other compiled. The cache only changes where compiled code comes
from: a loaded executable is the one XLA would compile, so results are bit-identical with and
without it.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp

#: XLA options of quick compilation: the classic elemental IR emitters instead of the MLIR fusion
#: emitters, LLVM at -O1 (about half the compilation time, 0–25 % more time per step)
QUICK = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}

#: XLA options of functions run once per model or run (checks, structure detection, diagnostics,
#: post-processing): LLVM without optimisation (their compilation is all they cost: the structure
#: detection of a 8-link chain compiles in 0.23 s instead of 0.64 s with :data:`QUICK`)
ONCE = {**QUICK, "xla_backend_optimization_level": 0}

#: the choices of ``simulate(..., compile=...)``
MODES = ("quick", "optimized")

#: Environment variable naming the cache directory; set, it enables the cache at import.
ENVIRONMENT_VARIABLE = "CONSERVE_COMPILATION_CACHE"


@functools.cache
def _quick_supported() -> bool:
    """Whether this jaxlib's XLA knows the options of :data:`QUICK` (it rejects unknown ones)."""
    try:
        jax.jit(jnp.negative, compiler_options=QUICK).lower(jnp.zeros(())).compile()
        return True
    except Exception:  # noqa: BLE001  (an XLA error naming the option)
        return False


def compiler_options(mode: str = "quick") -> dict:
    """The XLA options of a compilation mode: "quick" or "optimized" (the choices of
    ``simulate(..., compile=...)``, see the module docstring), or "once" (:data:`ONCE`)."""
    if mode not in (*MODES, "once"):
        raise ValueError(f"compile must be one of {MODES}, got {mode!r}.")
    if mode == "optimized" or not _quick_supported():
        return {}
    return dict(QUICK if mode == "quick" else ONCE)


def jit_quick(fn=None, *, mode="quick", **jit_kwargs):
    """``jax.jit`` compiled quick (``mode="quick"``, :data:`QUICK`) for user-facing functions that
    may run many times (:func:`conserve.step`, the ode backend's right-hand side), or without
    optimisation (``mode="once"``, :data:`ONCE`) for functions run once per model or run (assembly
    checks, structure detection, diagnostics, post-processing). Usable as ``@jit_quick`` or
    ``@jit_quick(mode=..., static_argnums=...)``."""
    if fn is None:
        return functools.partial(jit_quick, mode=mode, **jit_kwargs)

    @functools.cache
    def jitted(traced):  # on first use: the options are checked by a compilation
        options = {} if traced else {"compiler_options": compiler_options(mode)}
        return jax.jit(fn, **options, **jit_kwargs)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        # called on traced values (inside jit, vmap, grad) XLA's options are the enclosing program's
        traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs)))
        return jitted(traced)(*args, **kwargs)

    return wrapper


def default_directory() -> Path:
    """``$XDG_CACHE_HOME/conserve/jax`` (``~/.cache/conserve/jax``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "conserve" / "jax"


def enable_compilation_cache(directory=None, min_compile_seconds: float = 0.0) -> Path:
    """Keep every compilation that took at least ``min_compile_seconds`` (s; default 0: a run also
    jit-compiles many small functions, diagnostics and recoveries, worth keeping too) in
    ``directory`` (default: :func:`conserve.compilation.default_directory`) and load it from there
    in later processes. Returns the directory. The cache grows without limit (~0.5 MB per model
    structure); delete the directory to empty it."""
    path = Path(directory) if directory is not None else default_directory()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    # jax decides once per process whether to use the cache, at its first compilation: decide again
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()
    return path


def compilation_cache_directory():
    """The directory of the enabled persistent cache, or None."""
    return jax.config.jax_compilation_cache_dir


if os.environ.get(ENVIRONMENT_VARIABLE):
    enable_compilation_cache(os.environ[ENVIRONMENT_VARIABLE])
