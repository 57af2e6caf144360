"""Newton's method for the implicit step, entirely inside jax (jit- and scan-compatible)."""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..model.terms import ROUNDOFF
from .linear import BlockTree, BorderedTree, Dense


@dataclass(frozen=True)
class Newton:
    """Options of the Newton iteration of every implicit step.

    Every unknown x_j has a scale w_j > 0 set by the backend (block by block: increments of
    positions by their own size, ``1 + |Δφ|``, directors and angles by 1, multipliers by the
    largest multiplier, ``1 + max|λ̃|``), and a step is accepted when the last correction satisfies
    ``|δx_j| ≤ tol · w_j`` for every j; with quadratic convergence the accepted iterate is then
    accurate to O(tol²). The scales do not grow with the distance from the origin, so a body in
    orbit (``|φ| ~ 1e7`` m) is converged as tightly as one at the origin.

    A step is also accepted at the round-off floor — the equations hold as well as floating
    point lets them, and what a correction still moves is round-off amplified by the Newton
    matrix (a wind-turbine model with a massive tower 70 m up: the multiplier of the tower's
    director normalisation, in its 10th digit; a joint 1e7 m from the origin, whose equations
    hold only to ε·1e7 m) — when all of these hold: a full Newton correction neither contracts
    (``|δx_k| > |δx_{k−1}|/2``, scaled) nor reduces the residual (``|r_k| > |r_{k−1}|/2``), it is
    below ``√tol · w``, and *every* residual row is at its round-off level,
    ``|r_i| ≤ ROUNDOFF · (Σ_j |J_ij| w_j + m_i)``: x then solves the equations with every unknown
    and every term perturbed by at most ROUNDOFF = 2¹⁰ ε relative
    (:data:`conserve.model.terms.ROUNDOFF`; a componentwise backward error after Oettli and
    Prager). The terms that scale with the unknowns (momenta M Δq, constraint forces Gᵀλ, spin
    increments) are measured by ``|J| w``; m_i is the size of the constant terms of constraint
    row i (the positions its points are made of, ``|x_a| + |x_b|``). A residual above round-off (a force law
    that jumps, say) is never accepted: the step fails (and is subdivided when
    ``simulate(..., on_failure="subdivide")``). Otherwise, after ``max_iterations`` or on a NaN,
    the step fails. The conservation error of a step is bounded by the Newton residual
    (tolerance or round-off), not by Δt.

    Attributes
    ----------
    tol : float
        Relative tolerance on the Newton correction (default 1e-12).
    max_iterations : int
        Iteration limit per step (default 25).
    implicit : bool
        Differentiate a solve by the implicit-function theorem at its converged root
        (``jax.lax.custom_root``: one linear solve with the step's Jacobian per derivative)
        instead of through the iterations, so that ``jax.grad`` of a step works (reverse mode
        cannot differentiate a ``while_loop``). Costs only tracing time (+10–25 % compile time,
        nothing per step); default False, :func:`conserve.step` turns it on.
    unconverged : str
        The derivatives (``implicit=True``) of a solve that did not converge: "nan" (default) makes
        them NaN, so a gradient through a run with any unconverged step is NaN, never a finite
        number that is wrong (the implicit-function rule holds only at a root); "keep" takes
        the rule at the last iterate anyway (an approximation of unknown quality). The solution
        itself is the same either way.
    members : str or None
        The name of the ``jax.vmap`` axis of an ensemble's members (``MEMBERS``, set by
        :func:`conserve.simulate_batch` through ``StepBackend.for_ensembles``; None, the default,
        for a single run): vmapped, a Newton matrix is formed for every member whenever one member
        needs it (``run_if``), so every member still correcting then takes a Newton step with
        it and keeps its factors, and the members of a group need Jacobians together rather than
        one after another.
    """

    tol: float = 1e-12
    max_iterations: int = 25
    implicit: bool = False
    members: str | None = None
    unconverged: str = "nan"

    def __post_init__(self):
        if not (isinstance(self.tol, numbers.Real) and 0 < self.tol < 1):
            raise ValueError(f"Newton: tol must lie in (0, 1), got {self.tol!r}.")
        if (isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, numbers.Integral)
                or self.max_iterations < 1):
            raise ValueError(f"Newton: max_iterations must be an integer ≥ 1, got {self.max_iterations!r}.")
        if self.unconverged not in ("nan", "keep"):
            raise ValueError(f"Newton: unconverged must be 'nan' or 'keep', got {self.unconverged!r}.")
        if self.members is not None and not isinstance(self.members, str):
            raise ValueError(f"Newton: members must name a vmapped axis (a str) or be None, got {self.members!r}.")
        object.__setattr__(self, "tol", float(self.tol))  # plain Python numbers (hashed with the compiled code)
        object.__setattr__(self, "max_iterations", int(self.max_iterations))


