"""Hybrid spin coordinates for balanced rotors and the same rotors as full
bodies: exact discrete energy balance and angular momentum, the reaction-wheel spin-up, second
order convergence of both models, and the winch rope."""

import csv

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import fitted_order

import conserve as cs
from conserve.problems import spacecraft


def integrals(sol):
    """Per-step and cumulative errors of the energy balance and of J, relative."""
    E, J = sol.energy.total, sol.angular_momentum
    step = np.diff(E) - (sol.work.sum(axis=1) - sol.dissipation.sum(axis=1))
    scale_E, scale_J = abs(E[0]), np.linalg.norm(J[0])
    return (np.max(np.abs(step)) / scale_E, np.max(np.abs(sol.energy_balance_error)) / scale_E,
            np.max(np.abs(np.diff(J, axis=0))) / scale_J, np.max(np.abs(J - J[0])) / scale_J)


@pytest.fixture(scope="module", params=["hybrid", "body"])
def p3a(request):
    return request.param, cs.simulate(spacecraft(request.param), t_end=20.0, dt=2e-3)  # 10⁴ steps


def test_p3a_energy_balance_and_momentum(p3a):
    model, sol = p3a
    assert len(sol) == 10_001
    e_step, e_cum, j_step, j_cum = integrals(sol)
    assert e_step <= 1e-13 and j_step <= 1e-13
    assert e_cum <= 1e-11 and j_cum <= 1e-11
    L = sol.linear_momentum
    assert np.max(np.abs(L - L[0])) <= 1e-11 * 100.0  # kg m/s, against |p| ~ m v ~ 100 × 1
    assert np.max(sol.constraint_residual) <= 1e-12
    assert np.abs(sol.work).sum() > 1e-3  # the motors do work
    assert sol.layout["degrees_of_freedom"] == 9


def test_hybrid_model_has_far_fewer_unknowns(p3a):
    model, sol = p3a
    assert sol.stats["unknowns"] == {"hybrid": 24, "body": 87}[model]


@pytest.mark.parametrize("model", ["hybrid", "body"])
def test_p3b_torque_free_gyrostat(model):
    assembly = spacecraft(model, motors=False).assemble()
    sol = cs.simulate(assembly, t_end=20.0, dt=2e-3)
    e_step, e_cum, j_step, j_cum = integrals(sol)
    assert e_cum <= 1e-11 and j_cum <= 1e-11
    assert e_step <= 1e-13 and j_step <= 1e-13
    if model == "hybrid":  # the wheels' p²/2J_a (~1200 J) would hide the core's ~0.5 J: check it alone
        V = sol.v.reshape(len(sol), -1, 3)
        T_core = 0.5 * np.einsum("nai,ab,nbi->n", V, np.asarray(assembly.model.mu), V)
        assert np.max(np.abs(T_core - T_core[0])) <= 1e-11 * T_core[0]
    # each wheel's axial momentum is constant without a motor (it is carried exactly)
    for i in range(3):
        p = sol.rotor(f"wheel{i}").momentum
        assert np.max(np.abs(p - p[0])) <= (1e-12 if model == "hybrid" else 1e-2) * abs(p[0])


def test_reaction_wheel_spin_up_is_exact():
    """Platform and wheel on a common symmetry axis, torque 0.2 N m for 5 s <= t <= 10 s: the
    platform rate and the wheel's relative rate are linear in time; the scheme is exact at Δt = 0.1."""
    Ja, omega0, spin0, tau = 0.1591549, 0.35, 10.4719755, 0.2
    platform = cs.RigidBody("platform", mass=10.0, inertia=(2.0 - 0.1, 2.0 - 0.1, 2.0),
                            angular_velocity=(0.0, 0.0, omega0))
    wheel = cs.Rotor("wheel", on=platform, axis=(0, 0, 1), mass=1.0, axial_inertia=Ja, transverse_inertia=0.1,
                     spin_rate=spin0, motor=lambda t, r: jnp.where((t >= 5.0) & (t <= 10.0), tau, 0.0))
    sol = cs.simulate(cs.System([platform, wheel]), t_end=15.0, dt=0.1)
    ramp = np.clip(sol.t - 5.0, 0.0, 5.0)
    platform_rate = omega0 - tau * ramp / 2.0  # the platform's axial inertia (without the wheel's) is 2
    wheel_rate = (Ja * (omega0 + spin0) + tau * ramp) / Ja - platform_rate
    np.testing.assert_allclose(sol["platform"].angular_velocity[:, 2], platform_rate, atol=1e-13)
    np.testing.assert_allclose(sol.rotor("wheel").rate, wheel_rate, atol=1e-12)
    assert wheel_rate[-1] - wheel_rate[0] > 6.5  # it really spun up (by τ·5 s / J_a + 0.5 rad/s)


