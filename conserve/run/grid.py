"""The time grid of a run with a fixed step: t0, t_end, dt checked as numbers of seconds, and the
number of steps (t_end rounded up to a whole step, up to round-off)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import ModelError, is_count

#: Most steps in one run (the step counter is an int32).
MAX_STEPS = 2**31 - 2


def time_grid(t0, t_end, dt, chunk, who="simulate"):
    """(t0, t_end, dt, number of steps) as checked floats and int: dt > 0, t_end > t0, a whole
    number of steps (t_end rounded up to one, up to round-off), at most ``MAX_STEPS``, dt above the
    times' round-off (64 units in the last place of the larger of ``|t0|``, ``|t_end|``: the nodes' times
    must differ); ``chunk`` an integer ≥ 1. A ModelError says which is wrong."""
    dt, t0, t_end = seconds("dt", dt, who), seconds("t0", t0, who), seconds("t_end", t_end, who)
    if not (dt > 0 and math.isfinite(dt)):
        raise ModelError(f"{who}: dt must be positive and finite, got {dt}.")
    if not (t_end > t0 and math.isfinite(t_end)):
        raise ModelError(f"{who}: t_end must be finite and > t0 = {t0}, got {t_end}.")
    if not (is_count(chunk) and chunk >= 1):
        raise ModelError(f"{who}: chunk must be an integer ≥ 1, got {chunk!r}.")
    ratio = (t_end - t0) / dt
    if ratio < 1.0 - 1e-9:
        warnings.warn(f"{who}: dt = {dt:g} s is longer than the span t_end − t0 = {t_end - t0:g} s: the run is one "
                      f"step, to t = {t0 + dt:g} s (the arguments are (system, t_end, dt): were t_end and dt "
                      "swapped?).", UserWarning, stacklevel=3)
    if not ratio <= MAX_STEPS:
        raise ModelError(f"{who}: (t_end − t0)/dt = {ratio:.3g} steps; a run takes at most {MAX_STEPS} steps (its "
                         "step counter is a 32-bit integer): use a larger dt or a shorter span, or continue in parts "
                         "(simulate(..., t0=...) from the last state).")
    ulp = np.spacing(max(abs(t0), abs(t_end)))  # the times' round-off
    if dt <= 64 * ulp:
        raise ModelError(f"{who}: dt = {dt:.3g} s is round-off of the times (floats near t = "
                         f"{max(abs(t0), abs(t_end)):.6g} s are {ulp:.3g} s apart), so the nodes t0 + n dt could not be "
                         "told apart; measure time from a nearer origin (t0 = 0) or take a larger dt.")
    return t0, t_end, dt, max(1, math.ceil(ratio * (1.0 - 1e-12) - 1e-9))  # whole steps up to round-off


def seconds(name, x, who="simulate"):
    """x as a float64 number of seconds; a float32 (or float16) input is read as the decimal it
    prints as (np.float32(0.3) is 0.3, not 0.30000001192…, which would add a step)."""
    try:
        a = np.asarray(x)
        if a.shape != () or a.dtype.kind not in "iuf":
            raise TypeError
        if a.dtype.kind == "f" and a.dtype.itemsize < 8:
            return float(np.format_float_positional(a[()], unique=True, trim="0"))
        return float(a)
    except (TypeError, ValueError):
        raise ModelError(f"{who}: {name} must be a number (s), got {x!r}.") from None
