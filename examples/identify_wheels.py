"""Identify the reaction wheels' axial inertias and the motors' gain of the P3a spacecraft from a
noisy attitude history, by gradient descent with gradients through the conserving integrator
(``cs.trajectory``).

    python examples/identify_wheels.py     # writes identify_wheels.png

The "measurement" is the core's attitude (its three directors) every 0.05 s over 5 s, from a run
with the true values and Gaussian noise of 1e-4 added. The wheel motors' torques are
k sin(2πt/5 + i) with the gain k a ``cs.Parameter`` (a number the model holds:
``model.parameters["gain"]``); the model's wheel inertias J_a (in ``model.rotor_params``) and the
wheels' initial axial momenta p = J_a (θ' + ω·a) — the measured relative spin rates θ' are known —
are functions of the candidate J_a. So the whole run is a differentiable function of (J_a, k):
jax.grad gives the least-squares gradient by one implicit-function solve per step, and scipy's
L-BFGS-B takes it from there.
"""

from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.problems import spacecraft  # noqa: E402

TRUE = np.array([0.020, 0.022, 0.018, 0.05])  # the wheels' axial inertias (kg m²) and the motor gain (N m)
DT, STEPS, EVERY, NOISE = 0.01, 500, 5, 1e-4

gain = cs.Parameter("gain", TRUE[3])
laws = [lambda t, i=i: gain.value * jnp.sin(2 * jnp.pi * t / 5 + i) for i in range(3)]
assembly = spacecraft(laws=laws).assemble()  # P3a: three wheels at 200/-150/100 rad/s relative
model, state = assembly.model, assembly.initial_state
# the wheels' relative spin rates θ' and the core's rate about each axis, ω·a (J_a-independent)
spin = model.rotor_relative_rates(state.q, state.v, state.p)
omega_a = state.p / model.rotor_params["axial_inertia"] - spin


def attitude(x):
    """The core's directors (samples, 3, 3) every EVERY steps of a run with wheel inertias x[:3]
    and motor gain x[3]."""
    J = x[:3]
    candidate = replace(model, rotor_params={**model.rotor_params, "axial_inertia": J}, parameters={"gain": x[3]})
    states, _ = cs.trajectory(candidate, state._replace(p=J * (spin + omega_a)), 0.0, DT, STEPS)
    return states.q[::EVERY, 3:12].reshape(-1, 3, 3)


measured = np.asarray(attitude(jnp.asarray(TRUE)))
measured = measured + NOISE * np.random.default_rng(0).normal(size=measured.shape)


@jax.jit
def loss_and_gradient(x):
    loss = lambda x: 0.5 * jnp.sum((attitude(x) - measured) ** 2) / NOISE**2  # noqa: E731
    return jax.value_and_grad(loss)(x)


history = []


def objective(x):
    value, grad = loss_and_gradient(jnp.asarray(x))
    history.append((float(value), np.array(x)))
    return float(value), np.asarray(grad)


start = np.array([0.015, 0.015, 0.015, 0.03])
fit = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(1e-3, 0.024)] * 3 + [(0.0, 0.2)],
               options={"ftol": 1e-12})
x_fit = fit.x
print(f"true J_a (kg m²), gain (N m)  {TRUE}")
print(f"identified from {start}: {np.array2string(x_fit, precision=6)}, "
      f"relative error {np.max(np.abs(x_fit - TRUE) / TRUE):.1e}, {fit.nfev} runs with gradients")
print(f"misfit per sample / noise² {2 * fit.fun / measured.size:.3f} (1 for a fit down to the noise)")

t = DT * EVERY * np.arange(measured.shape[0])
before, after = np.asarray(attitude(jnp.asarray(start))), np.asarray(attitude(jnp.asarray(x_fit)))
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
axes[0].semilogy([h[0] for h in history], "o-")
axes[0].set(xlabel="evaluation", ylabel="misfit ½Σr²/σ²", title="L-BFGS-B with jax gradients")
for i, label in enumerate(["J_a wheel 0", "J_a wheel 1", "J_a wheel 2", "motor gain"]):
    axes[1].plot([h[1][i] / TRUE[i] for h in history], "o-", label=label)
axes[1].axhline(1.0, color="gray", ls=":")
axes[1].set(xlabel="evaluation", ylabel="value / true value", title="identified parameters")
axes[1].legend(fontsize=8)
axes[2].semilogy(t, np.linalg.norm((before - measured).reshape(len(t), -1), axis=1), label="start")
axes[2].semilogy(t, np.linalg.norm((after - measured).reshape(len(t), -1), axis=1), label="identified")
axes[2].axhline(NOISE * 3, color="gray", ls=":", label="noise (√9 σ)")
axes[2].set(xlabel="t [s]", ylabel="|directors − measured|", title="attitude misfit")
axes[2].legend(fontsize=8)
fig.tight_layout()
fig.savefig("identify_wheels.png", dpi=120)
print("wrote identify_wheels.png")
