"""Newton's method for the implicit step, entirely inside jax (jit- and scan-compatible)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp


@dataclass(frozen=True)
class Newton:
    """Options of the Newton iteration of every implicit step.

    A step is accepted only when the last correction satisfies
    ``|δx|∞ ≤ tol · (1 + |x|∞ + scale)`` (x = increments and scaled multipliers; ``scale`` the
    magnitude of the configuration, |q_n|∞, which sets the round-off floor of the constraint
    residuals); with quadratic convergence the accepted iterate is then accurate to
    O(tol²). It is never accepted on a stall: after ``max_iterations`` without that, or on a
    NaN, the step fails.
    The conservation error of a step is bounded by the Newton tolerance, not by Δt.

    Attributes
    ----------
    tol : float
        Relative tolerance on the Newton correction (default 1e-12).
    max_iterations : int
        Iteration limit per step (default 25).
    """

    tol: float = 1e-12
    max_iterations: int = 25

    def __post_init__(self):
        if not (0 < self.tol < 1):
            raise ValueError(f"Newton: tol must lie in (0, 1), got {self.tol}.")
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise ValueError(f"Newton: max_iterations must be an integer ≥ 1, got {self.max_iterations!r}.")


def newton_solve(residual, x0, options: Newton, scale=0.0):
    """Solve residual(x) = 0 from x0 with the Jacobian from ``jax.jacfwd`` and dense LU.

    ``scale`` (≥ 0) enters the stopping test (see :class:`Newton`).

    Returns
    -------
    x : solution (or the last iterate when not converged)
    iterations : int32, Newton iterations done
    converged : bool
    history : (max_iterations,) max-norm of the residual at each iterate (NaN after the last)
    """
    n_max = options.max_iterations
    jac = jax.jacfwd(residual)

    def body(carry):
        x, k, _, history = carry
        r = residual(x)
        dx = jnp.linalg.solve(jac(x), -r)
        x_new = x + dx
        done = jnp.max(jnp.abs(dx)) <= options.tol * (1.0 + jnp.max(jnp.abs(x_new)) + scale)
        finite = jnp.all(jnp.isfinite(x_new))
        history = history.at[k].set(jnp.max(jnp.abs(r)))
        return x_new, k + 1, done & finite, history

    def cond(carry):
        x, k, converged, _ = carry
        return (~converged) & (k < n_max) & jnp.all(jnp.isfinite(x))

    history0 = jnp.full((n_max,), jnp.nan, dtype=x0.dtype)
    x, k, converged, history = jax.lax.while_loop(
        cond, body, (x0, jnp.int32(0), jnp.bool_(False), history0)
    )
    return x, k, converged, history
