"""Step failure recovery: retry a step whose Newton iteration failed as 2, 4, 8, … sub-steps
(``simulate(..., on_failure="subdivide")``).

Each sub-step is a full energy-momentum step of the backend with h / 2^k, so the energy balance,
momentum maps and constraints hold exactly for the subdivided step as for any other (the node
t_{n+1} is reached by 2^k conserving steps); only the step's accuracy refers to the shorter
sub-steps. Attempts and sub-steps are two nested ``lax.while_loop`` around one copy of the
backend's step, so a run with recovery compiles once and costs one loop test per step when
nothing fails.

The returned :class:`~conserve.discrete.scheme.StepInfo` sums the Newton iterations over every
attempt, work and dissipation over the accepted attempt's sub-steps, keeps the residual history
of the last sub-step tried and records ``substeps`` = 2^k of the accepted attempt. The
multipliers returned are those of the last sub-step rescaled to the full step (λ̃ = (h²/2) λ):
λ at the end of the step rather than its mean (the reduced backend, which recovers its eliminated
multipliers after the run from the full step's equations, gives only a least-squares fit for a
subdivided step).
"""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp


@lru_cache(maxsize=None)  # one wrapper per (step, depth): the compiled-run cache keys on it
def subdividing(step, max_subdivisions: int):
    """The step of a backend with recovery: after a failure, the step is retried with 2^k
    sub-steps for k = 1 … ``max_subdivisions``. Same contract as
    :func:`conserve.backends.director.step`."""

    def recovering_step(model, state, lam, t, h, newton):
        def attempt(carry):
            level, _, _, total = carry
            n_sub = jnp.left_shift(jnp.int32(1), level)  # sub-steps (int32: max_subdivisions ≤ 30)
            shrink = n_sub.astype(h.dtype)  # 2^level in floating point (exact): squared, no overflow
            hs = h / shrink

            def sub_step(c):
                k, sub_state, sub_lam, acc = c
                new, new_lam, info = step(model, sub_state, sub_lam, t + k * hs, hs, newton)
                ok = info.converged
                keep = lambda a, b: jnp.where(ok, b, a)  # noqa: E731
                acc = acc._replace(iterations=acc.iterations + info.iterations, converged=ok, history=info.history,
                                   work=acc.work + info.work, dissipation=acc.dissipation + info.dissipation)
                return k + 1, jax.tree.map(keep, sub_state, new), keep(sub_lam, new_lam), acc

            start = total._replace(converged=jnp.bool_(True), work=jnp.zeros_like(total.work),
                                   dissipation=jnp.zeros_like(total.dissipation), substeps=n_sub)
            _, new, new_lam, total = jax.lax.while_loop(
                lambda c: (c[0] < n_sub) & c[3].converged, sub_step, (jnp.int32(0), state, lam / shrink**2, start))
            return level + 1, new, new_lam * shrink**2, total

        shapes = jax.eval_shape(lambda *a: step(*a, newton), model, state, lam, t, h)
        none = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes[2])
        init = (jnp.int32(0), state, lam, none._replace(converged=jnp.bool_(False)))
        _, new, new_lam, info = jax.lax.while_loop(
            lambda c: ~c[3].converged & (c[0] <= max_subdivisions), attempt, init)
        return new, new_lam, info

    return recovering_step
