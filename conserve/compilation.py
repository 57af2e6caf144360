"""How compiled code is made and kept: XLA's code generation (unoptimized, quick or optimized,
chosen by the run's length) and a persistent compilation cache shared across processes.

**Code generation.** A run's time is compilation (once per model structure) plus steps. XLA's CPU
compiler spends most of a step's compilation generating machine code for a few hundred small
kernels, and its settings trade compilation for speed per step (measured per model in the
README's "Code generation by run length" and ``benchmarks/results/compile_times.md``):

* ``"unoptimized"``: LLVM without optimisation (:data:`UNOPTIMIZED`): 35–50 % less compilation,
  steps 2–4× slower;
* ``"quick"``: XLA's classic elemental emitters instead of its MLIR fusion emitters, LLVM at -O1
  (:data:`QUICK`);
* ``"optimized"``: XLA's defaults (fusion emitters, LLVM at -O2): 1.5–2× quick's compilation,
  0–25 % faster steps (all three without XLA's YNNPACK dot fusions, :data:`BASE`: reduced steps
  5–22 % faster, an ensemble's up to 1.8×);
* ``"auto"`` (the default of ``simulate`` and ``simulate_batch``): "unoptimized" for a run of at
  most :data:`AUTO_WORK` unknown-steps (steps × members × composed stages × the director
  backend's unknowns, whichever backend runs), else "quick" (:func:`resolved_mode`). Unoptimized
  code pays off while the compilation it saves exceeds its slower steps: measured, up to
  2·10⁵–10⁶ unknown-steps (the double four-bar 1,800 steps, the 32-link chain 750, the heavy top
  20,000), so the bound stays a factor two below every break-even measured. Adaptive runs, whose
  length is not known, take "quick"; a convergence study and a sweep resolve it once for all their
  runs (by the study's longest run; by all the sweep's members, whose code is shared). A loop of
  many short runs of one model is best given ``compile="quick"``: its compilation is shared.

``simulate(..., compile="optimized")`` for long production runs and benchmarks. All compile the
same program: the steps agree to round-off (their floating point operations are ordered and
contracted differently: the heavy top's q after a step, 3e-15 unoptimized against quick) and
conserve alike; a run's code generation is in ``sol.stats["compile"]`` and a resumed run keeps
it, so it continues bit for bit. Pass ``compile="quick"`` to have runs of different lengths share
their first steps bit for bit.
Functions that run once per model or run (assembly checks, structure detection, diagnostics,
post-processing) are compiled unoptimized (:func:`jit_quick`). An option this jaxlib's XLA does not
know is left out (its default), the others kept.

**Loops as kernels.** XLA's CPU runtime runs a program as a sequence of small compiled kernels
(*thunks*), a while loop's body kernel by kernel at every iteration; for a model as small as the
heavy top that dispatch, not arithmetic, is most of a step. A while loop without library calls
and below a size in bytes XLA instead compiles as one kernel, control flow included (its
``SmallWhileLoopHoistingPass``). Importing conserve raises that size, XLA's option
``xla_cpu_small_while_loop_byte_threshold`` (1 kB by default), to :data:`LOOP_KERNEL_BYTES`
through the environment variable ``XLA_FLAGS`` — read by XLA once, when jax first computes, so
conserve must be imported before anything runs on jax (an ``XLA_FLAGS`` that sets the option
already is left as it is; :func:`loops_as_kernels` tells whether it holds). A run whose dense Newton matrix has at
most :data:`KERNEL_SIZE` unknowns (or, with the director's tree solver, whose every diagonal block
has) then solves it by Gauss–Jordan in XLA operations instead of
LAPACK's LU (a library call, which no kernel can hold; :meth:`~conserve.backends.base.StepBackend.as_kernels`,
:func:`~conserve.discrete.linear.kernel_inverse`),
the same steps to round-off, and its whole loop of steps becomes one kernel — compiled
"optimized" always, "quick" with the director backend on models of at most
:data:`KERNEL_UNKNOWNS` unknowns (larger models' and the reduced step's one-kernel loops take
LLVM up to twice as long to compile: worth it for the long runs "optimized" is for, not for the
runs of 10⁵ unknown-steps that "auto" compiles quick), in both cases with "quick"'s options,
whose classic emitters alone make the loop one kernel (``sol.stats["compile"]`` still names the
mode asked for). Measured, pinned, µs per step with LAPACK's LU → as one kernel (compilation in
s): "quick" director: heavy top 37 → 11 (1.96 → 2.10), P8 aircraft 37 → 12 (1.3 → 1.4), P6
52 → 24 (2.9 → 4.0), P3a with hybrid wheels 55 → 34 (2.5 → 2.7); (the reduced step would gain as
much, heavy top 39 → 13 µs, P3a 60 → 29, at 3.5 → 4.3 s and 4.3 → 5.7 s). "optimized": heavy top
director 29 → 12 (3.7 → 2.2), reduced 28 → 13 (5.5 → 4.3); reduced
P5 crane (hybrid winch) 112 → 43 (10.2 → 12.8), P8 wind turbine 111 → 60 (7.4 → 9.2), P8
rotorcraft 104 → 63 (7.2 → 8.1), double pendulum 51 → 22 (6.4 → 6.6). Larger matrices keep
LAPACK's LU (by masked updates a director matrix of 62 unknowns factorises slower: 103 → 160 µs
per step; double four-bar, 119: 311 → 977), and so do "unoptimized" code (an elimination that LLVM
does not optimise is slower than LAPACK's) and ensembles (the batched LU: a vmapped Gauss–Jordan
is memory-bound, 1,000 tops' 21 × 21 matrices 12.9 against LAPACK's 4.2 µs per member).
The Gauss–Jordan inverse replaced an LU in XLA operations (2026-11-28, pinned, AMD EPYC, µs per
step LU → inverse, "optimized": heavy top 18.0 → 14.1 at Δt = 2e-3, 14.5 → 11.7 at 1e-3; P8
aircraft 17.3 → 13.7; P3a 28.0 → 25.4): its factorisation costs less (fewer masks) and a solve,
which the chords of simplified Newton repeat several times per step, is one product.

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

import contextlib
import functools
import os
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp

#: XLA options of every code generation: small dots are XLA's own loops, not YNNPACK calls (XLA's
#: CPU default fuses dots with their neighbours into calls of the YNNPACK library, built for large
#: matrices; a model's are 3 × 3 … 21 × 21 and batched by ensembles). Measured, pinned: an ensemble
#: of 1,000 heavy tops with the reduced backend 11–13 → 6–7.5 µs per member-step, with the director
#: 0–16 % faster; a reduced step 5–22 % faster (heavy top, P5 crane; every code generation);
#: director steps and compilation unchanged within the noise (±8 %).
BASE = {"xla_cpu_experimental_ynn_fusion_type": ""}

#: XLA options of quick compilation: the classic elemental IR emitters instead of the MLIR fusion
#: emitters, LLVM at -O1 (about half the compilation time, 0–25 % more time per step)
QUICK = {**BASE, "xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}

#: XLA options of unoptimized code: LLVM without optimisation. Short runs (``compile="auto"``) and
#: functions run once per model or run (checks, structure detection, diagnostics, post-processing:
#: their compilation is all they cost; the structure detection of a 8-link chain compiles in 0.23 s
#: instead of 0.64 s with :data:`QUICK`)
UNOPTIMIZED = {**QUICK, "xla_backend_optimization_level": 0}

#: XLA options of optimized code: XLA's defaults but for :data:`BASE`
OPTIMIZED = dict(BASE)

#: the choices of ``simulate(..., compile=...)``
MODES = ("auto", "unoptimized", "quick", "optimized")

#: ``compile="auto"`` compiles unoptimized a run of at most this many unknown-steps (steps ×
#: members × composed stages × the director backend's unknowns), else quick (see the module docstring)
AUTO_WORK = 100_000

#: Environment variable naming the cache directory; set, it enables the cache at import.
ENVIRONMENT_VARIABLE = "CONSERVE_COMPILATION_CACHE"

#: XLA's CPU option (in ``--xla_backend_extra_options``): the largest while loop, in bytes
#: accessed, that XLA compiles as one kernel (see "Loops as kernels" above)
LOOP_KERNEL_OPTION = "xla_cpu_small_while_loop_byte_threshold"

#: the value conserve gives it: any loop XLA can compile as one kernel (conserve's own choose by
#: holding library calls or not)
LOOP_KERNEL_BYTES = 10**9

#: runs whose dense Newton matrix has at most this many unknowns may solve by Gauss–Jordan in XLA
#: operations, their loops one kernel (O(n³) masked updates; LAPACK's blocked LU wins beyond).
#: Pinned, "optimized", µs per step LAPACK → Gauss–Jordan kernel (compilation in s), AMD EPYC
#: 2026-11-28: double pendulum, 44 unknowns, 99–108 → 74–76 (6.7–8.2 → 6.4–8.5); P5 crane, 53,
#: 188–198 → 142–145 (15.5 → 19.1); connected joints, 62, 163 → 189 (so 56, not 64; it was 32
#: with the LU in XLA operations before, which lost at 62 unknowns, 103 → 160)
KERNEL_SIZE = 56

#: ... and, compiled "quick", run the director backend on at most this many unknowns (the heavy
#: top 21, the P3a and P4 spacecraft with hybrid wheels 24): larger models' and the reduced step's
#: one-kernel loops take LLVM up to twice as long to compile, which "optimized" runs accept (see
#: "Loops as kernels" above)
KERNEL_UNKNOWNS = 24


def _raise_loop_kernel_bytes():
    """Put :data:`LOOP_KERNEL_OPTION` = :data:`LOOP_KERNEL_BYTES` into ``XLA_FLAGS`` unless it is
    set there (the extra options are one comma-separated flag: added to it if present)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if LOOP_KERNEL_OPTION in flags:
        return
    entry = f"{LOOP_KERNEL_OPTION}={LOOP_KERNEL_BYTES}"
    head, found, tail = flags.partition("--xla_backend_extra_options=")
    added = f"{head}{found}{entry},{tail}" if found else f"{flags} --xla_backend_extra_options={entry}"
    os.environ["XLA_FLAGS"] = added.strip()


