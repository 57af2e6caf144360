"""Energy-consistent adaptive steps: ``simulate(system, t_end, dt="adaptive", rtol=…, atol=…)``.

Every accepted node is reached by energy-momentum steps of the step backend, so the energy
balance, the momentum maps and every constraint hold exactly at every node whatever the sizes;
adaptivity only chooses the sizes. The local error is estimated on the configuration y = (q, θ)
in the weighted RMS norm ``‖e_i / (atol + rtol·max(|y_i|, |ŷ_i|))‖`` and an attempt is accepted when it
is at most 1. Two estimates:

* ``"history"`` (default for the order-2 step): the step's local error in q is h³ q⁽³⁾/12 (the
  trapezoidal rule's on q' = v, v' = a; Zienkiewicz and Xie 1991), with q⁽³⁾ from the third
  divided difference of the new node and the last three (Milne's device, as in variable-step
  trapezoidal codes). It costs no extra solve — one Newton solve per attempt — but needs three
  nodes before the new one: until it has them (the run's first attempts) an attempt is checked by
  step doubling as below, so no step, the first included, is taken unchecked.
* ``"doubling"`` (default for orders 4 and 6, :mod:`conserve.backends.compose`): each attempt takes
  one step Φ_h and two half steps Φ_{h/2}∘Φ_{h/2} from the same node; the half steps' error is
  ≈ (y_{h/2,h/2} − y_h)/(2^p − 1) (Richardson; Hairer, Nørsett and Wanner, Solving ODEs I, §II.4),
  and they become the nodes. Any order, three solves per attempt.

Velocities are in neither: the index-3 midpoint step's velocities carry an O(h²) component normal
to the constraints whose sign alternates from step to step (:mod:`conserve.backends.compose`),
so their differences measure that parasitic component rather than the accuracy; positions are
free of it.

Step sizes follow the PI controller of Gustafsson (1991; Hairer and Wanner, Solving ODEs II,
§IV.2), h_new = h·min(f_max, max(f_min, κ err^−α err_prev^β)) with α = 0.7/(p + 1),
β = 0.4/(p + 1), κ = 0.9, f_min = 0.2, f_max = 5 (1 right after a rejection). An attempt whose
Newton iterations fail is rejected and retried with h/4; a run whose next step would fall below
``dt_min`` stops with a ConvergenceError that keeps every accepted node. Every time in ``saveat``
(and t_end) is reached exactly — the step before it is shortened to land on it — and with
``saveat`` only those nodes are kept (each with the work, dissipation and Newton iterations of its
interval and the multipliers of its last step); without, every accepted node is. A step that
would leave less than itself before the next save time (or t_end) is replaced by two equal steps
to it, so no sliver of a step is left, and save times closer than 1e-9 of the span
(:func:`save_times`) are one node: a step between them would be round-off.

Adaptivity pays where the step a tolerance needs varies along the run: one period of an
eccentric orbit (e = 0.9, :class:`conserve.problems.KeplerOrbit`) to a position error of 1e-4 takes
~1600 adaptive steps against ~14 000 fixed ones (``tests/test_adaptive.py``,
``benchmarks/work_precision.py``). The time loop is a ``lax.scan`` over attempts in compiled chunks
(fixed steps: a ``lax.while_loop`` that stops at the run's end, :mod:`conserve.run.simulate`), with one
copy of the backend's step scanned over an attempt's solves.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..backends import Carry, StepBackend
from ..compilation.modes import compiler_options
from ..compilation.timing import run_times
from ..control.controller import reported
from ..discrete.newton import run_if
from ..errors import ConvergenceError, ModelError
from ..model.assembled import State
from ..model.parameters import bound
from ..results.solution import diagnostics
from .chunks import kernel_code
from .failures import keep_partial, non_finite_laws_after
from .pieces import NODE_FIELDS, assemble_solution, control_columns


@dataclass(frozen=True)
class Adaptive:
    """Adaptive steps: ``simulate(..., dt=cs.Adaptive(rtol=…, atol=…))``, or ``dt="adaptive"`` with
    ``rtol`` and ``atol`` (see the module docstring).

    Attributes
    ----------
    rtol, atol : relative and absolute tolerance of the local error of the configuration (m for
        positions, 1 for directors, rad for spin angles)
    estimate : "auto" (default: "history" for the order-2 step, "doubling" for orders 4 and 6),
        "history" or "doubling" (see the module docstring)
    dt0 : the first attempt's size in s (default: 1e-4 of the span, at least dt_min); checked like
        every attempt (the history estimate starts by step doubling), so a dt0 too large only costs
        rejected attempts
    dt_min : the smallest step in s before the run fails (default, and at least: the times'
        round-off, :func:`~conserve.run.adaptive.time_tolerance` — 1e-9 of the span —, below which a step would be
        round-off)
    dt_max : the largest step in s (default: the span)
    """

    rtol: float = 1e-6
    atol: float = 1e-9
    dt0: float | None = None
    dt_min: float | None = None
    dt_max: float | None = None
    estimate: str = "auto"
    safety: float = 0.9
    min_factor: float = 0.2
    max_factor: float = 5.0

    def __post_init__(self):
        for name in ("rtol", "atol"):
            x = getattr(self, name)
            if not (isinstance(x, (int, float)) and math.isfinite(x) and x >= 0):
                raise ModelError(f"simulate: {name} must be a finite number ≥ 0, got {x!r}.")
        if self.rtol == 0 and self.atol == 0:
            raise ModelError("simulate: rtol and atol cannot both be 0 (adaptive steps need a tolerance).")
        if self.estimate not in ("auto", "history", "doubling"):
            raise ModelError(f"simulate: Adaptive(estimate=...) must be 'auto', 'history' or 'doubling', got "
                             f"{self.estimate!r}.")
        for name in ("dt0", "dt_min", "dt_max"):
            x = getattr(self, name)
            if x is not None and not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
                raise ModelError(f"simulate: {name} must be a positive number of seconds, got {x!r}.")
        if self.dt_min is not None and self.dt_max is not None and self.dt_min > self.dt_max:
            raise ModelError(f"simulate: Adaptive(dt_min={self.dt_min!r}, dt_max={self.dt_max!r}): dt_min must not "
                             "exceed dt_max (the smallest step allowed and the largest, in s).")

    def sizes(self, span, floor=0.0):
        """(dt0, dt_min, dt_max) in s for a run over ``span`` s whose steps must not be shorter than
        ``floor`` s (the default dt_min, and the least)."""
        dt_max, dt_min = self.dt_max or span, max(self.dt_min or floor, floor)
        return min(max(self.dt0 or 1e-4 * span, dt_min), dt_max), dt_min, dt_max

    def estimator(self, order):
        """The error estimate for a step of ``order``: "history" for order 2, else "doubling"."""
        return self.estimate if self.estimate != "auto" else ("history" if order == 2 else "doubling")


def error_norm(error, y0, y1, rtol, atol):
    """The weighted RMS norm ``‖error_i / (atol + rtol·max(|y0_i|, |y1_i|))‖`` of a local error
    estimate of the configuration y = (q, θ), y0 and y1 the configurations it lies between."""
    scale = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    return jnp.sqrt(jnp.mean((error / scale) ** 2))


def third_difference(y, t):
    """The third divided difference y[t_0, t_1, t_2, t_3] (m,) of configurations y (4, m) at times
    t (4,), newest first (the third derivative is about 6 times it)."""
    d1 = (y[:-1] - y[1:]) / (t[:-1] - t[1:])[:, None]
    d2 = (d1[:-1] - d1[1:]) / (t[:-2] - t[2:])[:, None]
    return (d2[0] - d2[1]) / (t[0] - t[3])


#: the stages of an attempt: (start from the previous stage's result, size / h, time offset / h):
#: one step Φ_h, then two half steps Φ_{h/2}∘Φ_{h/2} from the same node — taken by every attempt
#: with step doubling, with the history estimate only while it has too few nodes
STAGES = ((False, 1.0, 0.0), (False, 0.5, 0.0), (True, 0.5, 0.5))


def _chunk_fn(backend: StepBackend, length, estimate, safety, min_factor, max_factor):
    """The compiled stretch of ``length`` attempts with the error ``estimate`` ("history" or
    "doubling") and the controller's constants (:class:`Adaptive`; its sizes and tolerances are
    arguments of the compiled program; see the module docstring)."""
    p = backend.order
    alpha, beta = 0.7 / (p + 1), 0.4 / (p + 1)
    history = estimate == "history"

    @jax.jit  # traced once for its abstract evaluation and its use in the loop
    def attempt(model, carry: Carry, t, h, h_last, halves):
        """The attempt's stages with one copy of the step: stacked Carry and StepRecord (3, …); the
        half steps are taken only where ``halves`` (zeros otherwise)."""
        # multipliers carried as λ̃/size² (λ/2), rescaled to each stage's size
        normal = carry._replace(multipliers=carry.multipliers / h_last**2)

        columns = tuple(jnp.array(column) for column in zip(*STAGES))

        def step(k, previous):
            """Stage k from the attempt's start or from ``previous`` (the stage before)."""
            from_previous, fraction, offset = (column[k] for column in columns)
            start = jax.tree.map(lambda a, b: jnp.where(from_previous, b, a), normal, previous)
            size = fraction * h
            with bound(model.parameters):
                new, record = backend.step(model, start._replace(multipliers=start.multipliers * size**2),
                                           t + offset * h, size)
            return new._replace(multipliers=new.multipliers / size**2), record

        def stage(k, loop):
            previous, stacked = loop
            new, record = step(k, previous)
            return new, jax.tree.map(lambda buffer, x: buffer.at[k].set(x), stacked, (new, record))

        shapes = jax.eval_shape(step, 0, normal)
        stacked = jax.tree.map(lambda a: jnp.zeros((len(STAGES), *a.shape), a.dtype), shapes)
        # a loop of one trip (the history estimate's step) or three (step doubling: one step, two halves)
        return jax.lax.fori_loop(0, jnp.where(halves, len(STAGES), 1), stage, (normal, stacked))[1]

    def run(model, carry: Carry, t, h, h_last, err_prev, past, saves, k_save, t_end, dt_min, dt_max, rtol, atol):
        shapes = jax.eval_shape(attempt, model, carry, t, h, h_last, jnp.bool_(True))
        nothing = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)
        pick = lambda tree, k: jax.tree.map(lambda a: a[k], tree)  # noqa: E731  (one stage's)

        def body(loop, _):
            carry, t, h, h_last, err_prev, past, k_save, done, failed, failure = loop
            y_past, t_past, n_past = past
            active = ~done & ~failed
            target = saves[k_save]
            gap = target - t
            land = h >= (1.0 - 1e-9) * gap  # the next save time (or t_end) is within reach
            halve = ~land & (2.0 * h > gap)  # a step of h would leave a sliver: two equal steps instead
            h_try = jnp.where(land, gap, jnp.where(halve, 0.5 * gap, h))
            t_new = jnp.where(land, target, t + h_try)
            # the history estimate needs the new node and three before it: until then, step doubling
            start_up = (n_past < 3) if history else jnp.bool_(False)
            halves = start_up if history else jnp.bool_(True)
            stages, records = run_if(active, lambda: attempt(model, carry, t, h_try, h_last, halves), nothing)
            ran = jnp.stack([jnp.bool_(True), halves, halves])  # the stages taken
            last = jax.tree.map(lambda a, b: jnp.where(halves, a, b), pick(stages, 2), pick(stages, 0))
            y_new = jnp.concatenate([last.state.q, last.state.theta])
            y_single = jnp.concatenate([stages.state.q[0], stages.state.theta[0]])
            converged = jnp.all(records.converged | ~ran)
            error = (y_new - y_single) / (2.0**p - 1.0)  # Richardson: (two half steps − one step)/(2^p − 1)
            if history:  # h³ y'''/12 from the new node and the last three
                error = jnp.where(start_up, error, 0.5 * h_try**3 * third_difference(
                    jnp.concatenate([y_new[None], y_past]), jnp.concatenate([t_new[None], t_past])))
            err = error_norm(error, y_past[0], y_new, rtol, atol)
            err = jnp.where(converged & jnp.isfinite(err), err, jnp.inf)
            accept = active & (err <= 1.0)
            # PI controller on the error of one step of the attempt's size (a start-up attempt's is
            # of its two half steps; one whole step's is 2^p times it); a rejected attempt is retried
            # smaller (h/4 after a Newton failure)
            err_step = jnp.where(start_up, 2.0**p * err, err)
            factor = safety * jnp.maximum(err_step, 1e-10) ** -alpha * jnp.maximum(err_prev, 1e-4) ** beta
            factor = jnp.clip(factor, min_factor, jnp.where(accept, max_factor, 1.0))
            factor = jnp.where(converged, factor, 0.25)
            proposal = jnp.minimum(h_try * factor, dt_max)
            # a step shortened to land on a save time (or halved before it) does not shrink the next one
            h_new = jnp.where(accept & (land | halve), jnp.maximum(proposal, jnp.minimum(h, dt_max)), proposal)
            h_new = jnp.where(active, h_new, h)
            too_small = active & (h_new < dt_min) & ~(accept & (t_new >= t_end))  # (an accepted attempt is kept)
            worst = jnp.argmin(records.converged | ~ran)  # the first stage whose Newton failed (0 if none did)
            failure = jax.tree.map(lambda new, old: jnp.where(too_small, new, old),
                                   (records.history[worst], records.iterations[worst], jnp.where(accept, t_new, t),
                                    h_new), failure)
            size = jnp.where(halves, 0.5, 1.0) * h_try  # the last step's
            new_carry = jax.tree.map(lambda old, new: jnp.where(accept, new, old),
                                     carry, last._replace(multipliers=last.multipliers * size**2))
            y_half = jnp.concatenate([stages.state.q[1], stages.state.theta[1]])
            one = (jnp.concatenate([y_new[None], y_past[:-1]]), jnp.concatenate([t_new[None], t_past[:-1]]))
            two = (jnp.concatenate([y_new[None], y_half[None], y_past[:-2]]),
                   jnp.concatenate([t_new[None], (t + 0.5 * h_try)[None], t_past[:-2]]))
            shifted = (*jax.tree.map(lambda a, b: jnp.where(halves, a, b), two, one),
                       jnp.minimum(n_past + jnp.where(halves, 2, 1), 3))
            past = jax.tree.map(lambda old, new: jnp.where(accept, new, old), past, shifted)
            landed = accept & land
            loop = (new_carry, jnp.where(accept, t_new, t), h_new, jnp.where(accept, size, h_last),
                    jnp.where(accept, err_step, err_prev), past, k_save + landed,
                    done | (landed & (target >= t_end)), failed | too_small, failure)
            # the attempt's nodes: the two half steps', or (slot 1) its one step's
            node_slots = lambda tree: jax.tree.map(  # noqa: E731
                lambda a: jnp.stack([a[1], jnp.where(halves, a[2], a[0])]), tree)
            output = {"nodes": node_slots(stages.state), "records": node_slots(records), "halves": halves,
                      "control": node_slots(reported(stages.control)),
                      "t": t, "t_new": t_new, "h": h_try, "err": err, "accepted": accept, "landed": landed,
                      "active": active}
            return loop, output

        init = (carry, t, h, h_last, err_prev, past, k_save, jnp.bool_(False), jnp.bool_(False),
                (jnp.full(nothing[1].history.shape[1:], jnp.nan), jnp.int32(0), t, h))
        return jax.lax.scan(body, init, None, length=length)

    return jax.jit(run)


