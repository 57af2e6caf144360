"""A 30° rest-to-rest slew of a spacecraft by four reaction wheels in a pyramid, under a PD attitude
law sampled at 10 Hz with a noisy gyro: one controller for the four wheels, its commands held
between samples (zero-order hold), the run's steps cut at the sample instants.

    python examples/attitude_control.py     # writes attitude_control.png

1. The slew: settling time and pointing error; the total angular momentum (zero) and the energy
   balance E − E0 = W_motors − D_losses at every node, to round-off — the held torque is constant
   over each step, so each motor's discrete work τ Δθ is exact.
2. A Monte Carlo over the gyro's noise (16 seeds, one ensemble): the spread of the pointing error.
3. The gains tuned by ``jax.grad`` of a settling cost (∫ t |e| dt) through the whole sampled run
   (``cs.trajectory``: the gains are ``cs.Parameter`` s the law reads).
"""

from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import conserve as cs  # noqa: E402
from conserve.control.attitude import WheelCluster, attitude_error, attitude_pd, rotation_from_axis_angle  # noqa: E402

RATE, DT, T_END = 10.0, 0.05, 120.0  # Hz, s, s
AXIS, ANGLE = np.array([1.0, 1.0, 0.0]) / np.sqrt(2.0), np.radians(30.0)
TARGET = np.asarray(rotation_from_axis_angle(AXIS, ANGLE))  # the bus's target attitude (body to inertial)
LIMIT, LOSSES = 0.3, 1e-4  # wheel torque limit N m; back-EMF damping N m s/rad
GYRO_NOISE = 2e-5  # rad/s per sample
BETA = np.radians(54.74)  # pyramid half-angle: equal control authority about the three axes
WHEEL_AXES = np.array([[np.sin(BETA) * np.cos(phi), np.sin(BETA) * np.sin(phi), np.cos(BETA)]
                       for phi in np.radians([45.0, 135.0, 225.0, 315.0])])
WHEELS = WheelCluster(WHEEL_AXES)


def spacecraft(kp=4.0, kd=60.0, seed=0, noise=GYRO_NOISE):
    """The bus (400, 300, 250 kg m²) with four wheels and the PD controller (gains N m/rad, N m s/rad,
    numbers or cs.Parameters) on a gyro with white noise ``noise`` (rad/s) of ``seed``."""
    bus = cs.RigidBody("bus", mass=500.0, inertia=(400.0, 300.0, 250.0))
    wheels = [cs.Rotor(f"wheel{k}", on=bus, axis=a, offset=0.4 * a, mass=4.0, axial_inertia=0.05,
                       transverse_inertia=0.03) for k, a in enumerate(WHEEL_AXES)]
    law = attitude_pd(TARGET, kp, kd, wheels=WHEELS, limit=LIMIT)
    controller = cs.Controller("attitude", law, rate=RATE, seed=seed, state=jnp.zeros(3),
                               sensors={"attitude": cs.sensors.attitude(bus),
                                        "rate": cs.sensors.angular_velocity(bus, noise=noise)},
                               actuators=[cs.control.motor(w, limit=LIMIT, damping=LOSSES) for w in wheels])
    return cs.System([bus, *wheels, controller])


def pointing_error(rotation):
    """(N+1,) the angle between the bus's attitude and the target, rad."""
    c = (np.einsum("ij,nij->n", TARGET, rotation) - 1.0) / 2.0
    return np.arccos(np.clip(c, -1.0, 1.0))


def settling_time(t, error, band=np.radians(0.1)):
    """The first time after which the pointing error stays below ``band``, s."""
    outside = np.flatnonzero(error > band)
    return t[outside[-1] + 1] if len(outside) and outside[-1] + 1 < len(t) else (t[0] if not len(outside) else np.inf)


