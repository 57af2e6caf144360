"""Controllers in the loop (conserve.control): zero-order hold at the sample instants in every
stepping mode, saturation and motor losses in the energy balance, sensor models, the law's state,
derivatives with respect to gains, checkpoints, and the errors of a wrong controller.

The probe: a wheel (hybrid rotor) on a free body. Its axial momentum obeys ṗ = τ exactly, and the
discrete step keeps p_{n+1} = p_n + h τ for a torque constant over the step, so p(t) of a run must
equal the piecewise-linear p of a hand-written zero-order-hold recursion at every node — only if
the command is held between samples and changes exactly at t_k = k / rate.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve.errors import ModelError

RATE, GAIN, J_A = 10.0, -0.5, 0.02  # Hz, 1/s, kg m²


def wheel_system(rate=RATE, limit=None, damping=0.0, noise=0.0, delay=0, seed=0, gain=GAIN, quantum=0.0, count=0.0):
    """Body + wheel + controller τ_k = 0.1 cos(3 t_k) + gain · p_k (a state counting samples)."""
    body = cs.RigidBody("body", mass=10.0, inertia=(1.0, 1.2, 0.8), angular_velocity=(0.01, 0.02, -0.01))
    wheel = cs.Rotor("wheel", on=body, axis=(0, 0, 1), mass=1.0, axial_inertia=J_A, transverse_inertia=0.01,
                     spin_rate=5.0)

    def law(t, y, count):
        g = gain.value if isinstance(gain, cs.Parameter) else gain
        return 0.1 * jnp.cos(3 * t) + g * y["p"], count + 1.0

    ctrl = cs.Controller("speed", law, sensors={"p": cs.sensors.rotor_momentum(wheel, noise=noise, delay=delay,
                                                                               quantum=quantum)},
                         actuators=[cs.control.motor(wheel, limit=limit, damping=damping)], rate=rate,
                         state=jnp.asarray(count), seed=seed)
    return cs.System([body, wheel, ctrl])


def zoh_momentum(t, p0, t_end, rate=RATE, limit=np.inf):
    """p at the times t of the ideal zero-order hold: p_{k+1} = p_k + T τ_k from t_k = k / rate."""
    T = 1.0 / rate
    samples = np.arange(0, int(np.floor(t_end * rate + 1e-9)) + 1) * T
    p_s, taus = [p0], []
    for tk in samples:
        tau = np.clip(0.1 * np.cos(3 * tk) + GAIN * p_s[-1], -limit, limit)
        taus.append(tau)
        p_s.append(p_s[-1] + T * tau)
    k = np.minimum(np.floor(t * rate + 1e-9).astype(int), len(samples) - 1)
    return np.asarray(p_s)[k] + (t - samples[k]) * np.asarray(taus)[k], samples, np.asarray(taus)


@pytest.fixture(scope="module")
def assembly():
    return wheel_system().assemble()


@pytest.mark.parametrize("how", [{"dt": 0.03}, {"dt": 0.05}, {"dt": 0.03, "order": 4},
                                 {"dt": "adaptive", "rtol": 1e-8, "atol": 1e-10}])
def test_commands_are_held_between_samples_and_change_at_k_over_rate(assembly, how):
    """Fixed steps that do not divide the period (cut at the instants), that divide it, order 4 and
    adaptive steps: the wheel's momentum follows the zero-order-hold recursion at every node."""
    sol = cs.simulate(assembly, 2.0, **how)
    expected, samples, taus = zoh_momentum(sol.t, sol.p[0, 0], sol.t[-1])
    assert np.max(np.abs(sol.p[:, 0] - expected)) < 1e-12
    view = sol.controller("speed")
    if how["dt"] != "adaptive":  # (an adaptive step may take several samples: the record keeps its last)
        assert np.allclose(view.t, samples[:len(view.t)], atol=1e-12)  # every sample, at k / rate
    k = np.round(view.t * RATE).astype(int)
    assert np.allclose(view.t, samples[k], atol=1e-12) and np.allclose(view.commands[:, 0], taus[k], atol=1e-12)
    assert view.state[0][-1] == k[-1] + 1  # the law's state counted its samples
    assert np.max(np.abs(sol.energy_balance_error)) < 1e-12 * sol.energy_scale