#: Times closer than this fraction of the span (or than 64 units in the last place of the times) are
#: one time: a step that short would be round-off (its velocities 2Δq/h carry the configuration's
#: round-off divided by h: the heavy top's energy balance is off by 5e-13 of its energy after one
#: step of 1e-10 s, by 3e-4 after one of 1e-16 s).
SAME_TIME = 1e-9


def time_tolerance(t0, t_end):
    """The distance in s below which two times of a run from t0 to t_end are the same
    (:data:`SAME_TIME` of the span, at least 64 units in the last place of the larger time)."""
    return max(SAME_TIME * (t_end - t0), 64 * np.spacing(max(abs(t0), abs(t_end))))


def save_times(saveat, t0, t_end, who="simulate"):
    """The times an adaptive run lands on (s, increasing, in (t0, t_end], t_end last): those of
    ``saveat`` (any order; None: none) and t_end, times closer than :func:`time_tolerance` merged
    into one — the first of them, t0 (whose node stands for them: they are dropped) or t_end when
    one of those is among them — with a UserWarning when the merged times differ. Times outside
    [t0, t_end] by more than the tolerance, or not finite, are a ModelError."""
    tol = time_tolerance(t0, t_end)
    times = np.asarray([] if saveat is None else saveat, float).ravel()
    if not (np.all(np.isfinite(times)) and np.all(times >= t0 - tol) and np.all(times <= t_end + tol)):
        raise ModelError(f"{who}: saveat times must lie in [t0, t_end] = [{t0}, {t_end}] s (t0 is the first node "
                         "anyway); got " + ", ".join(f"{x:.17g}" for x in times[~((times >= t0 - tol) &
                                                                                  (times <= t_end + tol))]) + ".")
    groups = []  # [the time kept, the times it stands for]
    for x in np.sort(np.concatenate([[t0], times, [t_end]])):
        if groups and x - groups[-1][1][0] <= tol:
            groups[-1][1].append(x)
        else:
            groups.append([x, [x]])
    if len(groups) < 2:
        raise ModelError(f"{who}: the span t_end − t0 = {t_end - t0:.3g} s is round-off of the times (t0 = {t0!r} s); "
                         "measure time from a nearer origin (t0 = 0).")
    groups[-1][0] = t_end  # (t0's group keeps t0: the sorted times start with it)
    merged = [(kept, members) for kept, members in groups if np.ptp(members) > 0]
    if merged:
        warnings.warn(f"{who}: saveat times closer than {tol:.3g} s are one node (a step between them would be "
                      "round-off): " + "; ".join(", ".join(f"{x:.17g}" for x in sorted(set(members)))
                                                 + f" -> {kept:.17g}" for kept, members in merged)
                      + ". Round the times (np.round(saveat, 9)) to silence this.", UserWarning, stacklevel=4)
    return np.array([kept for kept, _ in groups[1:]])


