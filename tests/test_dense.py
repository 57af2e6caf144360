"""Dense output (``Solution.evaluate``, :mod:`conserve.results.dense`): the run between its nodes.

One model with a closed form throughout (compiled once per order): a body on a hinge about its
principal axis e3, held by a torsion spring-damper — a damped harmonic oscillator in the hinge
angle β — carrying a free hybrid rotor on the same axis (constant axial momentum p, so its spin
angle is θ(t) = (p/J_a) t − β(t)). Every coordinate, velocity, joint coordinate and spin angle is
known exactly, so the interpolant's error between the nodes is measured against the motion
itself: it falls with the run's order (2, or 4 by composition), the interpolant alone has its own
order (4 for the cubic, 8 for degree 7), node times give the nodes back, and an adaptive run
resampled on a uniform grid is as accurate there as at its own nodes."""

import dataclasses

import numpy as np
import pytest

import conserve as cs
from conserve.results.dense import DEGREES, Interpolant, check_degree
from conserve.results.solution import NODE_DIAGNOSTICS, Solution, node_diagnostics

#: the oscillator: natural frequency Ω and decay rate γ (1/s), initial rate w0 (rad/s); the body
#: (mass, principal inertia, centre at R0 from the hinge) and the rotor (axial inertia, spin rate)
OMEGA, GAMMA, W0 = 2.0, 0.2, 1.5
MASS, INERTIA, R0 = 2.0, (0.4, 0.6, 1.0), np.array([0.3, 0.0, 0.0])
J_HINGE = INERTIA[2] + MASS * R0 @ R0
J_AXIAL, SPIN = 0.05, 7.0
T_END = 1.0
#: where between two nodes the interpolant is evaluated (fractions of the interval)
FRACTIONS = np.array([0.1, 0.25, 0.5, 0.75, 0.9])


def oscillator() -> cs.System:
    body = cs.RigidBody("wheel", mass=MASS, inertia=INERTIA, position=R0, velocity=np.cross([0, 0, W0], R0),
                        angular_velocity=(0, 0, W0))
    hinge = cs.Revolute(cs.ground, body, at=(0, 0, 0), axis=(0, 0, 1), name="hinge")
    spring = cs.JointSpringDamper(hinge, stiffness=OMEGA**2 * J_HINGE, damping=2 * GAMMA * J_HINGE, name="torsion")
    rotor = cs.Rotor("rotor", on=body, axis=(0, 0, 1), axial_inertia=J_AXIAL, transverse_inertia=0.03,
                     spin_rate=SPIN)
    return cs.System([body, hinge, spring, rotor])


def exact(t):
    """The closed form at times t (M,): q, v (M, 12), β (M,), θ (M,), p (a number)."""
    t = np.asarray(t, float)
    wd = np.sqrt(OMEGA**2 - GAMMA**2)
    decay = np.exp(-GAMMA * t) * W0 / wd
    beta = decay * np.sin(wd * t)
    rate = decay * (wd * np.cos(wd * t) - GAMMA * np.sin(wd * t))
    c, s = np.cos(beta), np.sin(beta)
    z, o = np.zeros_like(t), np.ones_like(t)
    R = np.stack([np.stack([c, -s, z], -1), np.stack([s, c, z], -1), np.stack([z, z, o], -1)], 1)
    R_rate = rate[:, None, None] * np.stack([np.stack([-s, -c, z], -1), np.stack([c, -s, z], -1),
                                             np.stack([z, z, z], -1)], 1)
    q = np.concatenate([R @ R0, R[:, :, 0], R[:, :, 1], R[:, :, 2]], axis=1)
    v = np.concatenate([R_rate @ R0, R_rate[:, :, 0], R_rate[:, :, 1], R_rate[:, :, 2]], axis=1)
    p = J_AXIAL * (SPIN + W0)
    return q, v, beta, (p / J_AXIAL) * t - beta, p


def between(t, fractions=FRACTIONS):
    """The times at ``fractions`` of every interval of the nodes t (N+1,), in order."""
    return (t[:-1, None] + fractions * np.diff(t)[:, None]).ravel()


def observed(dts, errors):
    """Observed orders between consecutive step sizes (one per pair, per column of errors)."""
    errors = np.asarray(errors, float)
    return np.log(errors[:-1] / errors[1:]) / np.log(np.asarray(dts[:-1]) / np.asarray(dts[1:]))[:, None]