#: The name of the vmapped axis of an ensemble's members (:attr:`Newton.members`)
MEMBERS = "members"

#: A chord correction (with the last Jacobian's factors) is taken instead of a Newton one while it
#: is at most this fraction of the previous correction: the chord iteration's linear rate; a
#: correction that shrinks less means the factors no longer fit, and Newton takes over.
CHORD_CONTRACTION = 0.1

#: A chord correction δ_k (with this solve's factors or an earlier step's) is accepted only when it
#: is below the tolerance and the error it leaves is below the round-off of an O(1) unknown:
#: ρ/(1 − ρ)·s_k with the rates ρ_k = ‖δ_k‖/‖δ_{k−1}‖ (scaled as the tolerance). With factors carried
#: from earlier steps ρ is the largest rate ρ_k (k ≥ 2) whose δ_{k−1} was above the tolerance and
#: s_k = min(‖δ_k‖, ρ s_{k−1}); else (this solve's factors, or no such rate yet) ρ = min(ρ_k, ρ_{k−1})
#: and s_k = min(‖δ_k‖, ρ_{k−1}‖δ_{k−1}‖), with the rate of the chord before when that was a chord
#: iteration's rate: the first chord after a Newton correction is measured against that correction,
#: whose ratio understates the chord's rate (one unknown: Newton leaves e₁ = c e₀², the chord then
#: contracts by 2c e₀, twice e₁/e₀), so the next chord is judged by ρ_k and ‖δ_k‖ alone. Both
#: estimates discount round-off: near convergence a correction is noise of the residual's round-off,
#: which inflates its size and its rate although the error left is a fraction ρ of the last clean
#: correction's; with the rates of the noise, carried chords could not be accepted at the round-off
#: floor, and Jacobians would be formed only to accept. This solve's chords keep the minima of two
#: rates: judged as carried ones, they would take more iterations. A larger leftover is not
#: random: the chord iteration leaves it with the same sign step after step, and the energy drifts,
#: in proportion to this bound. With this solve's factors the estimate holds; with factors carried
#: from earlier steps it can miss the leftover by orders of magnitude: they are turned with the
#: bodies and their chords accepted only below ``CHORD_ERROR_CARRIED`` (measurements:
#: benchmarks/results/defaults.md, sections ``CHORD_ERROR`` and ``CHORD_ERROR_CARRIED``).
CHORD_ERROR = 1e-17

#: The bound of ``CHORD_ERROR`` for chords with factors carried from earlier steps, turned with the
#: bodies (:mod:`conserve.discrete.turning`): their rate estimates are less sure than this solve's,
#: and at ``CHORD_ERROR`` the energy of some models drifts; at this bound their energy balance holds
#: to round-off as with fresh factors (measurements: benchmarks/results/defaults.md, section
#: ``CHORD_ERROR_CARRIED``)
CHORD_ERROR_CARRIED = 1e-19