_compiled: dict = {}


def simulate_adaptive(assembly, settings, backend: StepBackend, carry: Carry, controller: Adaptive, saves,
                      first, mode, progress):
    """The adaptive run of :func:`conserve.simulate` (its checked arguments; ``saves`` the times it
    lands on, :func:`save_times`, of which it keeps only those when ``settings["saveat"]``, else
    every node; ``first`` the node at t0 as a piece): (Solution, ConvergenceError or None)."""
    model = assembly.model
    t0, t_end, chunk = settings["t0"], settings["t_end"], settings["chunk"]
    dt0, dt_min, dt_max = controller.sizes(t_end - t0, time_tolerance(t0, t_end))
    padded = np.full(1 << max(0, len(saves) - 1).bit_length(), np.inf)  # a power of two: few shapes
    padded[:len(saves)] = saves
    y0 = np.concatenate([carry.state.q, carry.state.theta])
    past = (np.repeat(y0[None], 3, axis=0), np.full(3, t0), np.int32(1))  # the last nodes (y, t), how many
    f64 = jnp.float64
    args = [model, carry, f64(t0), f64(dt0), f64(dt0), f64(1.0), past, jnp.asarray(padded), jnp.int32(0),
            f64(t_end), f64(dt_min), f64(dt_max), f64(controller.rtol), f64(controller.atol)]
    code, options = kernel_code(backend, model, mode)  # the compiled loop's; its steps agree to round-off
    # the controller's constants are compiled in, its sizes and tolerances are arguments
    control = (controller.estimator(backend.order), controller.safety, controller.min_factor, controller.max_factor)
    key = (code, chunk, control, mode, jax.tree.structure(args), tuple(np.shape(a) for a in jax.tree.leaves(args)))
    tic = time.perf_counter()
    if key not in _compiled:
        _compiled[key] = _chunk_fn(code, chunk, *control).lower(*args).compile(compiler_options(options))
    run = _compiled[key]
    compile_time = time.perf_counter() - tic

    pieces, open_steps = [first], []  # open_steps: the steps since the last kept node (saveat)
    rejections, attempts, steps_taken, done, failed = [], 0, 0, False, False
    kept_nodes = lambda: sum(len(p["node_t"]) for p in pieces[1:])  # noqa: E731
    with run_times(compile_time) as times:  # what the loop compiles on first use (diagnostics) is compilation
        try:
            while not (done or failed):
                (carry, t, h, h_last, err_prev, past, k_save, done, failed, failure), out = run(*args)
                args[1:7], args[8] = [carry, t, h, h_last, err_prev, past], k_save
                done, failed = bool(done), bool(failed)
                out = jax.tree.map(np.asarray, out)
                active = out["active"]
                attempts += int(np.sum(active))
                rejected = active & ~out["accepted"]
                rejections += list(zip(out["t"][rejected], out["h"][rejected], out["err"][rejected]))
                steps = _accepted_steps(out)
                steps_taken += len(steps)
                if not settings["saveat"]:
                    kept = steps
                else:
                    open_steps += steps
                    kept, open_steps = _saved_intervals(open_steps)
                if kept:
                    pieces.append(_piece(model, kept, NODE_FIELDS))
                if progress is not None:
                    progress(float(t) - t0, t_end - t0)
        except BaseException as err:  # a progress callback's error, Ctrl-C: the nodes kept so far are kept
            n = kept_nodes()
            keep_partial(err, lambda: assemble_solution(assembly, settings, backend, pieces, n, False, None,
                                                        *times())[0],
                         n, float(pieces[-1]["node_t"][-1]) if n else t0)
            raise
        compile_time, run_time = times()
    n = kept_nodes()
    solution, _ = assemble_solution(assembly, settings, backend, pieces, n, False, None, compile_time, run_time)
    solution.stats.update({"steps": steps_taken, "time_per_step": run_time / max(steps_taken, 1),
                           "attempts": attempts, "accepted_steps": attempts - len(rejections),
                           "rejected_steps": len(rejections), "error_estimate": controller.estimator(backend.order),
                           "rtol": controller.rtol, "atol": controller.atol})
    solution.rejected_attempts = np.array(rejections, float).reshape(-1, 3)  # (t, h, error) of each
    error = None
    if failed:
        t_stop, h_next = float(failure[2]), float(failure[3])
        history = np.asarray(failure[0])[:int(failure[1])]
        why = ("the error estimate or Newton's method needs ever smaller steps: a singularity, a law that jumps, or "
               "tolerances near round-off")
        if not np.all(np.isfinite(history)):  # NaN at every step size: name the laws that give it
            culprits = non_finite_laws_after(solution, t_stop, h_next)
            why = ("Newton produced NaN/inf at every step size" + (f"; not finite: {', '.join(culprits)}" if culprits
                                                                  else "") + " — a law evaluated outside its domain or "
                   "returning NaN")
        error = ConvergenceError(
            f"adaptive steps stopped at t = {t_stop:.6g} s: the next step the tolerances ask for, {h_next:.3g} s, is "
            f"below dt_min = {dt_min:.3g} s ({why}); kept the {n} steps before in err.partial_solution. Try larger "
            "rtol/atol" + (" or a smaller dt_min" if dt_min > time_tolerance(t0, t_end) else
                           " (dt_min is the times' round-off: a shorter step would be round-off)")
            + ", or check the model.",
            partial_solution=solution, step=n, time=t_stop, residual_history=history)
    return solution, error