@pytest.fixture(scope="module")
def assembly():
    return oscillator().assemble()


_runs = {}


def run(assembly, order, dt):
    """The fixed-step run (kept for the module: the step sizes share one compiled model per order)."""
    if (order, dt) not in _runs:
        _runs[order, dt] = cs.simulate(assembly, T_END, dt, order=order)
    return _runs[order, dt]


@pytest.mark.parametrize("order,degree,expected", [(2, 3, {"q": 2, "v": 2}), (4, 7, {"q": 4, "v": 4}),
                                                   (4, 3, {"q": 4, "v": 3})])
def test_interpolation_keeps_the_runs_order(assembly, order, degree, expected):
    """Between the nodes the interpolated motion converges to the closed form with the run's order:
    the cubic on order-2 nodes, degree 7 on order-4 nodes (the cubic's velocity there is only of
    order 3: why order 4 and 6 take degree 7). The interpolant's error is of the size of the
    nodes' own, and the constraints and the energy balance between nodes hold to the same order
    (not to round-off as at the nodes)."""
    dts = [0.1, 0.05, 0.025]
    errors, node_errors, residuals = [], [], []
    for dt in dts:
        sol = run(assembly, order, dt)
        ts = between(sol.t)
        ev = sol.evaluate(ts, degree=degree)
        q, v, beta, theta, p = exact(ts)
        wheel = ev["wheel"]
        R_exact = np.stack([q[:, 3:6], q[:, 6:9], q[:, 9:12]], axis=2)
        errors.append([np.max(np.abs(ev.q - q)), np.max(np.abs(ev.v - v)),
                       np.max(np.abs(ev.coordinates["torsion"] - beta)),
                       np.max(np.abs(ev.rotor("rotor").angle - theta)),
                       np.max(np.abs(wheel.position - q[:, :3])), np.max(np.abs(wheel.rotation - R_exact)),
                       np.max(np.abs(ev.joint("hinge").angle - beta))])
        qn, vn, beta_n, theta_n, _ = exact(sol.t)
        node_errors.append([np.max(np.abs(sol.q - qn)), np.max(np.abs(sol.v - vn)),
                            np.max(np.abs(sol.s[:, 0] - beta_n)), np.max(np.abs(sol.theta[:, 0] - theta_n))])
        orthonormality = np.einsum("nki,nkj->nij", wheel.rotation, wheel.rotation) - np.eye(3)
        residuals.append([np.max(ev.constraint_residual), np.max(np.abs(orthonormality)),
                          np.max(np.abs(ev.energy_balance_error)) / ev.energy_scale])
        assert np.allclose(ev.p, p, rtol=1e-13) and np.array_equal(ev.p[:, 0], ev.rotor("rotor").momentum)
        assert np.max(sol.constraint_residual) <= 1e-12  # the run's nodes: round-off
    errors = np.array(errors)
    orders = observed(dts, errors)
    # q, s, θ and the part's position and rotation with the run's order; v with expected["v"]
    wanted = np.array([expected["q"], expected["v"], expected["q"], expected["q"], expected["q"], expected["q"],
                       expected["q"]])
    assert np.all(np.abs(orders - wanted) <= 0.3), orders
    if expected["v"] == order:  # the run's own degree: the interpolant costs no accuracy
        assert np.all(errors[-1, :4] <= 2.0 * np.array(node_errors[-1])), (errors[-1], node_errors[-1])
    # between nodes, the interpolant's error: the constraints (director products, the hinge) and the
    # directors' orthonormality, exact at the nodes whose velocities satisfy their rates to O(h^p),
    # at O(h^(p+1)) (O(h⁴) at most for the cubic), the energy balance with the velocities' order
    residual_orders = observed(dts, residuals)
    g_order = min(order + 1, degree + 1)
    assert np.all(residual_orders >= [g_order - 0.3, g_order - 0.3, expected["v"] - 0.3]), residual_orders