def test_saturation_and_motor_losses_are_in_the_energy_balance():
    """A limited motor with back-EMF damping: commands never exceed the limit, the wheel's momentum
    follows the saturated hold minus the damping, and the energy balance (motor work minus the
    losses) holds to round-off."""
    sol = cs.simulate(wheel_system(limit=0.06, damping=1e-3), 2.0, 0.03)
    view = sol.controller("speed")
    assert np.max(np.abs(view.commands)) <= 0.06 and np.any(np.abs(view.commands) == 0.06)  # saturated
    assert sol.dissipation_by_element["wheel"].sum() > 1e-4  # the back-EMF losses, c θ'² h per step
    assert np.all(sol.dissipation_by_element["wheel"] >= 0)
    assert np.max(np.abs(sol.energy_balance_error)) < 1e-12 * sol.energy_scale


def test_sensor_noise_is_reproducible_by_seed_and_delay_hands_on_the_last_sample():
    a = cs.simulate(wheel_system(noise=1e-3, seed=1), 1.0, 0.05)
    b = cs.simulate(wheel_system(noise=1e-3, seed=1), 1.0, 0.05)
    c = cs.simulate(wheel_system(noise=1e-3, seed=2), 1.0, 0.05)
    ya, yb, yc = (s.controller("speed").readings["p"] for s in (a, b, c))
    assert np.array_equal(ya, yb) and not np.allclose(ya, yc)
    ideal = a.p[::2, 0][:len(ya)]  # the samples at every other node (dt = T / 2)
    assert 2e-4 < np.std(ya - ideal) < 3e-3  # σ = 1e-3
    d = cs.simulate(wheel_system(delay=1, quantum=1e-4), 1.0, 0.05)
    yd = d.controller("speed").readings["p"]
    assert np.allclose(yd[1:], np.round(d.p[::2, 0][:len(yd) - 1] / 1e-4) * 1e-4, atol=1e-15)
    assert np.allclose(yd / 1e-4, np.round(yd / 1e-4), atol=1e-9)


def test_gradient_of_a_run_with_respect_to_a_gain_through_the_sampled_controller():
    """d p(T)/d gain by jax.grad through cs.trajectory = central differences of the run."""
    gain = cs.Parameter("gain", GAIN)
    assembly = wheel_system(gain=gain).assemble()
    model, state = assembly.model, assembly.initial_state
    from dataclasses import replace

    def final(g):
        states, _ = cs.trajectory(replace(model, parameters={**model.parameters, "gain": g}), state, 0.0, 0.05, 20)
        return states.p[-1, 0]

    d = jax.grad(final)(GAIN)
    fd = (final(GAIN + 1e-5) - final(GAIN - 1e-5)) / 2e-5
    assert abs(d - fd) < 1e-8 * max(1.0, abs(fd)) and abs(d) > 1e-3
    # and the trajectory is the simulated run (steps dividing the period: the same samples)
    sol = cs.simulate(assembly, 1.0, 0.05)
    assert np.max(np.abs(cs.trajectory(model, state, 0.0, 0.05, 20)[0].p[:, 0] - sol.p[:, 0])) < 1e-13


def test_a_checkpointed_run_with_a_noisy_controller_resumes_bit_identically(tmp_path):
    system = wheel_system(noise=1e-3, seed=3)
    full = cs.simulate(system, 1.0, 0.03)
    with pytest.raises(KeyboardInterrupt):
        def stop(done, total):
            if done >= 10:
                raise KeyboardInterrupt
        cs.simulate(system, 1.0, 0.03, checkpoint=tmp_path / "run", checkpoint_every=10, progress=stop)
    resumed = cs.resume(tmp_path / "run", system)
    assert np.array_equal(resumed.q, full.q) and np.array_equal(resumed.p, full.p)
    assert np.array_equal(resumed.controller("speed").readings["p"], full.controller("speed").readings["p"])


