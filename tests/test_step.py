"""The public pure step ``cs.step(model, state, t, h)`` under jax.jit, jax.vmap and jax.grad."""

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve import problems

H = 1e-3


@pytest.fixture(scope="module")
def top():
    assembly = problems.heavy_top().assemble()
    return assembly, cs.initial_state(assembly)


def test_jitted_step_is_the_first_step_of_simulate_and_conserves(top):
    assembly, state = top
    model = assembly.model
    new, record = jax.jit(lambda s: cs.step(model, s, 0.0, H))(state)
    assert bool(record.converged)
    sol = cs.simulate(assembly, H, H)
    np.testing.assert_allclose(new.q, sol.q[1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(new.v, sol.v[1], rtol=0, atol=1e-12)
    e0, e1 = cs.energy(model, state).total, cs.energy(model, new).total
    assert abs(e1 - e0) <= 1e-13 * abs(e0)
    assert np.max(np.abs(model.constraints(new.q, new.theta, new.s))) <= 1e-13
    # the multipliers' guess changes nothing but the iterations
    again, _ = cs.step(model, state, 0.0, H, multipliers=record.multipliers)
    np.testing.assert_allclose(again.q, new.q, rtol=0, atol=1e-14)


def test_vmapped_step_over_eight_initial_states_equals_each_single_step(top):
    assembly, state = top
    model = assembly.model
    # eight initial spins: scaling v keeps it tangent to the constraints (G(q) v = 0 is linear)
    scales = 1.0 + 0.05 * jnp.arange(8)
    states = jax.vmap(lambda c: state._replace(v=c * state.v))(scales)
    step = jax.jit(lambda s: cs.step(model, s, 0.0, H))
    news, records = jax.vmap(step)(states)
    assert news.q.shape == (8, state.q.shape[0]) and bool(jnp.all(records.converged))
    energies = jax.vmap(lambda s: cs.energy(model, s).total)
    e0, e1 = energies(states), energies(news)
    assert float(jnp.max(jnp.abs(e1 - e0) / jnp.abs(e0))) <= 1e-13
    for k in (0, 7):
        single, _ = step(jax.tree.map(lambda a: a[k], states))
        np.testing.assert_allclose(news.q[k], single.q, rtol=0, atol=1e-14)


@pytest.mark.parametrize("backend", ["director", "reduced"])
def test_grad_of_a_step_matches_finite_differences(top, backend):
    assembly, state = top
    model = assembly.model

    def after_step(c):  # one step from the initial state with its velocity scaled by c
        return cs.step(model, state._replace(v=c * state.v), 0.0, H, backend=backend)[0]

    energy = lambda c: cs.energy(model, after_step(c)).total  # noqa: E731
    eps = 1e-4
    grad = float(jax.grad(energy)(1.0))
    fd = float((energy(1.0 + eps) - energy(1.0 - eps)) / (2 * eps))
    assert abs(grad - fd) <= 1e-6 * abs(fd)
    # the step conserves energy, so dE_1/dc = dE_0/dc = 2 T_0 (E_0 = c² T_0 + V_0)
    assert abs(grad - 2 * float(cs.energy(model, state).kinetic)) <= 1e-10 * abs(grad)
    # a quantity that is not conserved: the coordinates after the step, reverse mode against FD
    jac = jax.jacrev(lambda c: after_step(c).q)(1.0)
    fd_q = (after_step(1.0 + eps).q - after_step(1.0 - eps).q) / (2 * eps)
    assert float(jnp.max(jnp.abs(jac - fd_q))) <= 1e-6 * float(jnp.max(jnp.abs(fd_q)))


def test_step_refuses_the_reference_backend(top):
    assembly, state = top
    with pytest.raises(cs.ModelError, match="director"):
        cs.step(assembly, state, 0.0, H, backend="ode")


@pytest.mark.parametrize("t, h, message", [(0.0, 0.0, "h = 0 is no step"), (0.0, np.nan, "h must be one finite"),
                                           (np.inf, H, "t must be one finite"), (0.0, [H, H], "h must be one"),
                                           (0.0, "1e-3", "h must be one finite")])
def test_step_refuses_a_zero_or_non_finite_time_step(top, t, h, message):
    """A concrete zero or non-finite step (or time) is refused by name instead of returning an
    unconverged step."""
    assembly, state = top
    with pytest.raises(cs.ModelError, match=message):
        cs.step(assembly, state, t, h)
    with pytest.raises(cs.ModelError, match=message.replace("t must", "t0 must")):
        cs.trajectory(assembly, state, t, h, 2)


def test_a_negative_step_goes_back_to_where_the_step_came_from(top):
    """The midpoint rule is symmetric: a step of −h from the end of a step of h is its start."""
    assembly, state = top
    forward, _ = cs.step(assembly, state, 0.0, H)
    back, record = cs.step(assembly, forward, H, -H)
    assert bool(record.converged)
    assert float(jnp.max(jnp.abs(back.q - state.q))) <= 1e-12
    assert float(jnp.max(jnp.abs(back.v - state.v))) <= 1e-12 * float(jnp.max(jnp.abs(state.v)))


def _relative_gap(f, x0, eps=1e-5):
    """|df/dx − central difference| / |central difference| at x0 (reverse mode through the run).
    One compiled program gives both: the values f(x0 ± eps) of jax.value_and_grad are f's own
    forward run (a second program, jit(f), would cost a compilation of seconds)."""
    value_and_grad = jax.jit(jax.value_and_grad(f))
    grad = float(value_and_grad(x0)[1])
    fd = float((value_and_grad(x0 + eps)[0] - value_and_grad(x0 - eps)[0]) / (2 * eps))
    return abs(grad - fd) / abs(fd)


def test_gradient_through_a_trajectory_matches_finite_differences(top):
    """cs.trajectory is simulate's run as a pure function, and jax.grad through its 200 steps
    (one implicit-function solve per step) agrees with central differences: the heavy top's
    centre-of-mass x after 0.2 s against the scale of its initial velocity."""
    assembly, state = top
    model = assembly.model
    states, records = jax.jit(lambda s: cs.trajectory(model, s, 0.0, H, 200))(state)
    assert states.q.shape == (201, state.q.shape[0]) and bool(jnp.all(records.converged))
    sol = cs.simulate(assembly, 10 * H, H)
    assert float(jnp.max(jnp.abs(states.q[:11] - sol.q))) <= 1e-13
    energy = jax.vmap(lambda s: cs.energy(model, s).total)(states)
    assert float(jnp.max(jnp.abs(energy - energy[0]))) <= 1e-12 * abs(float(energy[0]))

    def centre_x(c):
        return cs.trajectory(model, state._replace(v=c * state.v), 0.0, H, 200)[0].q[-1, 0]

    assert _relative_gap(centre_x, 1.0) <= 1e-6


def test_gradient_through_an_unconverged_step_is_nan_unless_kept(top):
    """The implicit-function rule holds only at a root: a gradient through a trajectory with a
    step Newton did not finish (two iterations allowed) is NaN, while the trajectory's values are
    the same; Newton(unconverged="keep") returns the rule at the last iterate, finite."""
    assembly, state = top
    model = assembly.model

    def height(c, newton):
        states, records = cs.trajectory(model, state._replace(v=c * state.v), 0.0, 5e-3, 20, newton=newton)
        return states.q[-1, 2], jnp.all(records.converged)

    cut = cs.Newton(implicit=True, max_iterations=2)
    (value, converged), grad = jax.value_and_grad(height, has_aux=True)(1.0, cut)
    assert not bool(converged) and np.isnan(float(grad))
    (kept, _), grad = jax.value_and_grad(height, has_aux=True)(1.0, replace(cut, unconverged="keep"))
    assert float(kept) == float(value) and np.isfinite(float(grad))


@pytest.mark.slow
@pytest.mark.parametrize("case", ["spacecraft wheel inertia", "double pendulum, reduced"])
def test_gradients_with_respect_to_model_parameters_and_through_the_reduced_step(case):
    """Model arrays are differentiable too: P3a's spin angle of wheel 0 after 0.2 s against the
    wheel's axial inertia (director backend); the double pendulum's lower bar after 0.1 s against
    its initial velocity scale through the reduced backend's step."""
    if case.startswith("spacecraft"):
        assembly = problems.spacecraft().assemble()
        model, state = assembly.model, assembly.initial_state

        def f(J):
            rotors = {**model.rotor_params, "axial_inertia": model.rotor_params["axial_inertia"].at[0].set(J)}
            return cs.trajectory(replace(model, rotor_params=rotors), state, 0.0, H, 200)[0].theta[-1, 0]

        x0, eps = float(model.rotor_params["axial_inertia"][0]), 1e-8
    else:
        assembly = problems.double_pendulum().assemble()
        model, state = assembly.model, assembly.initial_state

        def f(c):
            return cs.trajectory(model, state._replace(v=c * state.v), 0.0, H, 100, backend="reduced")[0].q[-1, 12]

        x0, eps = 1.0, 1e-5
    assert _relative_gap(f, x0, eps) <= 1e-6


@pytest.mark.slow
def test_gradient_with_respect_to_a_parameter_of_a_law():
    """d/d(gain) of P3a's core director after 0.5 s, the wheel motors' amplitude a cs.Parameter
    (model.parameters["gain"]), against central differences."""
    amplitude = cs.Parameter("gain", 0.05)
    laws = [lambda t, i=i: amplitude.value * jnp.sin(2 * jnp.pi * t / 5 + i) for i in range(3)]
    assembly = problems.spacecraft(laws=laws).assemble()
    model, state = assembly.model, assembly.initial_state

    def f(gain):
        return cs.trajectory(replace(model, parameters={"gain": gain}), state, 0.0, 1e-2, 50)[0].q[-1, 3]

    assert _relative_gap(f, 0.05, 1e-6) <= 1e-6


@pytest.mark.parametrize("backend", ["director", "reduced"])
def test_node_velocities_are_rounded_once(top, backend):
    """v_{n+1} = 2Δq/h − v_n is stored correctly rounded (Δq exact from q + q_low, which the
    compensated update keeps): rounded twice as written, fl(fl(2Δq/h) − v_n), the heavy top's were
    off by up to several ulps in about a quarter of the components, with errors whose mean has the
    sign of the velocity (a drift of the kinetic energy where Newton does not absorb it, see
    conserve.discrete.scheme.node_velocity)."""
    from fractions import Fraction

    assembly, state = top
    step = jax.jit(lambda state, t: cs.step(assembly.model, state, t, 2e-3, backend=backend)[0])
    wrong = 0
    for k in range(40):
        new = step(state, k * 2e-3)
        q0, l0, v0, q1, l1, v1 = (np.asarray(a) for a in (state.q, state.q_low, state.v, new.q, new.q_low, new.v))
        for i in range(len(q0)):
            dq = Fraction(q1[i]) - Fraction(q0[i]) + Fraction(l1[i]) - Fraction(l0[i])
            wrong += float(2 * dq / Fraction(2e-3) - Fraction(v0[i])) != v1[i]
        state = new
    assert wrong == 0
