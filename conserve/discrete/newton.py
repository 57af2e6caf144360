"""Newton's method for the implicit step, entirely inside jax (jit- and scan-compatible)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ..model.terms import ROUNDOFF
from .linear import Dense


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
    """

    tol: float = 1e-12
    max_iterations: int = 25
    implicit: bool = False

    def __post_init__(self):
        if not (0 < self.tol < 1):
            raise ValueError(f"Newton: tol must lie in (0, 1), got {self.tol}.")
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise ValueError(f"Newton: max_iterations must be an integer ≥ 1, got {self.max_iterations!r}.")


#: A chord correction (with the last Jacobian's factors) is taken instead of a Newton one while it
#: is at most this fraction of the previous correction: the chord iteration's linear rate; a
#: correction that shrinks less means the factors no longer fit, and Newton takes over.
CHORD_CONTRACTION = 0.1


def newton_solve(residual, x0, options: Newton, weights, size, linear=Dense()):
    """Solve residual(x) = 0 from x0 by Newton's method, the Newton matrix's linear algebra by
    ``linear`` (:mod:`conserve.discrete.linear`: dense LU, or block elimination along a tree).

    Each iteration evaluates the residual r(x) and first tries the chord correction
    δ = −J_old⁻¹ r with the last LU factors (a back-substitution): if it is below the tolerance
    (see :class:`Newton`) the step is accepted with it, which saves the Jacobian that a plain
    "last correction is small" test spends only to confirm convergence; if it is not yet below the
    tolerance but shrinks fast enough for the next one to be (at the observed rate δ_k/δ_{k−1},
    which must also be at most ``CHORD_CONTRACTION``), it is taken as the next iterate: a
    simplified Newton step that costs no more iterations than a Newton step and saves its
    Jacobian (after a Newton correction the chord is typically ~1e-6 times it). Otherwise a full
    Newton correction with a fresh Jacobian follows (and is itself accepted if small, or at the
    round-off floor).

    Parameters
    ----------
    residual : x (n,) -> r (n,)
    x0 : (n,) initial guess
    options : :class:`Newton`
    weights : x (n,) -> w (n,) > 0, the scale of each unknown (see :class:`Newton`)
    size : (n,) ≥ 0, the size of the terms of each row of r that do not scale with the unknowns
        (constraint rows: their terms at q_n, so a joint 1e7 m from the origin is at round-off
        at ε·1e7 m); the other terms are measured by |J| w (see :class:`Newton`)

    Returns
    -------
    x : solution (or the last iterate when not converged)
    iterations : int32, residual evaluations done
    converged : bool
    history : (max_iterations,) max-norm of the residual at each iterate (NaN after the last)
    """
    n_max = options.max_iterations
    n = x0.shape[0]
    if n == 0:  # nothing to solve (a structure without freedoms, e.g. a body welded to the ground)
        return x0, jnp.int32(0), jnp.bool_(True), jnp.full((n_max,), jnp.nan, dtype=x0.dtype)
    if not options.implicit:
        x, (k, converged, history) = _iterate(residual, x0, options, weights, size, linear)
        return x, k, converged, history

    def solve(residual, x0):  # aux as floats: custom_root gives integer aux wrong tangent types
        x, (k, converged, history) = _iterate(residual, x0, options, weights, size, linear)
        return x, (k.astype(x.dtype), converged.astype(x.dtype), history)

    def tangent_solve(jvp, y):  # the implicit-function theorem: δx = −J⁻¹ ∂r/∂(closed-over) δ
        return linear.solve(linear.factorise(linear.jacobian(jvp, y)), y)

    # derivatives of the solution with respect to everything the residual closes over (the model's
    # parameters, the state, t, h) at the converged root, not through the iterations
    x, (k, converged, history) = jax.lax.custom_root(residual, x0, solve, tangent_solve, has_aux=True)
    return x, k.astype(jnp.int32), converged > 0, history


def _iterate(residual, x0, options: Newton, weights, size, linear):
    """The Newton iteration of :func:`newton_solve`: (x, (iterations, converged, history))."""
    n_max = options.max_iterations

    def scaled(dx, x_new):  # max_j |δx_j| / w_j
        return jnp.max(jnp.abs(dx) / weights(x_new))

    def body(carry):
        x, factors, k, _, history, last_dx = carry
        r = residual(x)
        r_norm = jnp.max(jnp.abs(r))
        history = history.at[k].set(r_norm)
        # the chord correction with the last factors (none yet at k = 0)
        chord = jax.lax.cond(k > 0, lambda: linear.solve(factors, -r), lambda: jnp.zeros_like(r))
        chord_size = scaled(chord, x + chord)
        chord_ok = (k > 0) & (chord_size <= options.tol)
        # a chord correction that contracts fast enough to be accepted at the next iteration is as
        # good as a Newton one (no more iterations) and saves the Jacobian
        contracting = ((k > 0) & (chord_size <= CHORD_CONTRACTION * last_dx)
                       & (chord_size**2 <= options.tol * last_dx))

        def newton(_):
            J = linear.jacobian(residual, x)
            new_factors = linear.factorise(J)
            dx = linear.solve(new_factors, -r)
            dx_size = scaled(dx, x + dx)
            small = dx_size <= options.tol
            stalled = ((k > 0) & (dx_size > 0.5 * last_dx) & (r_norm > 0.5 * history[jnp.maximum(k - 1, 0)])
                       & (dx_size <= jnp.sqrt(options.tol)))
            # the round-off test only when stalled (|J| w costs a pass over J)
            floor = stalled & jax.lax.cond(
                stalled, lambda: jnp.all(jnp.abs(r) <= ROUNDOFF * (size + linear.abs_times(J, weights(x)))),
                lambda: jnp.bool_(False))
            return x + dx, new_factors, small | floor, dx_size

        x_new, factors, done, last_dx = jax.lax.cond(
            chord_ok | contracting, lambda _: (x + chord, factors, chord_ok, chord_size), newton, None)
        return x_new, factors, k + 1, done & jnp.all(jnp.isfinite(x_new)), history, last_dx

    def cond(carry):
        x, _, k, converged, _, _ = carry
        return (~converged) & (k < n_max) & jnp.all(jnp.isfinite(x))

    # no factors before the first Newton correction (the chord is not tried at k = 0)
    factors0 = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype),
                            jax.eval_shape(lambda x: linear.factorise(linear.jacobian(residual, x)), x0))
    history0 = jnp.full((n_max,), jnp.nan, dtype=x0.dtype)
    x, _, k, converged, history, _ = jax.lax.while_loop(
        cond, body, (x0, factors0, jnp.int32(0), jnp.bool_(False), history0, jnp.asarray(jnp.inf, x0.dtype)))
    return x, (k, converged, history)
