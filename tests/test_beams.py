"""Geometrically exact beams (conserve.model.beams) and static equilibrium (conserve.studies.equilibrium):
conservation, objectivity, closed forms of statics and vibration, errors."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import conserve as cs
from conserve.model.beams import rod_strains

#: the free-flying beam after Simo and Vu-Quoc (1988), as in examples/flying_beam.py
SPAGHETTI = dict(EA=1e4, GA=1e4, GJ=500.0, EI=500.0, rhoA=1.0, rhoI=10.0)


def hat(t):
    """0 → 1 on [0, 2.5] s, 1 → 0 on [2.5, 5] s, then 0."""
    return jnp.clip(jnp.minimum(t / 2.5, (5.0 - t) / 2.5), 0.0, None)


def flying_beam(elements=10):
    beam = cs.Beam("spaghetti", cs.Section(**SPAGHETTI), [(6, 0, 0), (0, 0, 8)], elements=elements)
    F, M = jnp.array([20.0, 0.0, 0.0]), jnp.array([0.0, 200.0, 100.0])
    load = cs.Force(beam.start, force=lambda t, s: hat(t) * F, torque=lambda t, s: hat(t) * M)
    return cs.System([beam, load]), beam


def cantilever(elements, load, section=None, length=1.0):
    section = section or cs.Section.rectangle(0.02, 0.03, E=2.1e11, G=8.0e10, rho=7800.0)
    beam = cs.Beam("c", section, [(0, 0, 0), (length, 0, 0)], elements=elements, normal=(0, 1, 0))
    return cs.System([beam, cs.Fixed(beam.start, cs.ground, at=(0, 0, 0)), load(beam)]), beam


def test_free_beam_keeps_energy_and_momentum_after_its_loads_end():
    system, beam = flying_beam()
    sol = cs.simulate(system, t_end=15.0, dt=0.05)
    after = np.asarray(sol.t) >= 5.0
    E = np.asarray(sol.energy.total)[after]
    L = np.asarray(sol.angular_momentum)[after]
    P = np.asarray(sol.linear_momentum)[after]
    assert E[0] > 100.0  # the loads did work
    assert np.max(np.abs(E - E[0])) <= 1e-12 * E[0]
    assert np.max(np.abs(L - L[0])) <= 1e-12 * sol.momentum_scale("angular_momentum")
    assert np.max(np.abs(P - P[0])) <= 1e-12 * np.max(np.abs(P))
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * E[0]
    assert np.max(np.asarray(sol.constraint_residual)) <= 1e-12


@pytest.mark.slow
def test_free_beam_conserves_over_ten_thousand_steps():
    system, _ = flying_beam()
    sol = cs.simulate(system, t_end=505.0, dt=0.05)
    after = np.asarray(sol.t) >= 5.0
    E, L = np.asarray(sol.energy.total)[after], np.asarray(sol.angular_momentum)[after]
    assert after.sum() >= 10_000
    assert np.max(np.abs(E - E[0])) <= 1e-12 * E[0]
    assert np.max(np.abs(L - L[0])) <= 1e-12 * sol.momentum_scale("angular_momentum")


@pytest.mark.slow
def test_free_spinning_l_shaped_beam_conserves_over_ten_thousand_steps():
    """A free L-shaped beam set spinning (it stretches and flexes under its centrifugal load):
    energy and angular momentum to 1e-12 over 10⁴ steps. The energy's per-step round-off is
    ~5e-15 here (ε times the stretch stiffness EA times the step's displacement: the stretch
    strain ≈ 1 minus its reference 1), so this is a random walk's ~√N of it, not a drift."""
    beam = cs.Beam("L", cs.Section(**SPAGHETTI), [(0, 0, 0), (5, 0, 0), (5, 5, 0)], elements=5,
                   angular_velocity=(0.3, 0.2, 2.0))
    sol = cs.simulate(cs.System([beam]), t_end=500.0, dt=0.05)
    E, L = np.asarray(sol.energy.total), np.asarray(sol.angular_momentum)
    assert len(E) > 10_000 and np.ptp(sol[beam].strains[:, :, 2]) > 1e-3  # it stretches and vibrates
    assert np.max(np.abs(E - E[0])) <= 1e-12 * E[0]
    assert np.max(np.abs(L - L[0])) <= 1e-12 * sol.momentum_scale("angular_momentum")


