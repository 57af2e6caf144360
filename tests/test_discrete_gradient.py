"""The invariant-space discrete gradient: directionality, consistency, a finite 0/0 limit."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import once

from conserve.discrete import discrete_gradient

ENERGIES = {
    "spring": lambda pi: 3.0 * (jnp.sqrt(pi[0]) - 1.2) ** 2,
    "central": lambda pi: -2.0 / jnp.sqrt(pi[0]),
    "coupled": lambda pi: jnp.cos(pi[0]) * pi[1] ** 2 + jnp.exp(0.3 * pi[1]),
}
finite = st.floats(0.2, 3.0)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(ENERGIES)), a=st.lists(finite, min_size=2, max_size=2),
       b=st.lists(finite, min_size=2, max_size=2))
def test_directionality(name, a, b):
    """∇̄U·Δπ = U(π1) − U(π0): the property that makes the energy balance exact."""
    U = ENERGIES[name]
    k = 1 if name != "coupled" else 2
    p0, p1 = jnp.array(a[:k]), jnp.array(b[:k])
    lhs = discrete_gradient(U, p0, p1) @ (p1 - p0)
    assert abs(lhs - (U(p1) - U(p0))) <= 1e-12 * (1 + abs(U(p0)) + abs(U(p1)))


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(ENERGIES)), a=st.lists(finite, min_size=2, max_size=2))
def test_consistency_with_gradient(name, a):
    U = ENERGIES[name]
    k = 1 if name != "coupled" else 2
    p = jnp.array(a[:k])
    np.testing.assert_allclose(discrete_gradient(U, p, p), jax.grad(U)(p), rtol=1e-14)
    # a small step gives the midpoint gradient up to O(|Δπ|²)
    dp = 1e-4 * jnp.ones(k)
    mid = jax.grad(U)(p + dp / 2)
    np.testing.assert_allclose(discrete_gradient(U, p, p + dp), mid, rtol=1e-7, atol=1e-9)


def test_zero_over_zero_limit_has_finite_derivatives():
    """Newton differentiates the discrete gradient: its Jacobian must stay finite at Δπ = 0."""
    U = ENERGIES["coupled"]
    p0 = jnp.array([0.7, 1.3])
    half_hessian = 0.5 * jax.hessian(U)(p0)
    jacobian = once(jax.jacfwd(lambda p1: discrete_gradient(U, p0, p1)))
    for eps, rtol in ((0.0, 1e-12), (1e-12, 1e-10), (1e-8, 1e-7), (1e-4, 1e-3)):
        J = jacobian(p0 + eps)
        assert np.all(np.isfinite(J))
        np.testing.assert_allclose(J, half_hessian, rtol=rtol)