def _accepted_steps(out):
    """The steps of a chunk's accepted attempts (the two half steps of an attempt that took them,
    else its one step) as dicts: the node (a tuple of State fields), its time t, the step's size h,
    the StepRecord fields and whether the node is a save time's."""
    steps, rec = [], out["records"]
    for k in np.flatnonzero(out["accepted"]):
        t, h, halves = out["t"][k], out["h"][k], bool(out["halves"][k])
        for j in ((0, 1) if halves else (1,)):
            last = j == 1
            steps.append({"node": tuple(a[k, j] for a in out["nodes"]),
                          "t": out["t_new"][k] if last else t + h / 2, "h": h / 2 if halves else h,
                          "iterations": rec.iterations[k, j], "work": rec.work[k, j],
                          "dissipation": rec.dissipation[k, j], "multipliers": rec.multipliers[k, j],
                          "substeps": rec.substeps[k, j], "save": bool(last and out["landed"][k]),
                          "control": jax.tree.map(lambda a: a[k, j], out.get("control"))})
    return steps


def _saved_intervals(steps):
    """(the kept nodes of ``steps`` — those at save times — each with its interval's sums, the
    steps after the last kept one)."""
    kept, start = [], 0
    for i, step in enumerate(steps):
        if step["save"]:
            interval = steps[start:i + 1]
            kept.append({**step, "iterations": sum(s["iterations"] for s in interval),
                         "work": np.sum([s["work"] for s in interval], axis=0),
                         "dissipation": np.sum([s["dissipation"] for s in interval], axis=0),
                         "substeps": sum(s["substeps"] for s in interval)})
            start = i + 1
    return kept, steps[start:]


def _piece(model, steps, fields):
    """Kept steps as a piece of a Solution (node_*, node_t, diag_*, step_* with step_h)."""
    nodes = State(*(np.stack([s["node"][i] for s in steps]) for i in range(len(State._fields))))
    t = np.array([s["t"] for s in steps], float)
    stack = lambda key: np.stack([np.asarray(s[key]) for s in steps])  # noqa: E731
    control = jax.tree.map(lambda *xs: np.stack(xs), *[s["control"] for s in steps])
    return {**{f"node_{k}": getattr(nodes, k) for k in fields}, "node_t": t,
            **{f"diag_{k}": a for k, a in diagnostics(model, nodes, t).items()}, **control_columns(model, control),
            "step_lam": stack("multipliers"), "step_iterations": stack("iterations"), "step_work": stack("work"),
            "step_dissipation": stack("dissipation"), "step_substeps": stack("substeps"), "step_h": stack("h")}
