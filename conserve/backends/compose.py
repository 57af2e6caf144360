"""Higher order by symmetric composition (``simulate(..., order=4|6)``): one step of size h is s
steps of a conserving step backend with sizes γ₁h, …, γ_s h (Yoshida 1990; Suzuki 1990;
Hairer, Lubich and Wanner, Geometric Numerical Integration (GNI), §II.4 and §V.3).

The energy-momentum step is symmetric (its map with −h is its inverse: the midpoint velocities,
discrete gradients and loads at t_{n+½} are all symmetric) and of order 2, so a composition with
symmetric coefficients (γ_i = γ_{s+1−i}, Σγ_i = 1) whose order conditions hold is of the higher
order. Each sub-step is a full conserving step — the sub-steps with γ_i < 0 go backwards in time
— so energy balance, momentum maps and constraints hold exactly at every sub-step and therefore
at every node, whatever h. The discrete work and dissipation of the step are the sums over its
sub-steps (a damper's dissipation c Δs²/(γ_i h) is negative in a backward sub-step: the step's
energy balance E_{n+1} − E_n = W − D stays exact, but D of one step may be negative).

Both orders compose the *doubled* step Ψ_h = Φ_{h/2}∘Φ_{h/2}, not the step Φ_h itself. The
index-3 midpoint step is symmetric but not a smooth near-identity map on the velocities: its
equations hold them only through G(q_{n+½})(v_n + v_{n+1}) = 0, so their component c normal to
the constraints obeys c_{n+1} = −c_n + O(h²) — a parasitic mode with multiplier −1, outside the
expansion in odd powers of h that composition relies on. Composed directly, stage i leaves
±γ_i²h² in c and the stages' contributions do not cancel (Suzuki's five leave γ₃²h²), and through
the curvature of the constraints c feeds the tangential velocities: the configuration still
converges at order 4, but ω, the velocities and the velocity constraints at the nodes only at
order 2 (torque-free body, J = (1, 2, 3): ω error 7.6e-5 at Δt = 0.05, order 2.00); Kahan–Li's
coefficients composed directly give order 4 instead of 6. Two equal half steps undo the sign
flip to leading order; the doubled step is symmetric and of order 2 and composes like a smooth
one: every quantity at the nodes — configuration, velocities, ω, rotor and joint rates — has the
composition's order, and the velocity constraints hold to O(h^p) at the nodes (order 2: O(h²)).

Order 4 is Suzuki's five-stage composition of Ψ, γ₁ = γ₂ = γ₄ = γ₅ = 1/(4 − 4^{1/3}),
γ₃ = 1 − 4γ₁ (a smaller error constant than the three-stage triple jump's, GNI §V.3.2): ten
steps per step. Order 6 is Kahan and Li's nine-stage composition of Ψ (1997; GNI eq. V.3.11):
eighteen steps per step. Observed orders in ``tests/test_compose.py``.

The reported multipliers of a composed step are the impulse mean Σγ_i λ_i (the constraint
impulse over the step divided by h), as (h²/2)·λ; the reduced backend recovers the multipliers it
eliminates from the full step's midpoint equations, a least-squares fit for a composed step.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ..model.assembled import Model
from .base import Carry, StepBackend, Wrapper

_SUZUKI = 1.0 / (4.0 - 4.0 ** (1.0 / 3.0))
_KAHAN_LI = (0.39216144400731413928, 0.33259913678935943860, -0.70624617255763935981, 0.082213596293550800230)
_KAHAN_LI = (*_KAHAN_LI, 1.0 - 2.0 * sum(_KAHAN_LI), *_KAHAN_LI[::-1])

#: order -> the sub-step fractions γ_i (symmetric, summing to 1): Suzuki's five stages (order 4) and
#: Kahan–Li's nine (order 6), each stage two equal half steps (see the module docstring)
COEFFICIENTS = {order: tuple(half for g in stages for half in (0.5 * g, 0.5 * g))
                for order, stages in ((4, (_SUZUKI, _SUZUKI, 1.0 - 4.0 * _SUZUKI, _SUZUKI, _SUZUKI)), (6, _KAHAN_LI))}


@dataclass(frozen=True)
class Composition(Wrapper):
    """``inner`` (an order-2 symmetric step backend) composed to order 4 or 6: each step is
    ``len(COEFFICIENTS[order])`` sub-steps γ_i h of ``inner`` (a ``lax.scan`` over one copy of its
    step, so the compiled code does not grow with the number of stages)."""

    inner: StepBackend
    composed_order: int = 4

    def __post_init__(self):
        if self.composed_order not in COEFFICIENTS:
            raise ValueError(f"Composition: order must be one of {sorted(COEFFICIENTS)}, got {self.composed_order!r}.")

    @property
    def order(self):
        return self.composed_order

    @property
    def fractions(self):
        """The sub-step fractions γ_i (s,)."""
        return COEFFICIENTS[self.composed_order]

    def step(self, model: Model, carry: Carry, t, h):
        gamma = jnp.asarray(self.fractions, jnp.result_type(h, jnp.float64))
        starts = jnp.concatenate([jnp.zeros(1, gamma.dtype), jnp.cumsum(gamma)[:-1]])  # t_i = t + h Σ_{j<i} γ_j
        shapes = jax.eval_shape(self.inner.step, model, carry, t, h)[1]
        zeros = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)

        def stage(c, g_start):
            sub, acc = c
            g, start = g_start
            # λ̃ = (h_i²/2) λ: the last stage's λ as this stage's initial guess
            new, record = self.inner.step(model, sub._replace(multipliers=g**2 * sub.multipliers), t + start * h, g * h)
            ok = acc.converged & record.converged
            acc = acc._replace(iterations=acc.iterations + record.iterations, converged=ok,
                               history=jnp.where(acc.converged, record.history, acc.history),
                               work=acc.work + record.work, dissipation=acc.dissipation + record.dissipation,
                               substeps=jnp.maximum(acc.substeps, record.substeps),
                               multipliers=acc.multipliers + record.multipliers / g)  # Σ γ_i (h²/2) λ_i
            return (new._replace(multipliers=new.multipliers / g**2), acc), None

        (new, record), _ = jax.lax.scan(stage, (carry, zeros._replace(converged=jnp.bool_(True))), (gamma, starts))
        return new, record


def check_order(order):
    """``order`` as an int among 2 and the composed orders, or a ValueError saying which exist."""
    if order not in (2, *COEFFICIENTS) or isinstance(order, bool):
        raise ValueError(f"order must be 2 (the energy-momentum step) or {' or '.join(map(str, COEFFICIENTS))} "
                         f"(its symmetric compositions, conserve.backends.compose), got {order!r}.")
    return int(order)
