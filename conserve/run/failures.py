"""What a run that goes wrong says and keeps: the ConvergenceError of a failed step (what Newton
did, why, what to try), the laws that turn a step's numbers into NaN, the refusal of a non-finite
initial energy, and the partial Solution an interrupted run (Ctrl-C, a failing ``progress``
callback) hands on with its exception. Used by :func:`conserve.simulate` (fixed and adaptive
steps) and :func:`conserve.simulate_batch`."""

from __future__ import annotations

import jax
import numpy as np

from ..compilation.modes import jit_quick
from ..errors import ConvergenceError, ModelError
from ..model.assembled import Model, State
from ..model.parameters import bound


def keep_partial(err: BaseException, solution_so_far, n, t):
    """Give an exception that stops a run between its chunks — an error of the ``progress``
    callback, Ctrl-C (KeyboardInterrupt) — what the finished chunks computed: ``err.partial_solution``
    = ``solution_so_far()`` (n steps, to t in s) and a note saying so; the exception keeps its type.
    If the Solution cannot be built (the error came from building it), the exception goes on as it is."""
    try:
        err.partial_solution = solution_so_far()
    except Exception:  # noqa: BLE001  (the original error is the one to report)
        return
    if hasattr(err, "add_note"):  # Python ≥ 3.11
        err.add_note(f"conserve: the run stopped after step {n} (t = {t:.6g} s); its {n} steps are kept in "
                     "err.partial_solution (after an uncaught error in an interactive session: "
                     "sys.last_value.partial_solution).")


def refuse_non_finite_energy(assembly, first, t0, who="simulate"):
    """A ModelError naming the laws if the initial node's (``first``, a piece) energy is not finite."""
    energy = first["diag_kinetic_energy"] + first["diag_potential_energy"]
    if not np.all(np.isfinite(energy)):
        culprits = non_finite_laws(assembly, assembly.initial_state, t0, 0.0, ("", "")) or ["the kinetic energy"]
        raise ModelError(f"{who}: the initial state's energy is not finite: {', '.join(culprits)} at t0 = {t0:g} s. "
                         "A law is evaluated outside its domain there (a log or root of a negative number, a "
                         "division by a zero distance): move the parts or fix the law.")


def non_finite_laws(assembly, state: State, t, h, where=(" at the step's start",
                                                          " at its end predicted from the start velocities")) -> list:
    """Where a step's NaN comes from: the potentials whose energy and the motors and loads whose
    power are not finite at the step's start (``state`` at t_n = t, the laws at t + h/2) or at its
    end predicted from there (q_n + h v_n at t + h), as phrases naming them (and ``where``)."""
    both = jax.tree.map(lambda a: np.stack([a, a]), state)  # the start, and the end predicted from it
    both = both._replace(q=both.q + np.array([[0.0], [h]]) * both.v)
    values = _law_values(assembly.model, both, np.array([t + 0.5 * h, t + h]))
    energies, forces, powers, gaps = (np.asarray(a) for a in values)
    layout = assembly.layout
    found = {}  # name: phrase, the first place it is not finite
    for k in (0, 1):
        for name, e, f in zip(layout.potential_names, energies[k], forces[k]):
            if not np.isfinite(e):
                found.setdefault(name, f"the potential energy of '{name}' ({e:.3g} J{where[k]})")
            elif not f:
                found.setdefault(name, f"the force of '{name}' (the gradient of its energy{where[k]})")
        for name, w in zip(layout.work_names, powers[k]):
            if not np.isfinite(w):
                found.setdefault(name, f"the power of '{name}' ({w:.3g} W{where[k]}: its force or torque is "
                                       "not finite)")
        for (name, row), g in zip(layout.constraint_rows, gaps[k]):
            if not np.isfinite(g):  # a prescribed motion's law, a user constraint
                found.setdefault(name, f"the constraint '{name}' ({row}: {g:.3g}{where[k]})")
    return list(found.values())


def non_finite_laws_after(solution, t, h) -> list:
    """:func:`non_finite_laws` of the step t → t + h (s) from a partial ``solution``'s last node; a
    diagnosis that fails gives none (it must not cost the partial solution)."""
    last = State(*(np.asarray(getattr(solution, k))[-1] for k in ("q", "v", "s", "p", "theta")),
                 np.zeros_like(solution.q[-1]))
    try:
        return non_finite_laws(solution.assembly, last, t, h)
    except Exception:  # noqa: BLE001
        return []


@jit_quick(mode="unoptimized")
def _law_values(model: Model, states: State, t):
    """(each potential's energy (J), whether its gradient is finite, each motor's and load's power
    (W), each constraint row's residual) at each of the states (stacked) and times t."""
    def values(state, t):
        gradients = jax.jacfwd(model.potential_energies)(state.q)
        return (model.potential_energies(state.q), jax.numpy.all(jax.numpy.isfinite(gradients), axis=1),
                model.applied_forces(t, state.q, state.v, state.s, state.theta, state.p)[2],
                model.all_constraints(state.q, state.theta, state.s, t=t))

    with bound(model.parameters):
        return jax.vmap(values)(states, t)


#: A rigid body turning more than this many radians per step is a step too coarse for the motion:
#: at t0 it gets a CoarseStepWarning, and a step that fails so is said to be too large.
COARSE_TURN = 1.0