def test_wrong_controllers_are_refused_with_what_and_how():
    body = cs.RigidBody("body", mass=1.0, inertia=(1.0, 1.0, 1.0))
    wheel = cs.Rotor("wheel", on=body, axis=(0, 0, 1), axial_inertia=0.01, transverse_inertia=0.01,
                     motor=lambda t, rotor: 0.0)
    with pytest.raises(ModelError, match="has a motor already"):
        cs.Controller("c", lambda t, y: 0.0, sensors={}, actuators=[wheel])
    free = cs.Rotor("free", on=body, axis=(1, 0, 0), axial_inertia=0.01, transverse_inertia=0.01)
    two = cs.Controller("c", lambda t, y: jnp.zeros(2), sensors={"w": cs.sensors.angular_velocity(body)},
                        actuators=[free])
    with pytest.raises(ModelError, match="returns 2 commands, its actuators take 1"):
        cs.System([body, wheel, free, two]).assemble()
    with pytest.raises(ModelError, match="rate must be a positive number"):
        cs.Controller("c", lambda t, y: 0.0, sensors={}, actuators=[cs.control.torque(body)], rate=-1)
    with pytest.raises(ModelError, match="not a hybrid rotor"):
        cs.sensors.rotor_rate(body).resolve(None)


def test_a_controller_without_a_rate_is_evaluated_at_the_midpoint_as_element_laws_are():
    """rate=None: the law inside each step at t_{n+½} on midpoint readings — the same continuous
    controller as an element's motor law, so the two runs differ by O(h²) (both second order; a
    law held from each step's start would differ by O(h)), with the energy balance exact."""
    def build(controlled):
        body = cs.RigidBody("body", mass=10.0, inertia=(1.0, 1.2, 0.8), angular_velocity=(0.3, 0.2, -0.1))
        law = lambda t, rotor: 0.1 * jnp.cos(3 * t) - 0.05 * rotor.rate  # noqa: E731
        wheel = cs.Rotor("wheel", on=body, axis=(0, 0, 1), mass=1.0, axial_inertia=J_A, transverse_inertia=0.01,
                         spin_rate=5.0, motor=None if controlled else law)
        if not controlled:
            return cs.System([body, wheel])
        ctrl = cs.Controller("c", lambda t, y: 0.1 * jnp.cos(3 * t) - 0.05 * y["rate"],
                             sensors={"rate": cs.sensors.rotor_rate(wheel)}, actuators=[wheel])
        return cs.System([body, wheel, ctrl])

    gaps = []
    for dt in (0.02, 0.01):
        a, b = cs.simulate(build(True), 2.0, dt), cs.simulate(build(False), 2.0, dt)
        gaps.append(np.max(np.abs(a.p - b.p)))
        assert np.max(np.abs(a.energy_balance_error)) < 1e-12 * a.energy_scale
        assert np.allclose(a.controller("c").t, a.t[:-1] + dt / 2)  # recorded at the midpoints
    assert 3.5 < gaps[0] / gaps[1] < 4.5
    with pytest.raises(ModelError, match="without a rate the law is evaluated inside each step"):
        body = cs.RigidBody("b", mass=1.0, inertia=(1.0, 1.0, 1.0))
        cs.Controller("c", lambda t, y, z: (jnp.zeros(3), z), sensors={}, actuators=[cs.control.torque(body)],
                      state=jnp.zeros(1))