_raise_loop_kernel_bytes()


@functools.cache
def loops_as_kernels() -> bool:
    """Whether XLA compiles conserve's loops as kernels in this process: a loop of 4 kB (above
    XLA's default size, below :data:`LOOP_KERNEL_BYTES`) compiles as one (False when jax computed
    before conserve was imported, or ``XLA_FLAGS`` sets a smaller size)."""
    loop = jax.jit(lambda x: jax.lax.fori_loop(0, 2, lambda i, y: jnp.sin(y), x))
    return "xla_cpu_small_call" in loop.lower(jnp.zeros(512)).compile().as_text()


@functools.cache
def _accepted(options: tuple) -> bool:
    """Whether this jaxlib's XLA accepts these options ((name, value) pairs; it rejects unknown ones)."""
    try:
        jax.jit(jnp.negative, compiler_options=dict(options)).lower(jnp.zeros(())).compile()
        return True
    except Exception:  # noqa: BLE001  (an XLA error naming the option)
        return False


def resolved_mode(mode: str, unknown_steps=None) -> str:
    """The code generation of a run: ``mode``, or for "auto" "unoptimized" when the run's
    ``unknown_steps`` (:data:`AUTO_WORK`'s measure; None: not known, an adaptive run) is at most
    :data:`AUTO_WORK`, else "quick"."""
    if mode != "auto":
        return mode
    return "unoptimized" if unknown_steps is not None and unknown_steps <= AUTO_WORK else "quick"


