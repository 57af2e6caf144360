"""XLA's code generation for conserve's programs (see :mod:`conserve.compilation`).

A run's time is compilation (once per model structure) plus steps, and XLA's CPU compiler spends
most of a compilation generating machine code, so its settings trade compilation for speed per
step:

* ``"unoptimized"``: LLVM without optimisation (:data:`UNOPTIMIZED`): 35–50 % less compilation
  than quick, steps 2–4× slower;
* ``"quick"``: XLA's classic elemental emitters instead of its MLIR fusion emitters, LLVM at -O1
  (:data:`QUICK`);
* ``"optimized"``: XLA's defaults (:data:`OPTIMIZED`): 1.5–2× quick's compilation, steps from 12 %
  faster to 8 % slower; all three without XLA's YNNPACK dot fusions (:data:`BASE`); a small
  Newton matrix's loop becomes one kernel instead (below), up to 2.6× faster steps;
* ``"auto"`` (the default of ``simulate`` and ``simulate_batch``): "unoptimized" for a run of at
  most :data:`AUTO_WORK` unknown-steps (steps × members × composed stages × the director
  backend's unknowns, whichever backend runs), "optimized" for a single run of at least
  :data:`OPTIMIZED_WORK` whose Newton loop then becomes one kernel (below), else "quick"
  (:func:`resolved_mode`); unoptimized code pays while the compilation it saves exceeds its
  slower steps (the bound a factor two below every break-even measured), the one kernel once its
  faster steps repay its longer compilation (the bound above the break-even of all models
  measured but two; measurements: benchmarks/results/defaults.md, sections ``AUTO_WORK`` and
  ``OPTIMIZED_WORK``). Adaptive runs, whose length is not known, take
  "quick"; a convergence study, an ensemble and a sweep resolve it once for all their runs,
  never to "optimized".

All compile the same program: the steps agree to round-off (their floating-point operations are
ordered and contracted differently) and conserve alike; a run's code generation is in
``sol.stats["compile"]``, and a resumed run keeps it, so it continues bit for bit. Pass
``compile="quick"`` to have runs of different lengths share their compiled program and their
first steps bit for bit. Functions run once per model or run (assembly checks, structure
detection, diagnostics) are compiled unoptimized (:func:`jit_quick`). An option this jaxlib's XLA
does not know is left out, the others kept.

**Loops as kernels** (:mod:`conserve.compilation`): a run whose dense Newton matrix has at most
:data:`KERNEL_SIZE` unknowns (or, with a tree solver, whose every diagonal block has at most
:data:`KERNEL_BLOCK`) solves it by Gauss–Jordan in XLA operations instead of LAPACK's LU (a library call, which no
kernel can hold; :meth:`~conserve.backends.base.StepBackend.as_kernels`,
:func:`~conserve.discrete.linear.kernel_inverse`), the same steps to round-off, and its whole loop
of steps becomes one kernel — always when compiled "optimized", and "quick" with the director
backend on models of at most :data:`KERNEL_UNKNOWNS` unknowns (larger models' and the reduced
step's one-kernel loops take LLVM up to twice as long to compile), in both cases with "quick"'s
options, whose classic emitters alone make the loop one kernel. Larger matrices, unoptimized
code and ensembles keep LAPACK's LU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from . import cache  # noqa: F401  (the cache the environment names is on before conserve compiles)

#: XLA options of every code generation: small dots are XLA's own loops, not YNNPACK calls (XLA's
#: CPU default fuses dots with their neighbours into calls of the YNNPACK library, built for large
#: matrices; a model's are 3 × 3 … 21 × 21 and batched by ensembles: ensembles and the reduced
#: backend step faster without them, the director alike; measurements:
#: benchmarks/results/defaults.md, section ``BASE``).
BASE = {"xla_cpu_experimental_ynn_fusion_type": ""}

#: XLA options of quick compilation: the classic elemental IR emitters instead of the MLIR fusion
#: emitters, LLVM at -O1 (about half the compilation time, 0–25 % more time per step)
QUICK = {**BASE, "xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}

#: XLA options of unoptimized code: LLVM without optimisation. Short runs (``compile="auto"``) and
#: functions run once per model or run (checks, structure detection, diagnostics, post-processing:
#: their compilation is all they cost; measurements: benchmarks/results/defaults.md, section
#: ``UNOPTIMIZED``)
UNOPTIMIZED = {**QUICK, "xla_backend_optimization_level": 0}

#: XLA options of optimized code: XLA's defaults but for :data:`BASE`
OPTIMIZED = dict(BASE)

#: the choices of ``simulate(..., compile=...)``
MODES = ("auto", "unoptimized", "quick", "optimized")

#: ``compile="auto"`` compiles unoptimized a run of at most this many unknown-steps (steps ×
#: members × composed stages × the director backend's unknowns), else quick (see the module docstring)
AUTO_WORK = 100_000

#: ... and optimized a single run of at least this many whose Newton loop is one kernel optimized
#: but not quick (a tree of small blocks, a dense matrix of 25–56 unknowns): above the break-even of
#: that kernel against quick code of all models measured but two (0.5–8·10⁶ unknown-steps); those
#: (1.6·10⁷, or no gain) lose at most ~7 % of a run this long to the longer compilation
#: (measurements: benchmarks/results/defaults.md, section ``OPTIMIZED_WORK``)
OPTIMIZED_WORK = 10_000_000


#: runs whose dense Newton matrix has at most this many unknowns may solve by Gauss–Jordan in XLA
#: operations, their loops one kernel (O(n³) masked updates; LAPACK's blocked LU wins beyond: the
#: kernel's steps are faster at 44 and 53 unknowns and slower at 62; measurements:
#: benchmarks/results/defaults.md, section ``KERNEL_SIZE``)
KERNEL_SIZE = 56

#: ... and a tree solver's diagonal blocks at most this many (the solver inverts a level's blocks at
#: once and multiplies them into their parents': in one kernel that arithmetic runs slower than as
#: library calls once the blocks hold two bodies; a body's block has 18–26 unknowns, with spinning
#: rotors more: 2-body blocks of 48 unknowns (N-four-bar) step 2× slower as one kernel, blocks of
#: 29–45 faster; measurements: benchmarks/results/defaults.md, section ``KERNEL_SIZE``)
KERNEL_BLOCK = 40

#: ... and, compiled "quick", run the director backend on at most this many unknowns (the heavy
#: top 21, the P3a and P4 spacecraft with hybrid wheels 24): larger models' and the reduced step's
#: one-kernel loops take LLVM up to twice as long to compile, which "optimized" runs accept (see
#: "Loops as kernels" above; measurements: benchmarks/results/defaults.md, section
#: ``KERNEL_UNKNOWNS``)
KERNEL_UNKNOWNS = 24


@functools.cache
def loops_as_kernels() -> bool:
    """Whether XLA compiles conserve's loops as kernels in this process: a loop of 4 kB (above
    XLA's default size, below :data:`~conserve.compilation.LOOP_KERNEL_BYTES`) compiles as one
    (False when jax computed before conserve was imported, or ``XLA_FLAGS`` sets a smaller size)."""
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


def resolved_mode(mode: str, unknown_steps=None, kernel=False) -> str:
    """The code generation of a run: ``mode``, or for "auto" by the run's ``unknown_steps``
    (:data:`AUTO_WORK`'s measure; None: not known, an adaptive run, "quick"): "unoptimized" up to
    :data:`AUTO_WORK`, "optimized" from :data:`OPTIMIZED_WORK` if ``kernel`` (the run's Newton
    loop is one kernel compiled optimized, not quick: ``conserve.run.chunks.kernel_when_optimized``),
    else "quick"."""
    if mode != "auto":
        return mode
    if unknown_steps is None:  # an adaptive run: its length is not known
        return "quick"
    if unknown_steps <= AUTO_WORK:
        return "unoptimized"
    return "optimized" if kernel and unknown_steps >= OPTIMIZED_WORK else "quick"


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