def _constant_torque(c):
    """A motor law of constant torque c (a factory: equal constants make laws that compute the same)."""
    return lambda t, rotor: c


def test_each_hybrid_rotor_runs_its_own_motor_law():
    """Wheels whose motor laws differ (closures of their own constants; one law used by two
    wheels that are not next to each other) each take their own torque: a hybrid rotor's axial
    momentum grows by exactly h τ per step (its equation R3 without ropes or friction), so by c T
    over the run, to round-off."""
    core = cs.RigidBody("core", mass=100.0, inertia=(10.0, 15.0, 20.0), angular_velocity=(0.1, -0.05, 0.2))
    torques = (0.05, -0.02, 0.05, 0.0, 0.03)  # 0: no motor
    axes = (*np.eye(3), np.ones(3) / np.sqrt(3), np.array([1.0, -1.0, 0.0]) / np.sqrt(2))
    wheels = [cs.Rotor(f"wheel{i}", on=core, axis=axis, offset=0.5 * axis, mass=2.0, axial_inertia=0.02,
                       transverse_inertia=0.012, spin_rate=100.0 * (i + 1),
                       motor=_constant_torque(c) if c else None)
              for i, (axis, c) in enumerate(zip(axes, torques))]
    T = 0.5
    sol = cs.simulate(cs.System([core, *wheels]), t_end=T, dt=1e-2)
    for wheel, c in zip(wheels, torques):
        p = sol.rotor(wheel.name).momentum
        np.testing.assert_allclose(p[-1] - p[0], c * T, rtol=0, atol=1e-14 * (1 + np.max(np.abs(p))))
    E0 = abs(sol.energy.total[0])
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * E0


def core_coordinates(sol):
    """The common coordinates of both models: the core's φ and directors at the end."""
    return np.concatenate([sol["core"].position[-1], sol["core"].rotation[-1].T.ravel()])


@pytest.mark.slow
def test_both_models_converge_with_order_two_and_agree():
    """P3a over 1 s: both models of order 2 (successive differences shrink by 4), and the
    difference between the two models shrinks as Δt²."""
    dts = 2e-3 * 2.0 ** -np.arange(4)
    finals = {m: [core_coordinates(cs.simulate(spacecraft(m), t_end=1.0, dt=dt)) for dt in dts]
              for m in ("hybrid", "body")}
    for m, q in finals.items():
        diffs = [np.linalg.norm(q[i] - q[i + 1]) for i in range(len(q) - 1)]
        assert abs(fitted_order(dts[:-1], diffs) - 2.0) <= 0.1, (m, diffs)
    gap = [np.linalg.norm(a - b) for a, b in zip(finals["hybrid"], finals["body"])]
    assert abs(fitted_order(dts, gap) - 2.0) <= 0.1, gap


def test_winch_rope_energy_momentum_and_drop_acceleration():
    """A drum (hybrid rotor, radius r) on a free-floating frame pays out a rope to a load.
    Energy and both momenta are exact; with the frame pinned under gravity the load falls with
    a = g m / (m + J_a / r²)."""
    Ja, r, m = 0.025, 0.1, 10.0
    frame = cs.RigidBody("frame", mass=50.0, inertia=(3.0, 3.0, 2.0), angular_velocity=(0.0, 0.1, 0.3))
    drum = cs.Rotor("drum", on=frame, axis=(0, 1, 0), offset=(0, 0, 0), mass=5.0, axial_inertia=Ja,
                    transverse_inertia=0.0167, spin_rate=-3.0)
    tip = np.array([1.0, 0.0, 0.0])
    load_x = tip + [0.0, 0.0, -1.5]
    w = frame.angular_velocity
    # the load turns with the frame and the rope length changes at L' = r θ' = −0.3 m/s along u
    u = np.array([0.0, 0.0, -1.0])
    v_load = np.cross(w, load_x) + r * drum.spin_rate * u
    load = cs.PointMass("load", mass=m, position=load_x, velocity=v_load)
    rope = cs.Rope(frame, load, winch=drum, radius=r, points=(tip, load_x), name="rope")
    sol = cs.simulate(cs.System([frame, drum, load, rope]), t_end=3.0, dt=1e-2)
    e_step, e_cum, j_step, j_cum = integrals(sol)
    assert e_cum <= 1e-11 and j_cum <= 1e-11
    L = sol.linear_momentum
    assert np.max(np.abs(L - L[0])) <= 1e-12 * np.linalg.norm(L[0])
    assert np.max(sol.constraint_residual) <= 1e-12
    assert np.ptp(sol.rotor("drum").angle) > 0.5  # the drum turns and the rope length changes

    # drop test: frame pinned (fixed to ground), gravity, drum free: a = g m / (m + Ja / r²)
    frame = cs.RigidBody("frame", mass=50.0, inertia=(3.0, 3.0, 2.0))
    drum = cs.Rotor("drum", on=frame, axis=(0, 1, 0), mass=5.0, axial_inertia=Ja, transverse_inertia=0.0167)
    load = cs.PointMass("load", mass=m, position=load_x)
    rope = cs.Rope(frame, load, winch=drum, radius=-r, points=(tip, load_x), name="rope")
    system = cs.System([frame, drum, load, rope, cs.Fixed(cs.ground, frame, at=(0, 0, 0)), cs.Gravity()])
    sol = cs.simulate(system, t_end=1.0, dt=1e-2)
    z = sol["load"].position[:, 2]
    a = 9.81 * m / (m + Ja / r**2)
    np.testing.assert_allclose(z, load_x[2] - 0.5 * a * sol.t**2, atol=1e-6)
    assert np.max(np.abs(sol.energy.total - sol.energy.total[0])) <= 1e-10 * np.max(np.abs(sol.energy.kinetic))


