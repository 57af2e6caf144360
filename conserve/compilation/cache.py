"""jax's persistent compilation cache for conserve's programs.

jax can keep compiled executables on disk, keyed by the program and the compiler options, so that
another process running the same model structure (the same element kinds, array shapes and law
code) loads the executable instead of compiling it. Off by default, as in jax (it writes to disk);
on with :func:`conserve.enable_compilation_cache` or by the environment variable
``CONSERVE_COMPILATION_CACHE=<directory>`` (read before conserve compiles anything). The cache
only changes where compiled code comes from: a loaded executable is the one XLA would compile,
so results are bit-identical with and without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

#: Environment variable naming the cache directory; set, it enables the cache at import.
ENVIRONMENT_VARIABLE = "CONSERVE_COMPILATION_CACHE"


def default_directory() -> Path:
    """``$XDG_CACHE_HOME/conserve/jax`` (``~/.cache/conserve/jax``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "conserve" / "jax"


def enable_compilation_cache(directory=None, min_compile_seconds: float = 0.0) -> Path:
    """Keep every compilation that took at least ``min_compile_seconds`` (s; default 0: a run also
    jit-compiles many small functions, diagnostics and recoveries, worth keeping too) in
    ``directory`` (default: :func:`conserve.compilation.cache.default_directory`) and load it from there
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