def part_spin_rates(layout, q, v):
    """{part name: ``|ω|`` in rad/s} of the full-body parts (four blocks) at coordinates q and
    velocities v (…, n_q), ω = ½ Σ d_i × ḋ_i (arrays of the leading shape: all members at once)."""
    Q, V = (np.asarray(x).reshape(*np.shape(x)[:-1], -1, 3) for x in (q, v))
    rates = {}
    for part in layout.parts:
        if part.n_blocks == 4:
            d = slice(layout.offsets[part.name] + 1, layout.offsets[part.name] + 4)  # its directors
            rates[part.name] = np.linalg.norm(0.5 * np.sum(np.cross(Q[..., d, :], V[..., d, :]), axis=-2), axis=-1)
    return rates


def too_large_step(solution, t, h, settings):
    """Why the step t → t + h (s) from a partial ``solution``'s last node is plainly too large, or
    None: a dt longer than the run's span (t_end and dt swapped?), or a part turning more than
    :data:`COARSE_TURN` rad in it at its start rate (the fastest one named, with the step that
    would turn it 1 rad). A diagnosis that fails gives None (it must not cost the partial solution)."""
    reasons = []
    t0, t_end = settings.get("t0"), settings.get("t_end")
    if t0 is not None and t_end is not None and h > t_end - t0:
        reasons.append(f"dt = {h:.6g} s is longer than the run's span t_end − t0 = {t_end - t0:.6g} s (the "
                       "arguments are simulate(system, t_end, dt): were t_end and dt swapped?)")
    try:
        rates = part_spin_rates(solution.assembly.layout, solution.q[-1], solution.v[-1])
    except Exception:  # noqa: BLE001
        rates = {}
    if rates:
        name = max(rates, key=lambda k: rates[k])
        rate = float(rates[name])
        if rate * h > COARSE_TURN:
            reasons.append(f"'{name}' turns {rate * h:.3g} rad per step (|ω| = {rate:.4g} rad/s at t = {t:.6g} s), "
                           f"more than {COARSE_TURN:g} rad: take dt ≤ {COARSE_TURN / rate:.3g} s, "
                           f"{rate * h / COARSE_TURN:.3g}× smaller")
    return "; ".join(reasons) or None


def convergence_error(n, t, h, newton, history, solution, settings) -> ConvergenceError:
    """The ConvergenceError of a run whose step n (t → t + h in s) failed: first a step plainly too
    large for the run (:func:`too_large_step`), then what Newton did (from its residual ``history``),
    why (a NaN's laws by :func:`non_finite_laws`, a stalled residual, a singular Newton matrix; not
    guessed when the step is too large), what to try, and the ``solution`` of the n converged steps."""
    coarse = too_large_step(solution, t, h, settings)
    finite = bool(np.all(np.isfinite(history))) and history.size == newton.max_iterations
    what = f"did not converge in {newton.max_iterations} iterations" if finite else "produced NaN/inf"
    if not finite:  # name the laws that give it
        culprits = non_finite_laws_after(solution, t, h)
        if culprits:
            what += (f"; not finite: {', '.join(culprits)} — a law evaluated outside its domain (a log or root "
                     "of a negative number, a division by a zero distance) or returning NaN")
    tail = history[-4:]
    at_roundoff = history <= 1e-12 * max(history[0], 1.0)
    if finite and at_roundoff[-1] and not np.any(at_roundoff[:-1]):
        what += (": the residual reached round-off at the last iteration, too late to confirm the step's "
                 "error below round-off (one or two more iterations would have)")
    elif finite and np.any(at_roundoff):
        what += (" although the residual reached round-off: the Newton matrix is (nearly) singular, e.g. a "
                 "kinematic singularity (a mechanism at a change point, aligned axes) or constraints that "
                 "became dependent")
    elif finite and tail.size > 1 and np.max(tail) <= 4 * np.min(tail) and coarse is None:
        what += (f": the residual stalled at {np.min(tail):.2e}, above round-off, so the equations have no "
                 "solution near this step — typically a law that jumps (a force or torque switching on a "
                 "position or velocity threshold; smooth it, e.g. with jnp.tanh) or a kinematic singularity")
    if settings["on_failure"] == "subdivide":
        what += f", also when retried as 2 … {2 ** settings['max_subdivisions']} sub-steps"
    hist = ", ".join(f"{r:.2e}" for r in history)
    return ConvergenceError(
        f"step {n} (t = {t:.6g} s -> {t + h:.6g} s): "
        + (f"the step is too large: {coarse}. " if coarse else "")
        + f"Newton {what}; residual history [{hist}]. "
        + f"Kept {n} converged steps in err.partial_solution. Try a smaller dt, a larger "
        "Newton(max_iterations=...)"
        + (", on_failure='subdivide'" if settings["on_failure"] == "raise" else "")
        + (f", backend=cs.Director(linear='dense') (this run's Newton matrix is '{solution.stats['newton_matrix']}', "
           "its sparsity sampled at the start: a coupling that appears later, a force law off at t0, is missed)"
           if finite and coarse is None and solution.stats["newton_matrix"] in ("tree", "bordered tree", "coloured")
           else "")
        + ", or check the model for unbounded forces.",
        partial_solution=solution, step=n, time=t, residual_history=history,
    )