class NewtonMemory(NamedTuple):
    """Factors of the Newton matrix carried from step to step (simplified Newton across steps):
    ``factors`` in the linear solver's storage (:mod:`conserve.discrete.linear`), ``valid``
    (bool) whether they hold any (False at the start), and the ``reference`` the solver's
    :class:`~conserve.discrete.turning.Turn` keeps with them (the bodies' directors when they were
    made; None without one)."""

    factors: object
    valid: jax.Array
    reference: object = None


def newton_solve(residual, x0, options: Newton, weights, size, linear=Dense(), memory=None,
                 chord_error=CHORD_ERROR, turn=None, image=False):
    """Solve residual(x) = 0 from x0 by Newton's method, the Newton matrix's linear algebra by
    ``linear`` (:mod:`conserve.discrete.linear`: dense LU, or block elimination along a tree).

    Each iteration evaluates the residual r(x) and first tries the chord correction
    δ = −J_old⁻¹ r with the last factors (a back-substitution): if it is below the tolerance
    (see :class:`Newton`) and the error it leaves is below round-off (``CHORD_ERROR``: the
    observed rate ρ = ‖δ_k‖/‖δ_{k−1}‖ of the chord iteration — so not right after a Newton
    correction — times the correction, both discounted for the round-off noise of the
    residual), the step is accepted with it, which saves the Jacobian that a plain
    "last correction is small" test spends only to confirm convergence; if it shrinks fast enough
    for the next one to be below the tolerance (ρ at most ``CHORD_CONTRACTION``), it is taken as
    the next iterate: a simplified Newton step that costs no more iterations than a Newton step
    and saves its Jacobian (after a Newton correction the chord is typically ~1e-6 times it).
    Otherwise a full Newton correction with a fresh Jacobian follows (and is itself accepted if
    small, or at the round-off floor).

    With a ``memory`` of an earlier solve (the last step's; simplified Newton across steps,
    Hairer and Wanner, Solving ODEs II, §IV.8) its factors start the iteration: the first
    correction is their chord, later ones too while they contract by ``CHORD_CONTRACTION`` and
    enough iterations remain (the first that the next does not contract so is undone, unless it
    was below the tolerance, and Newton starts from where it was taken); such a chord is accepted
    only below ``CHORD_ERROR_CARRIED`` when a ``turn`` is given (the factors turned with the
    bodies), else below ``CHORD_ERROR``. A fresh Jacobian is formed only when they stop
    contracting, so most steps of a body or a tree need none (measurements:
    benchmarks/results/defaults.md, section ``Director.reuse``).

    Parameters
    ----------
    residual : x (n,) -> r (n,)
    x0 : (n,) initial guess
    options : :class:`Newton`
    weights : x (n,) -> w (n,) > 0, the scale of each unknown (see :class:`Newton`)
    size : (n,) ≥ 0, the size of the terms of each row of r that do not scale with the unknowns
        (constraint rows: their terms at q_n, so a joint 1e7 m from the origin is at round-off
        at ε·1e7 m); the other terms are measured by ``|J| w`` (see :class:`Newton`)
    chord_error : the bound on the error an accepted chord leaves (scaled; ``CHORD_ERROR``)
    turn : a :class:`~conserve.discrete.turning.Turn` Q, or None: chords with the ``memory``'s
        factors are then Q J_old⁻¹ Qᵀ (−r), the factors turned with the bodies since they were
        made, and new factors are kept with its ``reference``
    image : bool: ``residual`` returns (r, y(x)), y an image of the unknowns that costs as much as
        the residual (the structured reduced step's director unknowns, lift(x̂); the dense one's
        increments Δq(u)); the image of the solution is then returned too, as y of the last
        evaluated iterate plus the image of the last correction, not evaluated again, nor y of the
        unknowns rounded (not with ``options.implicit``). The image of a correction comes from
        ``linear.image_tangent(x, δx)`` (the tangent at the iterate x, once, for the last
        correction; :class:`~conserve.discrete.linear.Imaged`), else from
        ``linear.solve_image(factors, r)``, which returns (δx, δy) with y(x + δx) = y(x) + δy to
        second order (a correction whose image is tangent; every correction's)

    Returns
    -------
    x : solution (or the last iterate when not converged)
    iterations : int32, residual evaluations done
    converged : bool
    history : (max_iterations,) max-norm of the residual at each iterate (NaN after the last)
    memory : :class:`NewtonMemory` with the factors last used (for the next solve)
    y : (only with ``image``) the image of x
    """
    n_max = options.max_iterations
    n = x0.shape[0]
    residual = traced_once(residual, x0)
    if image and options.implicit:
        raise ValueError("newton_solve: image=True is not differentiable by the implicit-function theorem.")
    if memory is None or options.implicit:
        memory, turn = empty_memory(x0, linear), None
    if n == 0:  # nothing to solve (a structure without freedoms, e.g. a body welded to the ground)
        result = x0, jnp.int32(0), jnp.bool_(True), jnp.full((n_max,), jnp.nan, dtype=x0.dtype), memory
        return (*result, residual(x0)[1]) if image else result
    if not options.implicit:
        x, (k, converged, history, memory, y) = _iterate(residual, x0, options, weights, size, linear, memory,
                                                         chord_error, turn, image)
        return (x, k, converged, history, memory, y) if image else (x, k, converged, history, memory)

    def solve(residual, x0):  # aux as floats: custom_root gives integer aux wrong tangent types
        x, (k, converged, history, *_) = _iterate(residual, x0, options, weights, size, linear, memory, chord_error)
        return x, (k.astype(x.dtype), converged.astype(x.dtype), history)

    def tangent_solve(jvp, y):  # the implicit-function theorem: δx = −J⁻¹ ∂r/∂(closed-over) δ
        return linear.solve(linear.factorise(linear.jacobian(jvp, y)), y)

    # derivatives of the solution with respect to everything the residual closes over (the model's
    # parameters, the state, t, h) at the converged root, not through the iterations
    x, (k, converged, history) = jax.lax.custom_root(residual, x0, solve, tangent_solve, has_aux=True)
    converged = jax.lax.stop_gradient(converged) > 0
    if options.unconverged == "nan":
        x = nan_tangent_unless(x, converged)
    return x, k.astype(jnp.int32), converged, history, memory


