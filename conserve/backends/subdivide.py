"""Step failure recovery: retry a step whose Newton iteration failed as 2, 4, 8, … sub-steps
(``simulate(..., on_failure="subdivide")``).

Each sub-step is a full energy-momentum step of the backend with h / 2^k, so the energy balance,
momentum maps and constraints hold exactly for the subdivided step as for any other (the node
t_{n+1} is reached by 2^k conserving steps); only the step's accuracy refers to the shorter
sub-steps. Attempts and sub-steps are two nested ``lax.while_loop`` around one copy of the
backend's step, so a run with recovery compiles once and costs one loop test per step when
nothing fails.

The returned :class:`~conserve.discrete.scheme.StepRecord` sums the Newton iterations over every
attempt, work and dissipation over the accepted attempt's sub-steps, keeps the residual history
of the last sub-step tried and records ``substeps`` = 2^k of the accepted attempt. The
multipliers returned are those of the last sub-step rescaled to the full step (λ̃ = (h²/2) λ):
λ at the end of the step rather than its mean (the reduced backend, which recovers its eliminated
multipliers after the run from the full step's equations, gives only a least-squares fit for a
subdivided step).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ..model.assembled import Model
from .base import Carry, StepBackend, Wrapper


@dataclass(frozen=True)
class Subdividing(Wrapper):
    """``inner`` with recovery: after a failed step, the step is retried as 2^k sub-steps of
    ``inner`` for k = 1 … ``max_subdivisions``; the contract of
    :class:`~conserve.backends.base.StepBackend`."""

    inner: StepBackend
    max_subdivisions: int = 6

    def step(self, model: Model, carry: Carry, t, h):
        def attempt(c):
            level, _, total = c
            n_sub = jnp.left_shift(jnp.int32(1), level)  # sub-steps (int32: max_subdivisions ≤ 30)
            shrink = n_sub.astype(h.dtype)  # 2^level in floating point (exact): squared, no overflow
            hs = h / shrink

            def sub_step(c):
                k, sub, acc = c
                new, record = self.inner.step(model, sub, t + k * hs, hs)
                ok = record.converged
                acc = acc._replace(iterations=acc.iterations + record.iterations, converged=ok,
                                   history=record.history, work=acc.work + record.work,
                                   dissipation=acc.dissipation + record.dissipation)
                return k + 1, jax.tree.map(lambda a, b: jnp.where(ok, b, a), sub, new), acc

            start = total._replace(converged=jnp.bool_(True), work=jnp.zeros_like(total.work),
                                   dissipation=jnp.zeros_like(total.dissipation), substeps=n_sub)
            first = carry._replace(multipliers=carry.multipliers / shrink**2)
            _, new, total = jax.lax.while_loop(lambda c: (c[0] < n_sub) & c[2].converged, sub_step,
                                               (jnp.int32(0), first, start))
            return (level + 1, new._replace(multipliers=new.multipliers * shrink**2),
                    total._replace(multipliers=new.multipliers * shrink**2))

        shapes = jax.eval_shape(self.inner.step, model, carry, t, h)
        none = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes[1])
        _, new, record = jax.lax.while_loop(lambda c: ~c[2].converged & (c[0] <= self.max_subdivisions), attempt,
                                            (jnp.int32(0), carry, none._replace(converged=jnp.bool_(False))))
        return new, record
