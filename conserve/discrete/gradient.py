"""Gonzalez discrete gradient of an energy U(π) in the space of its invariants π (Gonzalez 1996).

An element declares invariants π(q) that are quadratic (or linear) in q and an energy U(π).
Its discrete force is ∇̄V(q_n, q_{n+1}) = ∇π(q_{n+½})ᵀ ∇̄U(π_n, π_{n+1}); because π is
quadratic, π_{n+1} − π_n = ∇π(q_{n+½}) Δq exactly, so ∇̄V·Δq = ΔU (exact energy balance),
and because π is invariant under rotations/translations the force has no net moment
(momentum conservation) — Gonzalez 1996, Betsch & Steinmann 2001.
"""

import jax
import jax.numpy as jnp

#: Below |Δπ| ≤ SMALL |π| (|π|² = |π_n|² + |π_{n+1}|², relative so that it does not depend on
#: units) the midpoint gradient ∇U(π̄) replaces the difference quotient; that changes the
#: energy by ~ U‴ |Δπ|³/24 ≲ 1e-18 U per step. The threshold is not smaller because the
#: quotient's *Jacobian* (which Newton uses) carries round-off ~ eps/(|Δπ|/|π|)²: 1e-4 here.
SMALL = 1e-6


def discrete_gradient(energy, pi0, pi1):
    """``∇̄U(π0, π1) = ∇U(π̄) + [(U(π1) − U(π0) − ∇U(π̄)·Δπ) / |Δπ|²] Δπ``  (Gonzalez 1996, eq. 3.6).

    Satisfies the directionality ∇̄U·Δπ = U(π1) − U(π0) and consistency ∇̄U(π, π) = ∇U(π).
    For a single invariant it is the difference quotient ΔU/Δπ. The 0/0 limit is guarded by a
    double ``jnp.where`` so that value *and* jax derivatives stay finite for Δπ → 0.

    Parameters
    ----------
    energy : callable (k,) -> scalar
    pi0, pi1 : (k,) invariants at t_n and t_{n+1}

    Returns
    -------
    (k,) array
    """
    mid = 0.5 * (pi0 + pi1)
    dpi = pi1 - pi0
    grad_mid = jax.grad(energy)(mid)
    norm2 = jnp.sum(dpi * dpi)
    small = norm2 <= SMALL**2 * (jnp.sum(pi0 * pi0) + jnp.sum(pi1 * pi1)) + jnp.finfo(norm2.dtype).tiny
    safe_norm2 = jnp.where(small, 1.0, norm2)
    correction = (energy(pi1) - energy(pi0) - jnp.sum(grad_mid * dpi)) / safe_norm2
    return grad_mid + jnp.where(small, 0.0, correction) * dpi