def compiler_options(mode: str = "quick") -> dict:
    """The XLA options of a compilation mode: "unoptimized", "quick" or "optimized" (see the module
    docstring; "auto" is resolved first, :func:`resolved_mode`), without those this jaxlib does not
    know."""
    options = {"unoptimized": UNOPTIMIZED, "quick": QUICK, "optimized": OPTIMIZED}.get(mode)
    if options is None:
        raise ValueError(f"compile must be 'unoptimized', 'quick' or 'optimized' here, got {mode!r}.")
    if _accepted(tuple(options.items())):  # one test compilation, not one per option
        return dict(options)
    return {key: value for key, value in options.items() if _accepted(((key, value),))}


def jit_quick(fn=None, *, mode="quick", **jit_kwargs):
    """``jax.jit`` compiled quick (``mode="quick"``, :data:`QUICK`) for user-facing functions that
    may run many times (:func:`conserve.step`, the ode backend's right-hand side), or unoptimized
    (``mode="unoptimized"``, :data:`UNOPTIMIZED`) for functions run once per model or run (assembly
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


#: jax's monitoring events of making a program that :func:`compiling` counts: tracing, lowering to
#: MLIR and XLA's compilation
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")

_spans = threading.local()


def _count(event, duration, **_):
    spans = getattr(_spans, "open", None)
    if event in COMPILE_EVENTS and spans is not None:
        end = time.perf_counter()
        spans.append((end - duration, end))


jax.monitoring.register_event_duration_secs_listener(_count)


def _covered(spans):
    """The length of the union of the intervals (a nested function's trace lies inside its caller's)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


@contextlib.contextmanager
def compiling():
    """The seconds this thread spends tracing, lowering and compiling programs inside the block
    (jax's monitoring events; nested traces counted once): yields a function that returns them so
    far. A run subtracts them from its time and adds them to its compilation, so that its time per
    step does not hold what it compiles on first use inside its loop — its nodes' diagnostics (a
    first heavy-top run of 1,000 steps: 158 µs per step with them, 6 without), a recovery's
    sub-steps."""
    spans, outer = [], getattr(_spans, "open", None)
    _spans.open = spans
    try:
        yield lambda: _covered(spans)
    finally:
        _spans.open = outer
        if outer is not None:  # an enclosing block counts this one's too
            outer.extend(spans)


@contextlib.contextmanager
def run_times(compile_time=0.0):
    """A run's clock: yields a function returning (compile_time + what the block compiled, the
    block's other seconds) so far (:func:`compiling`): the compile and run times a run reports."""
    with compiling() as compiled:
        tic = time.perf_counter()
        yield lambda: (compile_time + compiled(), time.perf_counter() - tic - compiled())


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