def _strained(beam, rng):
    """The beam's nodes moved and turned at random (orthonormal frames), as coordinates (n_q,)."""
    q = []
    for node in beam.nodes:
        w = 0.3 * rng.standard_normal(3)
        K = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        R = (np.eye(3) + K + K @ K / 2) @ node.rotation
        U, _, Vt = np.linalg.svd(R)
        q.append(np.vstack([node.position + 0.1 * rng.standard_normal(3), (U @ Vt).T]))
    return np.concatenate(q).ravel()


def test_strain_energy_is_objective_and_its_forces_balance():
    """A strained beam moved rigidly keeps its energy; its elastic forces have no resultant force
    or moment (about any point); the unstrained beam moved rigidly has no energy and no force."""
    system, beam = flying_beam(elements=6)
    model = system.assemble().model
    rng = np.random.default_rng(3)
    q = _strained(beam, rng)
    R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    R *= np.sign(np.linalg.det(R))  # a rotation
    c = np.array([30.0, -20.0, 5.0])

    def moved(q):
        Q = q.reshape(-1, 4, 3)
        return np.concatenate([Q[:, :1] @ R.T + c, Q[:, 1:] @ R.T], axis=1).ravel()

    energy = jax.jit(lambda q: jnp.sum(model.potential_energies(q)))
    U = float(energy(q))
    assert U > 1e3
    assert abs(float(energy(moved(q))) - U) <= 1e-12 * U
    f = np.asarray(jax.grad(energy)(jnp.asarray(q))).reshape(-1, 4, 3)
    Q = q.reshape(-1, 4, 3)
    scale = np.max(np.abs(f)) * np.max(np.abs(Q))
    assert np.max(np.abs(f[:, 0].sum(axis=0))) <= 1e-12 * np.max(np.abs(f))
    moment = np.sum(np.cross(Q, f), axis=(0, 1))
    assert np.max(np.abs(moment)) <= 1e-12 * scale
    q0 = np.asarray(system.assemble().initial_state.q)
    assert abs(float(energy(moved(q0)))) <= 1e-20
    assert np.max(np.abs(np.asarray(jax.grad(energy)(jnp.asarray(moved(q0)))))) <= 1e-9


def test_cantilever_tip_deflection_converges_to_timoshenko_at_second_order():
    P = 10.0
    errors = []
    for n in (4, 8, 16):
        system, beam = cantilever(n, lambda b: cs.Force(b.end, force=(0, 0, -P)))
        eq = cs.equilibrium(system)
        tip = eq.q.reshape(-1, 3)[4 * n]
        s = beam.section
        exact = P / (3 * s.EI[0]) + P / s.GA[1]  # L = 1: bending about d1 = y, shear along d2 = z
        errors.append(abs(-tip[2] / exact - 1))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(orders - 2) < 0.1), (errors, orders)
    assert errors[-1] < 2e-3


@pytest.mark.slow
def test_end_moment_rolls_a_cantilever_into_a_half_circle():
    """A tip moment M = π EI / L bends the cantilever into a half circle of radius L/π (closed
    form of the elastica); the tip converges at second order in the element length."""
    section = cs.Section(EA=1e7, GA=1e7, GJ=1e2, EI=1e2, rhoA=1.0, rhoI=1e-2)
    M = np.pi * section.EI[0]
    errors = []
    for n in (16, 32):
        system, _ = cantilever(n, lambda b: cs.Torque(b.end, (0, -M, 0)), section)
        tip = cs.equilibrium(system, load_steps=10).q.reshape(-1, 3)[4 * n]
        errors.append(np.linalg.norm(tip - [0, 0, 2 / np.pi]))
    assert errors[1] < 1e-2
    assert errors[0] / errors[1] > 3.5


def test_equilibrium_of_a_load_on_a_winch_rope_hangs_below_its_tip():
    """A rope (a loop row with a multiplier) from a beam's tip to a load started 40° off the
    vertical: the load comes to rest straight below the tip, the rope's length kept, its tension
    m g; the first Newton matrix gets the rope's stiffness from the multiplier's first estimate."""
    section = cs.Section(EA=1e7, GA=1e7, GJ=1e4, EI=1e4, rhoA=5.0, rhoI=1e-3)
    arm = cs.Beam("arm", section, [(0, 0, 0), (1, 0, 0)], elements=2, normal=(0, 1, 0))
    drum = cs.Rotor("drum", on=arm.start, axis=(0, 1, 0), mass=1.0, axial_inertia=0.01, transverse_inertia=0.01)
    a = np.radians(40.0)
    load = cs.PointMass("load", 2.0, position=(1 + 0.5 * np.sin(a), 0.0, -0.5 * np.cos(a)))
    rope = cs.Rope(arm.end, load, winch=drum, radius=0.05, points=((1, 0, 0), load.position))
    eq = cs.equilibrium(cs.System([arm, drum, load, cs.Fixed(arm.start, cs.ground, at=(0, 0, 0)), rope,
                                   cs.Gravity()]), load_steps=2)
    q = eq.q.reshape(-1, 3)
    tip, x = q[4 * 2], q[4 * 3]
    assert np.allclose(x[:2], tip[:2], atol=1e-12) and x[2] == pytest.approx(tip[2] - 0.5, abs=1e-12)
    assert abs(eq.multipliers[0]) * 0.5 == pytest.approx(2.0 * 9.81, rel=1e-9)  # ½(|r|² − L²): μ |r| = tension