def test_the_controllers_record_survives_save_load_and_netcdf(assembly, tmp_path):
    sol = cs.simulate(assembly, 0.5, 0.03)
    sol.save(tmp_path / "run.npz")
    loaded = cs.Solution.load(tmp_path / "run.npz")
    view, back = sol.controller("speed"), loaded.controller("speed")
    assert np.array_equal(view.t, back.t) and np.array_equal(view.commands, back.commands)
    xr = pytest.importorskip("xarray")
    sol.to_netcdf(tmp_path / "run.nc")
    ds = xr.open_dataset(tmp_path / "run.nc")
    assert np.array_equal(ds["control.speed.commands"].values, sol.diagnostics["control.speed.commands"])


def test_ensemble_members_over_noise_seeds_equal_their_single_runs(assembly):
    """An ensemble over the sensor's seed and the law's initial state (model parameters): each
    member is its single run, with its own noise, initial state and controller's record."""
    members = [wheel_system(noise=1e-3, seed=s, count=100.0 * s) for s in (1, 2, 3)]
    ensemble = cs.simulate_batch(members, 0.6, 0.03, workers=1)
    for system, member in zip(members, ensemble):
        single = cs.simulate(system, 0.6, 0.03)
        assert np.max(np.abs(member.p - single.p)) < 1e-13
        assert np.allclose(member.controller("speed").readings["p"], single.controller("speed").readings["p"],
                           atol=1e-13)
    assert not np.allclose(ensemble[0].p, ensemble[1].p)
    counts = [member.controller("speed").state[0][-1] - len(member.controller("speed").t) for member in ensemble]
    assert counts == [100.0, 200.0, 300.0]  # each member's law started from its own state


def test_a_speed_guard_stops_the_wheel_and_a_body_torque_detumbles():
    """max_speed: a wheel pushed by a constant command stops gaining speed at the guard (within one
    sample's gain); a torque actuator in body axes: a rate-damping law detumbles the body, its work
    exactly the kinetic energy it removed."""
    body = cs.RigidBody("body", mass=10.0, inertia=(1.0, 1.2, 0.8), angular_velocity=(0.3, -0.2, 0.25))
    wheel = cs.Rotor("wheel", on=body, axis=(0, 0, 1), axial_inertia=J_A, transverse_inertia=0.01)
    push = cs.Controller("push", lambda t, y: jnp.array([0.1]), sensors={}, rate=10.0,
                         actuators=[cs.control.motor(wheel, max_speed=10.0)])
    detumble = cs.Controller("detumble", lambda t, y: -2.0 * y["w"], rate=10.0,
                             sensors={"w": cs.sensors.angular_velocity(body)},
                             actuators=[cs.control.torque(body, frame="body")])
    sol = cs.simulate(cs.System([body, wheel, push, detumble]), 6.0, 0.05)
    rate = sol.rotor("wheel").rate
    assert 10.0 <= rate.max() <= 10.0 + 0.1 / J_A * 0.1 + 1e-9  # at most one sample's gain past the guard
    assert sol.controller("push").commands[-1, 0] == 0.0
    w = np.linalg.norm(sol["body"].angular_velocity, axis=1)
    assert w[-1] < 1e-3 * w[0]
    assert np.max(np.abs(sol.energy_balance_error)) < 1e-12 * sol.energy_scale


def test_a_single_step_refuses_a_model_with_sampled_controllers(assembly):
    with pytest.raises(ModelError, match="sampled controllers"):
        cs.step(assembly.model, assembly.initial_state, 0.0, 0.01)