@jax.custom_jvp
def nan_tangent_unless(x, ok):
    """x itself; its tangent (and so any derivative through it, forward or reverse) is NaN where
    the bool ``ok`` is False: the tangent times 1 or NaN, linear in the tangent, so reverse mode
    transposes it."""
    return x


@nan_tangent_unless.defjvp
def _nan_tangent_unless_jvp(primals, tangents):
    x, ok = primals
    return x, tangents[0] * jnp.where(ok, 1.0, jnp.nan).astype(x.dtype)


def traced_once(fn, x):
    """``fn`` (x (n,) -> (m,), closing over arrays of an enclosing trace) as a function whose
    Python code runs once: its jaxpr is made here and every use — residual, Jacobian-vector
    products, abstract evaluations — reuses it (a jitted function of explicit arguments, cached
    by jax), so tracing a step does not run the model's code once per use."""
    converted, consts = jax.closure_convert(fn, x)
    jitted = jax.jit(converted)
    return lambda y: jitted(y, *consts)


def run_if(pred, fn, otherwise):
    """``fn()`` if ``pred`` else ``otherwise`` (a pytree like fn's result), as a ``while_loop`` run
    at most once rather than a ``lax.cond``: alone the same, but under ``jax.vmap`` (an ensemble,
    :mod:`conserve.run.ensemble`) a cond with a batched predicate becomes a select that evaluates fn
    for every member at every call, while the loop runs fn (for all members, keeping its result
    where pred holds) only when some member's pred holds — a Newton Jacobian only when some
    member needs one, a step only while some member is still running. What fn closes over passes
    an optimisation barrier with the loop's flag, or XLA would hoist fn's work out of the loop (it
    depends on nothing the loop changes) and always do it; it stays a constant of the loop, not
    carried, so what the members share is not copied per member."""
    converted, consts = jax.closure_convert(fn)

    def body(carry):
        flag, tied = jax.lax.optimization_barrier((carry[0], consts))
        return ~flag, converted(*tied)

    return jax.lax.while_loop(lambda carry: carry[0], body, (pred, otherwise))[1]


