import jax.numpy as jnp

import conserve as cs
from conserve._x64 import x64_enabled


def test_x64_is_enabled_by_import():
    assert x64_enabled()
    assert jnp.zeros(1).dtype == jnp.float64


def test_solution_arrays_are_float64():
    sol = cs.simulate(cs.problems.free_body(), t_end=0.05, dt=1e-2)
    assert sol.q.dtype == sol.v.dtype == sol.energy.total.dtype == jnp.float64