def test_clamped_beam_rests_at_its_gravity_equilibrium_and_swings_conserving():
    system, beam = cantilever(6, lambda b: cs.Gravity())
    eq = cs.equilibrium(system)
    sag = -eq.q.reshape(-1, 3)[4 * 6][2]
    s = beam.section
    w = s.rhoA * 9.81
    assert sag == pytest.approx(w / (8 * s.EI[0]) + w / (2 * s.GA[1]), rel=0.05)  # uniform load, L = 1
    rest = cs.simulate(eq.assembly, t_end=0.01, dt=1e-4)
    assert np.max(np.abs(np.asarray(rest.q) - eq.q)) <= 1e-12
    # statics of the lumped loads: each element's shear force carries the weight beyond its
    # midpoint x_m, its bending moment that weight's lever plus w ℓ²/8 from lumping it at nodes
    x_m, ell = (np.arange(6) + 0.5) / 6, 1 / 6
    resultants = rest[beam].resultants[-1]
    assert -resultants[:, 1] == pytest.approx(w * (1 - x_m), rel=1e-6)
    assert resultants[:, 3] == pytest.approx(w * (1 - x_m) ** 2 / 2 + w * ell**2 / 8, rel=1e-4)
    swing = cs.simulate(system, t_end=0.01, dt=1e-4)  # released straight: it swings about the sag
    E = np.asarray(swing.energy.total)
    assert np.max(np.abs(np.asarray(swing.q)[:, 4 * 6 * 3 + 2])) > 0.5 * sag
    assert np.max(np.abs(E - E[0])) <= 1e-12 * swing.energy_scale


def test_material_damping_dissipates_exactly_what_the_run_reports(tmp_path):
    """Kelvin–Voigt damping: E_n − E_0 = −D_n to round-off on both conserving backends, every
    element's dissipation ≥ 0, and each mode's damping ratio τ ω / 2 (stiffness-proportional)."""
    tau = 1e-3
    section = cs.Section.rectangle(0.02, 0.03, E=2.1e11, nu=0.3, rho=7800.0)
    beam = cs.Beam("arm", section, [(0, 0, 0), (1, 0, 0)], elements=6, normal=(0, 1, 0), damping=tau)
    system = cs.System([beam, cs.Fixed(beam.start, cs.ground, at=(0, 0, 0)), cs.Gravity()])
    for backend in ("director", "reduced"):
        sol = cs.simulate(system, t_end=0.02, dt=1e-4, backend=backend)
        E = np.asarray(sol.energy.total)
        lost = E[0] - E[-1]
        assert lost > 1e-3 * sol.energy_scale
        assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * sol.energy_scale
        per_element = np.array([sol.dissipation_by_element[f"arm element {e}"] for e in range(6)])
        assert np.all(per_element >= 0) and per_element.sum() == pytest.approx(lost, rel=1e-9)
    sol.save(tmp_path / "run.npz")
    again = cs.Solution.load(tmp_path / "run.npz")
    assert np.array_equal(again[beam].strains, sol[beam].strains)
    from conserve.results.animation import Scene, save_frame

    lines = [(pa, pb) for name, kind, pa, pb, _, _ in Scene(again, [0, len(again) - 1]).links if kind == "beam"]
    assert len(lines) == 6 and np.allclose(lines[-1][1][-1], again[beam].centreline[-1, -1])
    save_frame(again, tmp_path / "beam.png")
    assert (tmp_path / "beam.png").stat().st_size > 10_000
    lam = cs.linearize(cs.equilibrium(system).assembly).eigenvalues
    slow = lam[(lam.imag > 1) & (np.abs(lam) < 1e3)]
    omega = np.abs(slow)
    assert -slow.real == pytest.approx(tau * omega**2 / 2, rel=1e-6)