def tune(kp=4.0, kd=60.0, iterations=6, steps=1200, dt=0.1):
    """Gains that lower the settling cost ∫ t |e| dt (ITAE) over steps × dt s (no noise; the weight
    t penalises a slow tail): steepest descent in log-gains with a step halved when it overshoots,
    each gradient one reverse pass through the sampled run."""
    gains = cs.Parameter("kp", kp), cs.Parameter("kd", kd)
    assembly = spacecraft(*gains, noise=0.0).assemble()
    model, state = assembly.model, assembly.initial_state

    @jax.jit
    def cost(log_gains):
        values = dict(zip(("kp", "kd"), jnp.exp(log_gains)))
        states, _ = cs.trajectory(replace(model, parameters={**model.parameters, **values}), state, 0.0, dt, steps)
        D = states.q[:, 3:12].reshape(-1, 3, 3)  # the bus's directors (rows)
        e = jax.vmap(lambda d: attitude_error(d.T, jnp.asarray(TARGET)))(D)
        return jnp.sum(jnp.arange(steps + 1) * dt * jnp.linalg.norm(e, axis=1)) * dt

    value_and_grad = jax.jit(jax.value_and_grad(cost))
    x, step = jnp.log(jnp.array([kp, kd])), 0.5  # log-gains; a step of 0.5 in them, halved when it overshoots
    value, g = value_and_grad(x)
    history = [float(value)]
    for _ in range(iterations):
        trial = x - step * g / jnp.linalg.norm(g)
        trial_value, trial_g = value_and_grad(trial)
        if trial_value < value:
            x, value, g = trial, trial_value, trial_g
            history.append(float(value))
        else:
            step /= 2
    return np.exp(np.asarray(x)), history


def main():
    sol = cs.simulate(spacecraft(), T_END, DT)
    error = pointing_error(sol["bus"].rotation)
    H = sol.angular_momentum
    balance = np.max(np.abs(sol.energy_balance_error))
    view = sol.controller("attitude")
    print(f"slew of {np.degrees(ANGLE):.0f}°: settling (0.1°) {settling_time(sol.t, error):.1f} s, pointing error at "
          f"the end {np.degrees(error[-1]) * 3600:.2f} arcsec; {len(view.t)} samples, largest wheel torque "
          f"{np.max(np.abs(view.commands)):.3f} N m (limit {LIMIT})")
    print(f"total angular momentum: max |H| = {np.max(np.linalg.norm(H, axis=1)):.2e} kg m²/s (starts at 0); energy "
          f"balance max |E − E0 − (W − D)| = {balance / sol.energy_scale:.2e} of its scale {sol.energy_scale:.3g} J")

    ensemble = cs.simulate_batch([spacecraft(seed=seed) for seed in range(16)], T_END, DT, workers=1)
    errors = np.array([pointing_error(ensemble[i]["bus"].rotation) for i in range(16)])
    final = np.degrees(errors[:, -1]) * 3600
    print(f"Monte Carlo over the gyro noise (16 seeds): pointing error at the end {np.mean(final):.2f} ± "
          f"{np.std(final):.2f} arcsec")

    gains, history = tune()
    print(f"tuned gains kp = {gains[0]:.3g} N m/rad, kd = {gains[1]:.3g} N m s/rad: settling cost ∫ t |e| dt "
          + " → ".join(f"{c:.4g}" for c in history))
    tuned = cs.simulate(spacecraft(*gains), T_END, DT)
    tuned_error = pointing_error(tuned["bus"].rotation)
    print(f"tuned slew: settling (0.1°) {settling_time(tuned.t, tuned_error):.1f} s")

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    ax[0].semilogy(sol.t, np.degrees(error), label="kp = 4, kd = 60")
    ax[0].semilogy(tuned.t, np.degrees(tuned_error), label=f"tuned: kp = {gains[0]:.2g}, kd = {gains[1]:.2g}")
    ax[0].set(xlabel="t (s)", ylabel="pointing error (°)", title="30° slew, PD at 10 Hz, noisy gyro")
    ax[0].legend()
    ax[1].step(view.t, view.commands, where="post")
    ax[1].set(xlabel="t (s)", ylabel="wheel torque (N m)", title="held commands of the four wheels")
    late = sol.t >= T_END - 40.0
    quiet = pointing_error(cs.simulate(spacecraft(noise=0.0), T_END, DT)["bus"].rotation)
    for e in errors:
        ax[2].plot(sol.t[late], np.degrees(e[late]) * 3600, color="C0", alpha=0.3)
    ax[2].plot(sol.t[late], np.degrees(quiet[late]) * 3600, "k", label="a noiseless gyro")
    ax[2].set(xlabel="t (s)", ylabel="pointing error (arcsec)", title="the last 40 s, 16 gyro-noise seeds")
    ax[2].legend()
    fig.tight_layout()
    fig.savefig("attitude_control.png", dpi=120)
    return sol, balance, H, final


if __name__ == "__main__":
    main()