def test_dry_friction_decelerates_a_wheel_at_its_torque_and_is_dissipation():
    """A motor's dry friction τ_c on a spinning wheel: the axial momentum falls as p0 − τ_c t while
    the wheel slips (ṗ = −τ_c tanh(θ'/ω_s), tanh = 1 to round-off there), then the wheel sticks; the
    friction's work is dissipation, the energy balance exact, the angular momentum conserved."""
    body = cs.RigidBody("body", mass=10.0, inertia=(1.0, 1.2, 0.8), angular_velocity=(0.01, 0.02, -0.01))
    wheel = cs.Rotor("wheel", on=body, axis=(0, 0, 1), axial_inertia=J_A, transverse_inertia=0.01, spin_rate=5.0)
    idle = cs.Controller("idle", lambda t, y: jnp.zeros(1), sensors={}, rate=10.0,
                         actuators=[cs.control.motor(wheel, dry_friction=0.01)])  # slip rate 1e-2 rad/s
    sol = cs.simulate(cs.System([body, wheel, idle]), 15.0, 0.01)
    rate, p = sol.rotor("wheel").rate, sol.p[:, 0]
    slipping = rate > 0.4  # (tanh(θ'/ω_s) = 1 to round-off)
    assert np.max(np.abs(p[slipping] - (p[0] - 0.01 * sol.t[slipping]))) < 1e-12
    assert np.max(np.abs(rate[-100:])) < 1e-3  # stuck
    D = sol.dissipation_by_element["wheel"]
    assert np.all(D >= 0) and np.sum(D) > 0.9 * 0.5 * J_A * 5.0**2 * (1 - 0.2)  # most of the spin's energy
    assert np.max(np.abs(sol.energy_balance_error)) < 1e-12 * sol.energy_scale
    H = sol.angular_momentum
    assert np.max(np.abs(H - H[0])) < 1e-13