def empty_memory(x0, linear=Dense(), reference=None) -> NewtonMemory:
    """A :class:`NewtonMemory` without factors for a system of x0's size (zeros of the solver's factor
    shapes, ``valid`` False), with this ``reference`` for a :class:`~conserve.discrete.turning.Turn`."""
    # solvers equal by value (others, by identity: not cached)
    cached = isinstance(linear, (Dense, BlockTree, BorderedTree))
    shapes_of = _factor_shapes if cached else _factor_shapes.__wrapped__
    shapes = shapes_of(linear, x0.shape[0], np.dtype(x0.dtype))
    return NewtonMemory(jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), shapes), np.bool_(False), reference)


@functools.lru_cache(maxsize=64)
def _factor_shapes(linear, n, dtype):
    """The shapes of ``linear``'s factors of an (n, n) system, traced once per solver and size (a
    trace of a run's start costs 9 ms): with the identity for the (square) residual, not the model's,
    whose Jacobian's trace costs as much as the step's (the reduced backend's Lifted solver
    differentiates the director residual it holds, whatever it is given)."""
    x = jax.ShapeDtypeStruct((n,), dtype)
    return jax.eval_shape(lambda x: linear.factorise(linear.jacobian(lambda y: y, x)), x)


def _iterate(residual, x0, options: Newton, weights, size, linear, memory, chord_error, turn=None, image=False):
    """The Newton iteration of :func:`newton_solve`: (x, (iterations, converged, history, memory,
    y(x), () without an image))."""
    inf = jnp.asarray(jnp.inf, x0.dtype)  # no rate or bound known yet

    n_max = options.max_iterations

    def scaled(dx, x_new):  # max_j |δx_j| / w_j
        return jnp.max(jnp.abs(dx) / weights(x_new))

    # the image of the last correction only, after the loop (``taken``: that correction)
    deferred = image and hasattr(linear, "image_tangent")

    def solve(factors, r):  # J⁻¹ r, and the image of the correction (without one, or deferred: no operations)
        return linear.solve_image(factors, r) if image and not deferred else (linear.solve(factors, r), ())

    def where(pred, a, b):  # for arrays and images
        return jax.tree.map(lambda u, v: jnp.where(pred, u, v), a, b)

    def chord_solve(factors, r, fresh):  # J⁻¹ r with this solve's factors, Q J_old⁻¹ Qᵀ r with carried ones
        if turn is None:
            return solve(factors, r)
        Q = turn.unless(fresh)  # one solve in the code, not one per branch of a cond (compile time)
        dx, dy = solve(factors, Q.backward(r))
        return Q.forward(dx), dy

    def body(carry):
        (x, factors, have, fresh, k, _, history, last_dx, last_rate, partner, clean, last_s, x_back, r_back, y_back,
         _, _) = carry
        r, y = residual(x) if image else (residual(x), ())
        y_step = () if deferred else y  # what the corrections' images are added to
        r_norm = jnp.max(jnp.abs(r))
        history = jax.lax.dynamic_update_index_in_dim(history, r_norm, k, 0)  # not a scatter: no loop of its own
        # the chord correction with the last factors (of this solve, or carried from an earlier one),
        # zero without any: computed either way and masked, not a lax.cond (whose branches and
        # operands cost more per iteration in a one-kernel loop than the solve they skip)
        chord, dy = where(have, chord_solve(factors, -r, fresh),
                          (jnp.zeros_like(r), jax.tree.map(jnp.zeros_like, y_step)))
        chord_size = scaled(chord, x + chord)
        rate = chord_size / last_dx  # 0 at k = 0; last_rate: the previous chord's (∞ if none or after Newton)
        # a chord with earlier factors that the next one does not contract by CHORD_CONTRACTION
        # (they no longer fit: e.g. a fast spin turned the directors far) is undone, and Newton
        # starts from where it was taken; not one below the tolerance (at round-off the next
        # cannot shrink). The test is the scaled corrections' contraction (Deuflhard's natural
        # monotonicity test), as for going on with chords, not the residual's max-norm, which
        # mixes rows of different scales: a first chord with one-step-old factors can shrink the
        # residual little while the corrections then contract fast, and undoing it would cost a
        # Jacobian every other step (measurements: benchmarks/results/defaults.md, section
        # ``CHORD_CONTRACTION``)
        back = (~fresh) & have & (k > 0) & (last_dx > options.tol) & ~(rate <= CHORD_CONTRACTION)
        x, r, y, have = where(back, x_back, x), where(back, r_back, r), where(back, y_back, y), have & ~back
        small = have & (k > 0) & (chord_size <= options.tol)
        # a chord (this solve's factors or earlier ones) is accepted when it is small and the error
        # it leaves is below round-off (CHORD_ERROR: else it biases the energy step after step):
        # ρ/(1 − ρ)·s_k; with carried factors ρ is the largest of their rates ρ_k, k ≥ 2, observed
        # on corrections above the tolerance (below it a correction is partly the noise of the
        # residual's round-off, which inflates its size and the rates; ρ_1 only until ρ_2 is
        # known: the first chord meets the predictor's error, not the iteration's, and its rate
        # overstates the iteration's) and s_k = min(‖δ_k‖, ρ s_{k−1}) what of ‖δ_k‖ is not noise.
        # The largest, not the last: the rates can alternate (an iteration matrix with complex or
        # opposite eigenvalues), and a small last rate then underestimates the leftover, which is
        # accepted with one sign step after step and drifts the energy (measurements:
        # benchmarks/results/defaults.md, section ``CHORD_ERROR_CARRIED``). Else (this solve's
        # factors, whose chords contract ~1e-4 per iteration, or no such rate yet) ρ = min(ρ_k, ρ_{k−1}),
        # s_k = min(‖δ_k‖, ρ_{k−1}‖δ_{k−1}‖), ρ_{k−1} only a chord iteration's rate (``partner``;
        # ∞ for the first chord after a Newton correction, whose ratio to it is Newton's contraction)
        pair = (k > 0) & (jnp.isfinite(last_rate) | ~fresh)  # rate: a chord iteration's (not after Newton)
        seen = pair & ~fresh & (last_dx >= options.tol)
        clean = jnp.where(seen, jnp.where(k >= 3, jnp.maximum(clean, rate), rate), clean)
        known = jnp.isfinite(clean)
        rho = jnp.where(known, clean, jnp.minimum(rate, partner))
        s = jnp.minimum(chord_size, jnp.where(known, clean * last_s, partner * last_dx))
        leftover = rho / (1.0 - rho) * s
        # ... and when ρ is a chord iteration's observed rate: right after a Newton correction
        # (fresh factors, last_rate ∞) the ratio is Newton's quadratic contraction, which
        # understates the chord's rate ‖I − J_old⁻¹J‖ when the error lies mostly in unknowns the
        # residual is linear in (the multipliers: Newton removes their error exactly, yet they
        # change J); accepting there would leave errors of one sign, and the energy would drift
        # (measurements: benchmarks/results/defaults.md, section ``CHORD_ERROR``)
        bound = chord_error if turn is None else jnp.where(fresh, chord_error, CHORD_ERROR_CARRIED)
        chord_ok = small & (rho < 1.0) & (leftover <= bound) & pair
        # a chord correction that contracts fast enough is as good as a Newton one and saves the
        # Jacobian: with this solve's factors, if the next chord will be small enough to accept;
        # with earlier factors, the first chord, and then while they contract by CHORD_CONTRACTION
        # and the iterations left still leave room for what Newton takes after them (a Newton
        # step, a chord taken, a chord accepted)
        contracting = jnp.where(fresh, (k > 0) & (rate <= CHORD_CONTRACTION) & (chord_size**2 <= options.tol * last_dx),
                                have & (k + 3 < n_max) & ((k == 0) | (rate <= CHORD_CONTRACTION)))

        def newton():
            J = linear.jacobian(residual, x)
            new_factors = linear.factorise(J)
            dx, dy = solve(new_factors, -r)
            dx_size = scaled(dx, x + dx)
            small = dx_size <= options.tol
            stalled = ((k > 0) & (dx_size > 0.5 * last_dx) & (r_norm > 0.5 * history[jnp.maximum(k - 1, 0)])
                       & (dx_size <= jnp.sqrt(options.tol)))
            # the round-off test only when stalled (|J| w costs a pass over J)
            floor = stalled & jax.lax.cond(
                stalled, lambda: jnp.all(jnp.abs(r) <= ROUNDOFF * (size + linear.abs_times(J, weights(x)))),
                lambda: jnp.bool_(False))
            return (x + dx, new_factors, jnp.bool_(True), small | floor, dx_size, inf, inf, inf, inf,
                    jax.tree.map(jnp.add, y_step, dy), dx if deferred else ())

        chord_rate = jnp.where(k > 0, rate, jnp.inf)
        need = ~(chord_ok | contracting)
        if options.members is not None:  # an ensemble's members (vmapped): a Jacobian for one is one for all
            # still iterating (a member that has stopped is not updated: its need is not counted)
            others = jax.lax.psum((need & cond(carry)).astype(jnp.int32), options.members) > 0
            need = others & ~chord_ok
        x_new, factors, fresh, done, last_dx, last_rate, partner, clean, last_s, y_new, taken = run_if(
            need, newton, (x + chord, factors, fresh, chord_ok, chord_size, chord_rate, jnp.where(pair, rate, inf),
                           clean, s, jax.tree.map(jnp.add, y_step, dy), chord if deferred else ()))
        return (x_new, factors, jnp.bool_(True), fresh, k + 1, done & jnp.all(jnp.isfinite(x_new)), history, last_dx,
                last_rate, partner, clean, last_s, x, r, y, y_new, taken)

    def cond(carry):
        x, k, converged = carry[0], carry[4], carry[5]
        return (~converged) & (k < n_max) & jnp.all(jnp.isfinite(x))

    history0 = jnp.full((n_max,), jnp.nan, dtype=x0.dtype)
    y0 = jnp.zeros(jax.eval_shape(residual, x0)[1].shape, x0.dtype) if image else ()
    x, factors, _, fresh, k, converged, history, *_, x_last, _, y_last, y, taken = jax.lax.while_loop(
        cond, body, (x0, memory.factors, memory.valid, jnp.bool_(False), jnp.int32(0), jnp.bool_(False), history0,
                     inf, inf, inf, inf, inf, x0, jnp.zeros_like(x0), y0, () if deferred else y0,
                     jnp.zeros_like(x0) if deferred else ()))
    if deferred:  # y of the last evaluated iterate plus the image of the last correction, at that iterate
        y = y_last + linear.image_tangent(x_last, taken)
    reference = None if turn is None else jnp.where(fresh, turn.reference, memory.reference)
    return x, (k, converged, history, NewtonMemory(factors, converged, reference), y)