def test_distributed_loads_inertial_and_following_the_sections():
    """A load per length equal to the weight gives gravity's equilibrium exactly (both lumped at
    the nodes); a follower load in the sections' axes does work reported per node, which the
    energy balances to round-off."""
    section = cs.Section.rectangle(0.02, 0.03, E=2.1e11, nu=0.3, rho=7800.0)
    weight = (0.0, 0.0, -section.rhoA * 9.81)
    sags = []
    for load in (lambda b: cs.Gravity(), lambda b: cs.DistributedLoad(b, weight)):
        system, beam = cantilever(6, load, section)
        sags.append(cs.equilibrium(system).q)
    assert np.max(np.abs(sags[0] - sags[1])) <= 1e-15
    system, beam = cantilever(6, lambda b: cs.DistributedLoad(b, (0.0, -50.0, 0.0), frame="body"), section)
    sol = cs.simulate(system, t_end=0.01, dt=1e-4)
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * sol.energy_scale
    assert len([n for n in sol.work_by_element if n.startswith("load on c[")]) == 7
    with pytest.raises(cs.ModelError, match="varies in time"):
        cs.DistributedLoad(beam, lambda t: (0, 0, 1))


def test_adaptive_steps_and_ensembles_run_beams():
    """Adaptive steps keep the free beam's energy after its load pulse; an ensemble of two
    stiffnesses gives each member's single run."""
    system, beam = flying_beam(elements=4)
    sol = cs.simulate(system, t_end=8.0, dt="adaptive", rtol=1e-5)
    after = np.asarray(sol.t) >= 5.0
    E = np.asarray(sol.energy.total)[after]
    assert after.sum() > 3 and np.max(np.abs(E - E[0])) <= 1e-12 * E[0]
    assembly = system.assemble()
    k = next(i for i, p in enumerate(assembly.model.potential_params) if "stiffness" in p)

    def stiffer(scale):
        params = list(assembly.model.potential_params)
        params[k] = {**params[k], "stiffness": params[k]["stiffness"] * scale}
        return dataclasses.replace(assembly, model=dataclasses.replace(assembly.model, potential_params=tuple(params)))

    members = [stiffer(1.0), stiffer(2.0)]
    batch = cs.simulate_batch(members, t_end=1.0, dt=0.05, workers=1)
    for i, member in enumerate(members):
        alone = cs.simulate(member, t_end=1.0, dt=0.05)
        assert np.max(np.abs(np.asarray(batch[i].q) - np.asarray(alone.q))) <= 1e-10


def test_first_bending_frequency_of_a_cantilever():
    """Euler–Bernoulli's first clamped-free frequency 1.8751² √(EI / (ρA L⁴)), to the slender
    beam's shear and rotary-inertia correction and the lumped mass's discretisation error."""
    system, beam = cantilever(16, lambda b: cs.Gravity(g=(0, 0, 0)))
    s = beam.section
    f = cs.linearize(system).frequencies
    exact = 1.875104**2 * np.sqrt(np.array(s.EI) / s.rhoA)  # in the two planes; about d2 the lower
    assert f[:2] == pytest.approx(exact[::-1], rel=5e-3)


@pytest.mark.slow
def test_beam_trajectories_converge_at_the_orders_of_the_scheme():
    """The tip of a soft clamped beam released under gravity: observed time orders 2 and 4 (the
    sub-steps of order 4 step backwards too)."""
    beam = cs.Beam("c", cs.Section(**SPAGHETTI), [(0, 0, 0), (10, 0, 0)], elements=3, normal=(0, 1, 0))
    system = cs.System([beam, cs.Fixed(beam.start, cs.ground, at=(0, 0, 0)), cs.Gravity()])

    def tip(dt, order):
        return np.asarray(cs.simulate(system, t_end=0.5, dt=dt, order=order)[beam].centreline)[-1, -1]

    exact = tip(1e-3, 6)
    for order, dts in ((2, (0.01, 0.005)), (4, (0.025, 0.0125))):
        e = [np.linalg.norm(tip(dt, order) - exact) for dt in dts]
        assert np.log2(e[0] / e[1]) == pytest.approx(order, abs=0.15), (order, e)


