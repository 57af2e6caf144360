"""jax's persistent compilation cache for conserve's programs, on by default.

jax can keep compiled executables on disk, keyed by the program, the compiler options (XLA's
flags included), the jax version and the device, so that another process running the same model
structure (the same element kinds, array shapes and law code) loads the executable instead of
compiling it: the seconds before a repeated script's first step are then tracing and loading, not
XLA (``benchmarks/results/first_result.md``). A loaded executable is the one XLA would compile, so
results are bit-identical with and without the cache.

Importing conserve turns the cache on in :func:`default_directory` (``~/.cache/conserve/jax``)
unless the environment says otherwise, read once at import:

* ``CONSERVE_COMPILATION_CACHE=<directory>`` — the cache there instead;
* ``CONSERVE_COMPILATION_CACHE=off`` (or ``0``, ``false``, ``no``) — no cache;
* ``JAX_COMPILATION_CACHE_DIR`` set — jax's own setting is left as it is.

Within a process: :func:`conserve.enable_compilation_cache`,
:func:`conserve.disable_compilation_cache`; on disk: :func:`conserve.clear_compilation_cache`
(or ``conserve cache clear``; ``conserve cache`` shows where and how much). The cache grows
with every new model structure (a few hundred kB each) and is never trimmed by conserve.
Configuring it imports no jax (before jax is imported, by the environment variables jax reads
when it is: the setting also reaches child processes).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Environment variable naming the cache directory, or "off" for no cache; read at import.
ENVIRONMENT_VARIABLE = "CONSERVE_COMPILATION_CACHE"

#: values of :data:`ENVIRONMENT_VARIABLE` that turn the cache off
OFF = ("0", "off", "false", "no", "none")

#: the name ending of jax's cache entries (``jax._src.lru_cache``): what clearing removes
_ENTRY_ENDINGS = ("-cache", "-atime")


def default_directory() -> Path:
    """``$XDG_CACHE_HOME/conserve/jax`` (``~/.cache/conserve/jax``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "conserve" / "jax"


def requested_directory() -> Path | None:
    """The cache directory the environment asks for: :data:`ENVIRONMENT_VARIABLE`'s directory,
    None when it says "off", else :func:`default_directory`."""
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if value.lower() in OFF:
        return None
    return Path(value).expanduser() if value else default_directory()


def enable_compilation_cache(directory=None, min_compile_seconds: float = 0.0) -> Path:
    """Keep every compilation that took at least ``min_compile_seconds`` (s; default 0: a run also
    jit-compiles small functions, diagnostics and recoveries, worth keeping too) in ``directory``
    (default: :func:`~conserve.compilation.cache.default_directory`) and load it from there, in
    this process and in later ones that enable the same directory. Returns the directory."""
    import jax

    path = Path(directory).expanduser() if directory is not None else default_directory()
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    _decide_again()
    return path


def disable_compilation_cache() -> None:
    """Stop reading and writing the persistent cache in this process (what is on disk stays;
    :func:`clear_compilation_cache` removes it)."""
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    _decide_again()


def compilation_cache_directory() -> str | None:
    """The directory of the persistent cache this process uses, or None when it is off."""
    if "jax" not in sys.modules:  # not configured through jax yet: what jax will read
        return os.environ.get("JAX_COMPILATION_CACHE_DIR") if _jax_enabled_by_environment() else None
    import jax

    return jax.config.jax_compilation_cache_dir if jax.config.jax_enable_compilation_cache else None


def cache_contents(directory=None) -> tuple[int, int]:
    """(entries, bytes) of jax's cache files in ``directory`` (default: the cache in use, else
    :func:`requested_directory`); (0, 0) for a missing directory."""
    files = _entries(directory)
    return sum(f.name.endswith("-cache") for f in files), sum(f.stat().st_size for f in files)


def clear_compilation_cache(directory=None) -> tuple[int, int]:
    """Delete jax's cache files (and nothing else) in ``directory`` (default: the cache in use,
    else :func:`~conserve.compilation.cache.requested_directory`). Returns the (entries, bytes)
    removed. Programs this process holds in memory stay compiled; later processes compile again."""
    removed = cache_contents(directory)
    for f in _entries(directory):
        f.unlink(missing_ok=True)
    return removed


def configure_from_environment() -> None:
    """Import-time setting (see the module docstring): the cache in :func:`requested_directory`,
    or off; jax's own ``JAX_COMPILATION_CACHE_DIR`` left as it is. Before jax is imported this
    sets the environment variables jax reads at its import (no jax imported here)."""
    if ENVIRONMENT_VARIABLE not in os.environ and _set_for_jax():
        return  # the user's own jax setting
    path = requested_directory()
    if "jax" in sys.modules:
        if path is None:
            disable_compilation_cache()
        else:
            enable_compilation_cache(path)
        return
    if path is None:
        os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
        os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    else:
        os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "true"
        os.environ["JAX_COMPILATION_CACHE_DIR"] = str(path)
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"


def _set_for_jax() -> bool:
    """Whether jax's cache was set by the user: its environment variables, or its config."""
    if {"JAX_COMPILATION_CACHE_DIR", "JAX_ENABLE_COMPILATION_CACHE"} & set(os.environ):
        return True
    return "jax" in sys.modules and sys.modules["jax"].config.jax_compilation_cache_dir is not None


def _jax_enabled_by_environment() -> bool:
    return os.environ.get("JAX_ENABLE_COMPILATION_CACHE", "true").lower() not in OFF


def _entries(directory) -> list[Path]:
    if directory is None:
        directory = compilation_cache_directory() or requested_directory()
    if directory is None or not Path(directory).is_dir():
        return []
    return [f for f in Path(directory).iterdir() if f.is_file() and f.name.endswith(_ENTRY_ENDINGS)]


def _decide_again():
    """jax decides once per process, at its first compilation, whether and where it caches:
    make it decide again with the current settings."""
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()