def test_interpolant_alone_has_its_order():
    """Interpolating the exact node values (on uneven nodes, spacings 0.7h and 1.3h): the cubic's
    error is O(h⁴) in the value and O(h³) in the derivative, degree 7's O(h⁸) and O(h⁷), and the
    Lagrange interpolant of a quantity without its rate (degree + 1 nodes) O(h^(degree+1))."""
    for degree, hs in ((3, [0.05, 0.025, 0.0125]), (7, [0.1, 0.05, 0.025])):
        errors = []
        for h in hs:
            n = int(round(T_END / h))
            nodes = T_END * np.cumsum(np.r_[0.0, np.tile([0.7, 1.3], n // 2)]) / n
            q_n, v_n, beta_n, _, _ = exact(nodes)
            ts = between(nodes)
            q, v, beta, _, _ = exact(ts)
            interpolant = Interpolant(nodes, ts, degree)
            q_i, v_i = interpolant.hermite(q_n, v_n)
            errors.append([np.max(np.abs(q_i - q)), np.max(np.abs(v_i - v)),
                           np.max(np.abs(interpolant.lagrange(beta_n) - beta))])
        orders = observed(hs, errors)
        assert np.all(np.abs(orders - [degree + 1, degree, degree + 1]) <= [0.3, 0.4, 0.5]), (degree, orders)


def test_node_times_give_the_nodes(assembly):
    """At the node times the Solution's nodes come back exactly, the diagnostics recomputed there
    are the run's (to round-off), and so are the cumulative dissipation and the energy balance;
    times between nodes mixed in do not disturb them; a single time gives a Solution of one node."""
    sol = run(assembly, 2, 0.05)
    ev = sol.evaluate(sol.t)
    for name in ("t", "q", "v", "s", "p", "theta"):
        assert np.array_equal(getattr(ev, name), getattr(sol, name)), name
    scale = sol.energy_scale
    assert np.allclose(ev.energy.total, sol.energy.total, rtol=0, atol=1e-14 * scale)
    assert np.allclose(ev.angular_momentum, sol.angular_momentum, rtol=0, atol=1e-14 * sol.momentum_scale())
    assert np.allclose(ev.diagnostics["rotor_rate"], sol.diagnostics["rotor_rate"], rtol=1e-14)
    assert np.max(ev.constraint_residual) <= 1e-12
    assert np.allclose(ev.cumulative_dissipation["torsion"], sol.cumulative_dissipation["torsion"], rtol=1e-13)
    assert sol.cumulative_dissipation["torsion"][-1] > 1e-3 * scale  # the damper did remove energy
    assert np.max(np.abs(ev.energy_balance_error)) <= 1e-13 * scale
    # nodes among times between them
    ts = np.sort(np.concatenate([sol.t[::3], between(sol.t[::3], np.array([0.3, 0.6]))]))
    mixed = sol.evaluate(ts)
    at = np.isin(ts, sol.t)
    assert np.array_equal(mixed.q[at], sol.q[::3]) and np.array_equal(mixed.v[at], sol.v[::3])
    assert np.array_equal(mixed.s[at], sol.s[::3]) and np.array_equal(mixed.theta[at], sol.theta[::3])
    # one time; the end within round-off of t_end (t0 + n·dt)
    one = sol.evaluate(sol.t[7])
    assert len(one) == 1 and np.array_equal(one.q[0], sol.q[7]) and one["wheel"].rotation.shape == (1, 3, 3)
    end = sol.evaluate(sol.t[-1] * (1 + 1e-14))
    assert end.t[0] == sol.t[-1] and np.array_equal(end.q[0], sol.q[-1])
    # per interval: no multipliers or Newton iterations between interpolated nodes
    assert ev.multipliers.shape == (len(sol) - 1, len(sol.constraint_rows)) and np.all(np.isnan(ev.multipliers))
    assert not np.any(ev.newton_iterations) and not np.any(ev.substeps)
    # a controller's columns (here a stand-in: the node's index) are held from the node at or before
    held = dataclasses.replace(sol, diagnostics={**sol.diagnostics, "control.c.k": np.arange(len(sol))})
    assert np.array_equal(held.evaluate(ts).diagnostics["control.c.k"], np.searchsorted(sol.t, ts, side="right") - 1)
    assert ev.stats["interpolation"] == {"degree": check_degree("auto", sol.stats.get("order")), "nodes": len(sol)}
    assert ev.assembly is sol.assembly


def test_adaptive_run_resampled_on_a_uniform_grid(assembly):
    """Saveat after the fact: an adaptive run (uneven nodes) evaluated on a uniform grid matches a
    fixed-step reference of order 4 on that grid to the adaptive run's own accuracy (its error at
    its nodes against the closed form): the interpolation adds nothing of note."""
    adaptive = cs.simulate(assembly, T_END, "adaptive", rtol=1e-6, atol=1e-8)
    steps = np.diff(adaptive.t)
    assert np.max(steps) > 1.5 * np.min(steps)  # uneven
    reference = run(assembly, 4, 0.025)  # nodes on the grid; error ~ 1e-10
    grid = reference.t
    resampled = adaptive.evaluate(grid)
    q_nodes, v_nodes, _, _, _ = exact(adaptive.t)
    node_error = np.max(np.abs(adaptive.q - q_nodes))
    grid_error = np.max(np.abs(resampled.q - reference.q))
    assert node_error < 1e-3  # the tolerance's accuracy (the run's global error)
    assert grid_error <= 2.0 * node_error, (grid_error, node_error)
    assert np.max(np.abs(resampled.v - reference.v)) <= 2.0 * np.max(np.abs(adaptive.v - v_nodes))
    assert np.allclose(resampled["wheel"].position, reference["wheel"].position, rtol=0, atol=2.0 * node_error)
    assert np.allclose(resampled.rotor("rotor").angle, reference.rotor("rotor").angle, rtol=0, atol=4.0 * node_error)
    assert np.max(resampled.constraint_residual) <= 10.0 * node_error


def test_a_loaded_solution_interpolates_without_its_model(assembly, tmp_path):
    """A Solution read from a file has no model: its evaluate interpolates the same states, with
    the model-computed diagnostics NaN (the rotor rates are the interpolant's); given the model
    (assembly=), the diagnostics are those of the run's evaluate. A model of other parts is refused."""
    sol = run(assembly, 2, 0.05)
    ts = between(sol.t, np.array([0.5]))
    path = tmp_path / "run.npz"
    sol.save(path)
    loaded = Solution.load(path)
    assert loaded.assembly is None
    bare, full = loaded.evaluate(ts), sol.evaluate(ts)
    for name in ("q", "v", "s", "p", "theta", "dissipation"):
        assert np.array_equal(getattr(bare, name), getattr(full, name)), name
    assert np.all(np.isnan(bare.energy.total)) and np.all(np.isnan(bare.constraint_residual))
    assert np.allclose(bare.diagnostics["rotor_rate"], full.diagnostics["rotor_rate"], rtol=1e-3)
    assert np.array_equal(bare["wheel"].rotation, full["wheel"].rotation)
    with_model = loaded.evaluate(ts, assembly=assembly)
    assert np.allclose(with_model.energy.total, full.energy.total, rtol=1e-14)
    assert np.allclose(with_model.constraint_residual, full.constraint_residual, rtol=1e-12, atol=1e-16)
    with pytest.raises(ValueError, match="not the model of this Solution"):
        loaded.evaluate(ts, assembly=cs.problems.free_body())


def test_times_outside_the_span_nan_and_bad_arguments_are_refused(assembly):
    sol = run(assembly, 2, 0.1)
    span = r"\[t0, t_end\] = \[0\.0, 1\.0\] s"
    for t in (-0.01, [0.5, 1.2], 1.0 + 1e-6, np.inf):
        with pytest.raises(ValueError, match=span):
            sol.evaluate(t)
    with pytest.raises(ValueError, match="NaN"):
        sol.evaluate([0.1, np.nan])
    with pytest.raises(ValueError, match="strictly increasing"):
        sol.evaluate([0.5, 0.2])
    with pytest.raises(ValueError, match="strictly increasing"):
        sol.evaluate([0.2, 0.2])
    with pytest.raises(ValueError, match="1-D"):
        sol.evaluate(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="empty"):
        sol.evaluate([])
    with pytest.raises(ValueError, match="degree"):
        sol.evaluate(0.5, degree=5)


def test_default_degree_follows_the_runs_order():
    """"auto": the cubic for the order-2 step, degree 7 for orders 4 and 6 and an unknown order;
    and the diagnostics the model recomputes are the keys of node_diagnostics."""
    assert check_degree("auto", 2) == 3
    assert check_degree("auto", 4) == check_degree("auto", 6) == check_degree("auto", None) == 7
    assert all(check_degree(d) == d for d in DEGREES)
    import inspect
    source = inspect.getsource(node_diagnostics)
    assert all(f'"{key}"' in source for key in NODE_DIAGNOSTICS)
