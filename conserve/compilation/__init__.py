"""How conserve's compiled code is made and kept (the package is light: importing it imports no jax).

* :mod:`.modes` — XLA's code generation, chosen by a run's length: ``"unoptimized"`` (LLVM
  without optimisation: the least compilation, the slowest steps), ``"quick"`` (XLA's classic
  emitters, LLVM at -O1), ``"optimized"`` (XLA's defaults), and ``"auto"`` (unoptimized up to
  :data:`~conserve.compilation.modes.AUTO_WORK` unknown-steps, optimized from
  :data:`~conserve.compilation.modes.OPTIMIZED_WORK`, else quick); small Newton loops
  compiled as one XLA kernel; :func:`~conserve.compilation.modes.jit_quick` for functions
  compiled with a chosen mode.
* :mod:`.timing` — the seconds a run spends compiling, told apart from its steps.
* :mod:`.cache` — jax's persistent compilation cache, shared across processes (on by default).

**Loops as kernels.** XLA's CPU runtime runs a program as a sequence of small compiled kernels,
a while loop's body kernel by kernel at every iteration; for a model as small as the heavy top
that dispatch, not arithmetic, is most of a step. A while loop without library calls and below a
size in bytes XLA compiles as one kernel instead, control flow included. Importing conserve
raises that size, XLA's option :data:`LOOP_KERNEL_OPTION` (1 kB by default), to
:data:`LOOP_KERNEL_BYTES` through the environment variable ``XLA_FLAGS``, which XLA reads once,
when jax first computes — so conserve must be imported before anything runs on jax (an
``XLA_FLAGS`` that sets the option already is left as it is;
:func:`~conserve.compilation.modes.loops_as_kernels` tells whether it holds). The measurements
behind the modes and thresholds are in ``benchmarks/results/defaults.md`` (a section per
threshold), ``benchmarks/results/compile_times.md`` and ``benchmarks/README.md``.
"""

import os

#: XLA's CPU option (in ``--xla_backend_extra_options``): the largest while loop, in bytes
#: accessed, that XLA compiles as one kernel (see "Loops as kernels" above)
LOOP_KERNEL_OPTION = "xla_cpu_small_while_loop_byte_threshold"

#: the value conserve gives it: any loop XLA can compile as one kernel (conserve's own choose by
#: holding library calls or not)
LOOP_KERNEL_BYTES = 10**9


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

from . import cache  # noqa: E402  (light: configures jax's persistent cache without importing jax)

cache.configure_from_environment()