def test_a_hybrid_rotor_on_a_beam_node_keeps_energy_and_momentum():
    """A spinning wheel on the tip node of a free beam: gyroscopic coupling through the beam."""
    beam = cs.Beam("boom", cs.Section(**SPAGHETTI), [(0, 0, 0), (3, 0, 0)], elements=3,
                   angular_velocity=(0.0, 0.2, 0.1))
    wheel = cs.Rotor("wheel", on=beam.end, axis=(1, 0, 0), mass=2.0, axial_inertia=0.5, transverse_inertia=0.3,
                     spin_rate=50.0)
    sol = cs.simulate(cs.System([beam, wheel]), t_end=5.0, dt=0.01)
    E, L = np.asarray(sol.energy.total), np.asarray(sol.angular_momentum)
    assert np.max(np.abs(E - E[0])) <= 1e-12 * sol.energy_scale
    assert np.max(np.abs(L - L[0])) <= 1e-12 * sol.momentum_scale("angular_momentum")
    assert np.ptp(sol[beam].strains[:, :, 4]) > 1e-4  # the wheel's gyroscopic moment bends the beam


def test_gradient_of_a_run_with_respect_to_the_beam_stiffness():
    """jax.grad through cs.trajectory of a soft clamped beam's tip drop after 0.5 s by a factor on
    its stiffnesses agrees with central differences of the runs."""
    from dataclasses import replace

    beam = cs.Beam("c", cs.Section(**SPAGHETTI), [(0, 0, 0), (10, 0, 0)], elements=3, normal=(0, 1, 0))
    assembly = cs.System([beam, cs.Fixed(beam.start, cs.ground, at=(0, 0, 0)), cs.Gravity()]).assemble()
    model = assembly.model
    k = next(i for i, p in enumerate(model.potential_params) if "stiffness" in p)
    tip = 3 * assembly.layout.offsets[beam.end.name] + 2

    def drop(scale):
        params = list(model.potential_params)
        params[k] = {**params[k], "stiffness": params[k]["stiffness"] * scale}
        states, _ = cs.trajectory(replace(model, potential_params=tuple(params)), assembly.initial_state, 0.0,
                                  0.01, 50)
        return states.q[-1, tip]

    exact = float(jax.grad(drop)(1.0))
    assert abs(exact) > 1e-3
    assert exact == pytest.approx(float((drop(1 + 1e-5) - drop(1 - 1e-5)) / 2e-5), rel=1e-6)


def test_reduced_backend_runs_beams_as_the_director_backend():
    system, _ = cantilever(3, lambda b: cs.Gravity())
    a = cs.simulate(system, t_end=0.004, dt=2e-4)
    b = cs.simulate(system, t_end=0.004, dt=2e-4, backend="reduced")
    assert np.max(np.abs(np.asarray(a.q) - np.asarray(b.q))) <= 1e-10


def test_strains_of_a_bent_and_twisted_element():
    """Two nodes turned against each other by α about d1 (bending) or d3 (twist): that curvature
    is sin α / L (the midpoint rule's), the others 0."""
    a, L = 0.3, 0.5
    c, s = np.cos(a), np.sin(a)
    for R, component in ((np.array([[1, 0, 0], [0, c, -s], [0, s, c]]), 3),
                         (np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]), 5)):
        strains = np.asarray(rod_strains(np.zeros(3), np.eye(3), np.array([0.0, 0.0, L]), R.T, L))
        assert strains[component] == pytest.approx(s / L, rel=1e-14)
        assert np.all(np.abs(np.delete(strains[3:], component - 3)) <= 1e-15)


def test_bad_sections_and_beams_are_refused_with_what_to_fix():
    with pytest.raises(cs.ModelError, match="EA must be a positive number"):
        cs.Section(EA=-1, GA=1, GJ=1, EI=1, rhoA=1, rhoI=1)
    with pytest.raises(cs.ModelError, match="G= or Poisson"):
        cs.Section.circle(0.01, E=2e11, rho=7800)
    section = cs.Section(**SPAGHETTI)
    with pytest.raises(cs.ModelError, match="coincide"):
        cs.Beam("b", section, [(0, 0, 0), (0, 0, 0)])
    with pytest.raises(cs.ModelError, match="normal"):
        cs.Beam("b", section, [(0, 0, 0), (0, 0, 1)], normal=(0, 0, 2))
    beam = cs.Beam("b", section, [(0, 0, 0), (1, 0, 0), (1, 1, 0)], elements=(2, 4))
    assert beam.n_elements == 6 and beam.at(1.5) is beam.node(4) and beam.end is beam.node(-1)
    with pytest.raises(cs.ModelError, match="no node at s = 0.6"):
        beam.at(0.6)
    with pytest.raises(cs.ModelError, match="fix it to the ground"):
        cs.equilibrium(cs.System([beam]))
