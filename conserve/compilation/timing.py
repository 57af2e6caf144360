"""The seconds a run spends making programs (tracing, lowering, XLA's compilation), told apart
from the seconds of its steps, by jax's monitoring events."""

from __future__ import annotations

import contextlib
import threading
import time

import jax

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