def test_dry_friction_on_a_joint_agrees_between_the_backends():
    """A pendulum whose hinge has dry friction: director, reduced and the ODE reference agree (the
    two conserving backends to round-off, the reference to the step's O(h²)), energy balance exact."""
    rod = cs.RigidBody("rod", mass=1.0, inertia=(0.02, 0.02, 0.001), position=(0.3, 0.0, -0.4),
                       orientation=cs.kinematics.as_rotation_matrix("rod", euler=("y", [0.6435])))
    hinge = cs.Revolute(rod, cs.ground, at=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge")
    friction = cs.JointSpringDamper(hinge, dry_friction=0.2, slip_rate=0.05, name="friction")
    system = cs.System([rod, hinge, friction, cs.Gravity((0.0, 0.0, -9.81))])
    runs = {b: cs.simulate(system, 2.0, 2e-3, backend=b) for b in ("director", "reduced", "ode")}
    angle = {b: s.joint("hinge").angle for b, s in runs.items()}
    assert np.max(np.abs(angle["director"] - angle["reduced"])) < 1e-10
    assert np.max(np.abs(angle["director"] - angle["ode"])) < 1e-4
    d = runs["director"]
    assert np.max(np.abs(d.energy_balance_error)) < 1e-12 * d.energy_scale
    assert np.sum(d.dissipation_by_element["friction"]) > 0.1 * d.energy_scale
    assert abs(np.sum(runs["ode"].dissipation_by_element["friction"]) - np.sum(d.dissipation_by_element["friction"])) \
        < 1e-3 * np.sum(d.dissipation_by_element["friction"])


def test_the_reduced_backend_runs_the_same_sampled_controller(assembly):
    director = cs.simulate(assembly, 1.0, 0.03)
    reduced = cs.simulate(assembly, 1.0, 0.03, backend="reduced")
    assert np.max(np.abs(director.p - reduced.p)) < 1e-12 and np.max(np.abs(director.q - reduced.q)) < 1e-11
    assert np.array_equal(director.controller("speed").t, reduced.controller("speed").t)


def test_a_system_assembled_twice_keeps_its_parameters():
    """Assembly records the Parameters a law reads by running it abstractly; a second assembly of
    the same System must record them again (jax caches abstract evaluations by function): the held
    commands, the seed and a gain stay model parameters, so a second run samples as the first."""
    gain = cs.Parameter("gain", GAIN)
    system = wheel_system(gain=gain)
    first, second = system.assemble(), system.assemble()
    assert set(first.model.parameters) == set(second.model.parameters) >= {"gain", "speed.u[0]", "speed.seed"}
    a, b = cs.simulate(first, 0.3, 0.03), cs.simulate(second, 0.3, 0.03)
    assert np.array_equal(a.p, b.p)


def test_slide_sensors_read_what_the_solution_reports_and_a_pd_holds_the_slider():
    """A slider on a tilted prismatic joint under gravity, positioned by a PD law on its joint
    motor at 20 Hz: the readings at the samples are the joint's slide and slide rate at those nodes,
    and the slider settles at the set point shifted by gravity's pull over the P gain (no integral)."""
    R = cs.kinematics.as_rotation_matrix("cart", euler=("y", [0.3]))
    cart = cs.RigidBody("cart", mass=2.0, inertia=(0.1, 0.1, 0.1), position=(0.0, 0.0, 0.0), orientation=R)
    rail = cs.Prismatic(cs.ground, cart, at=(0.0, 0.0, 0.0), axis=R[:, 0], name="rail")
    pd = cs.Controller("pd", lambda t, y: jnp.array([-200.0 * (y["s"] - 0.5) - 40.0 * y["v"]]), rate=20.0,
                       sensors={"s": cs.sensors.slide(rail), "v": cs.sensors.slide_rate(rail)}, actuators=[rail])
    sol = cs.simulate(cs.System([cart, rail, pd, cs.Gravity()]), 3.0, 0.025)
    view, joint = sol.controller("pd"), sol.joint("rail")
    nodes = np.searchsorted(sol.t, view.t)
    assert np.allclose(view.readings["s"], joint.slide[nodes], atol=1e-13)
    assert np.allclose(view.readings["v"], joint.slide_rate[nodes], atol=1e-12)
    downhill = 2.0 * 9.81 * -R[2, 0] / 200.0  # gravity's pull along the rail over the P gain: the offset, m
    assert abs(joint.slide[-1] - (0.5 + downhill)) < 1e-3 and abs(downhill) > 1e-2
    assert np.max(np.abs(sol.energy_balance_error)) < 1e-12 * sol.energy_scale


def test_a_reaction_sensor_reads_the_joints_reaction_averaged_over_the_last_two_steps():
    """A pendulum's hinge load read at 20 Hz: at each sample, the mean of the two steps before it of
    what cs.joint_reactions reports after the run (force on the rod, torque about its attachment
    point, world axes); zeros before the first two steps; the reduced backend is refused."""
    rod = cs.RigidBody("rod", mass=1.0, inertia=(0.02, 0.02, 0.001), position=(0.3, 0.0, -0.4),
                       orientation=cs.kinematics.as_rotation_matrix("rod", euler=("y", [0.6435])))
    hinge = cs.Revolute(rod, cs.ground, at=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge")
    probe = cs.Controller("probe", lambda t, y: jnp.zeros(1), rate=20.0,
                          sensors={"load": cs.sensors.reaction(hinge)}, actuators=[hinge])
    system = cs.System([rod, hinge, probe, cs.Gravity((0.0, 0.0, -9.81))])
    sol = cs.simulate(system, 1.0, 0.01)
    view, after = sol.controller("probe"), cs.joint_reactions(system, sol, hinge)
    nodes = np.searchsorted(sol.t, view.t)
    assert np.all(view.readings["load"][0] == 0.0) and nodes[0] == 0
    n = nodes[1:]
    expected = np.concatenate([after.force_a, after.torque_a], axis=1)  # the rod is part a (b is the ground)
    assert np.allclose(view.readings["load"][1:], 0.5 * (expected[n - 1] + expected[n - 2]), rtol=0, atol=1e-9)
    assert np.max(np.abs(view.readings["load"][1:, :3])) > 5.0  # it holds the rod up
    with pytest.raises(ModelError, match="reaction sensors"):
        cs.simulate(system, 0.1, 0.01, backend="reduced")