@pytest.mark.parametrize("kwargs, words", [
    ({"inertia": np.diag([0.02, 0.012, 0.013])}, "axisymmetric"),
    ({"axial_inertia": 0.03, "transverse_inertia": 0.012}, "triangle inequality"),
    ({"axial_inertia": 0.02, "transverse_inertia": 0.012, "center_of_mass": (0.0, 0.01, 0.0)}, "balanced"),
])
def test_hybrid_rotor_rejects_what_it_cannot_model(kwargs, words):
    core = cs.RigidBody("core", 1.0, (1.0, 1.0, 1.0))
    with pytest.raises(cs.ModelError, match=f"'wheel'.*{words}"):
        cs.Rotor("wheel", on=core, axis=(1, 0, 0), mass=1.0, **kwargs)


def test_rotor_views_agree_between_models():
    """sol.rotor(name) reports the same spin for both models: rates to 1e-3; angles within the full
    body's midpoint phase error ~ (ωh)²/12 per radian (the hybrid integrates θ exactly at constant rate)."""
    hybrid, body = (cs.simulate(spacecraft(m), t_end=0.5, dt=1e-3) for m in ("hybrid", "body"))
    for i, w in enumerate((200.0, -150.0, 100.0)):
        rh, rb = hybrid.rotor(f"wheel{i}"), body.rotor(f"wheel{i}")
        np.testing.assert_allclose(rb.rate, rh.rate, rtol=1e-3)
        np.testing.assert_allclose(rb.angle, rh.angle, atol=2 * (w * 1e-3) ** 2 / 12 * abs(w) * 0.5 + 1e-6)
        np.testing.assert_allclose(rb.momentum, rh.momentum, rtol=1e-3)


def test_full_body_wheels_converge_at_omega_h_twenty():
    """Wheels at 500 rad/s, Δt = 0.04: the Cayley predictor keeps Newton converging at ωh = 20."""
    sol = cs.simulate(spacecraft("body", spin_rates=(500.0, -300.0, 100.0)), t_end=0.4, dt=0.04)
    assert sol.newton_iterations.max() <= 10
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * abs(sol.energy.total[0])


def test_rotor_views_survive_save_and_load(tmp_path):
    """... and both rotor models write the same CSV columns (a full-body wheel's part, bearing joint
    and motor only under the wheel's name), which hold the rotor views and the motors' work."""
    headers = {}
    for model in ("hybrid", "body"):
        sol = cs.simulate(spacecraft(model), t_end=0.05, dt=1e-2)
        sol.save(tmp_path / model)
        back = cs.Solution.load(tmp_path / model)
        for field in ("angle", "rate", "momentum"):
            np.testing.assert_array_equal(getattr(back.rotor("wheel1"), field), getattr(sol.rotor("wheel1"), field))
        sol.to_csv(tmp_path / f"{model}.csv")
        back.to_csv(tmp_path / f"{model} loaded.csv")
        text = (tmp_path / f"{model}.csv").read_text()
        assert (tmp_path / f"{model} loaded.csv").read_text() == text
        with open(tmp_path / f"{model}.csv", newline="") as f:
            header, *rows = list(csv.reader(f))
        data = dict(zip(header, np.array(rows, float).T))
        np.testing.assert_array_equal(data["wheel1.rate [rad/s]"], sol.rotor("wheel1").rate)
        np.testing.assert_array_equal(data["wheel1.axial_momentum [kg m^2/s]"], sol.rotor("wheel1").momentum)
        work = sol.work_by_element["wheel1"]  # the motor's work under the rotor's name in either model
        np.testing.assert_allclose(data["wheel1.cumulative_work [J]"], np.concatenate([[0.0], np.cumsum(work)]), rtol=0,
                                   atol=1e-15)
        headers[model] = header
    assert headers["hybrid"] == headers["body"]
    assert all(h.endswith("]") and " [" in h for h in headers["hybrid"])
