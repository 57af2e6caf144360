"""A rest-to-rest slew of the P3 spacecraft by its three reaction wheels: the piecewise-constant
wheel torques that turn the core by 60° about an oblique axis in 10 s and leave everything at rest,
with the least control effort — a discrete-mechanics optimal-control problem whose dynamics are
the conserving steps themselves.

    python examples/slew.py     # writes slew.png

The torques are 3 × 10 ``cs.Parameter`` s (one per wheel and second, N m), read by the wheels'
motor laws; the run (200 steps of 0.05 s, ``cs.trajectory``) is a differentiable function of them.
Minimise the effort ½ Σ τ² Δt subject to the core's final attitude error (the rotation vector
of R_targetᵀ R_T, to first order) and the wheels' final axial momenta being zero: six equations,
whose Jacobian with respect to the 30 torques is six reverse passes through the run (an
implicit-function solve per step), by scipy's SLSQP. Every step of every iterate conserves the
total angular momentum (zero), so with the wheels' momenta zero the core is at rest too.
"""

from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import minimize  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.problems import spacecraft  # noqa: E402

T, DT, SEGMENTS = 10.0, 0.05, 10
AXIS, ANGLE = np.array([1.0, 1.0, 1.0]) / np.sqrt(3.0), np.pi / 3
TARGET = Rotation.from_rotvec(ANGLE * AXIS).as_matrix()  # the core's final directors as columns
STEPS, PER_SEGMENT = round(T / DT), round(T / DT) // SEGMENTS
NAMES = [f"torque {i} {k}" for i in range(3) for k in range(SEGMENTS)]

torques = [cs.Parameter(name, 0.0) for name in NAMES]


def wheel_law(i):
    """τ_i(t): wheel i's torque in the segment containing t (N m)."""
    values, width = torques[i * SEGMENTS:(i + 1) * SEGMENTS], T / SEGMENTS
    return lambda t: sum(u.value * ((t >= k * width) & (t < (k + 1) * width)) for k, u in enumerate(values))


assembly = spacecraft(spin_rates=(0.0, 0.0, 0.0), core_rate=(0.0, 0.0, 0.0), laws=[wheel_law(i) for i in range(3)],
                      ).assemble()
model, state = assembly.model, assembly.initial_state


def run(u):
    """The states of the slew with the torques u (30,)."""
    states, records = cs.trajectory(replace(model, parameters=dict(zip(NAMES, u))), state, 0.0, DT, STEPS)
    return states, records


def final_error(u):
    """(the rotation vector of R_targetᵀ R_T to first order, rad; the wheels' axial momenta p_T,
    kg m²/s) of the slew."""
    states = run(u)[0]
    E = TARGET.T @ states.q[-1, 3:12].reshape(3, 3).T  # R_targetᵀ R_T (the core's directors as columns)
    return jnp.concatenate([0.5 * jnp.array([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]]),
                            states.p[-1]])


error_and_jacobian = jax.jit(lambda u: (final_error(u), jax.jacrev(final_error)(u)))
history = []


def constraint(u):
    value, jac = error_and_jacobian(jnp.asarray(u))
    history.append(float(np.max(np.abs(value))))
    return np.asarray(value), np.asarray(jac)


width = T / SEGMENTS
fit = minimize(lambda u: (0.5 * np.sum(u**2) * width, u * width), np.zeros(len(NAMES)), jac=True, method="SLSQP",
               constraints=[{"type": "eq", "fun": lambda u: constraint(u)[0], "jac": lambda u: constraint(u)[1]}],
               options={"maxiter": 100, "ftol": 1e-12})
u = fit.x
error = float(np.max(np.abs(constraint(u)[0])))
sol = cs.simulate(replace(assembly, model=replace(model, parameters=dict(zip(NAMES, u)))), T, DT)
H = sol.angular_momentum
print(f"slew {np.degrees(ANGLE):.0f}° about {np.round(AXIS, 3)} in {T:g} s: {fit.nit} iterations, "
      f"{fit.nfev} runs with gradients, converged: {fit.success}")
print(f"final attitude and wheel momentum error {error:.1e} (rad, kg m²/s); "
      f"effort ½Στ²Δt {0.5 * np.sum(u**2) * width:.4f} N² m² s")
print(f"every step: |H| ≤ {np.max(np.abs(H)):.1e} kg m²/s (zero at the start), "
      f"energy balance ≤ {np.max(np.abs(sol.energy_balance_error)):.1e} J")
rates = np.array([sol.rotor(f"wheel{i}").rate for i in range(3)])
core_rate = np.max(np.abs(sol["core"].angular_velocity[-1]))
print(f"wheel rates relative to the core: peak {np.max(np.abs(rates)):.1f} rad/s, at the end "
      f"{np.max(np.abs(rates[:, -1])):.1e} rad/s; the core's final rate {core_rate:.1e} rad/s")

t = sol.t
angle = np.degrees(Rotation.from_matrix(np.swapaxes(sol["core"].rotation, -1, -2) @ TARGET).magnitude())
fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
for i in range(3):
    axes[0].step(np.arange(SEGMENTS + 1) * T / SEGMENTS, np.append(u[i * SEGMENTS:(i + 1) * SEGMENTS],
                 u[(i + 1) * SEGMENTS - 1]), where="post", label=f"wheel {i}")
axes[0].set(xlabel="t [s]", ylabel="torque [N m]", title="optimal piecewise-constant torques")
axes[0].legend(fontsize=8)
axes[1].plot(t, angle)
axes[1].set(xlabel="t [s]", ylabel="angle to target [°]", title="core attitude")
for i in range(3):
    axes[2].plot(t, sol.rotor(f"wheel{i}").rate, label=f"wheel {i}")
axes[2].set(xlabel="t [s]", ylabel="rate relative to core [rad/s]", title="wheels: rest to rest")
axes[2].legend(fontsize=8)
axes[3].semilogy(history)
axes[3].set(xlabel="evaluation", ylabel="max |final error|", title="SLSQP with jax Jacobians")
fig.tight_layout()
fig.savefig("slew.png", dpi=120)
print("wrote slew.png")
