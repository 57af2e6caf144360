"""The Newton matrix's structured linear algebra (conserve.discrete.linear): the Jacobians from
coloured directional derivatives (the tree solver's blocks, the dense solver's compressed
columns) equal jax.jacfwd's to round-off on every kind of model, the block elimination solves
the same equations as a dense LU, models that are not trees (loops) fall back to the coloured
dense solver, and runs with either solver give the same trajectory."""

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import once

import conserve as cs
from conserve import problems
from conserve.backends.director import BORDERED_MIN_NODES, Director, _nodes, initial_guess, _residual, sampled_jacobians
from conserve.discrete.linear import BlockTree, BorderedTree, Coloured, Dense, block_tree, bordered_tree, coloured
from conserve.problems import _bar


def chain(n, spin=1.0):
    """n bars hanging from the ground by spherical joints, tilted and spinning about e3."""
    direction = np.array([np.sin(0.3), 0.0, -np.cos(0.3)])
    points = [0.5 * k * direction for k in range(n + 1)]
    bars = [_bar(f"bar{k}", points[k], points[k + 1], omega=(0.0, 0.0, spin), pivot=np.zeros(3)) for k in range(n)]
    joints = [cs.Spherical(cs.ground, bars[0], at=points[0])]
    joints += [cs.Spherical(bars[k - 1], bars[k], at=points[k], name=f"joint{k}") for k in range(1, n)]
    return cs.System([*bars, *joints, cs.Gravity()])


def hinged_pair_with_forces():
    """Two bodies on a revolute joint with a joint spring-damper and motor, a hybrid rotor with a
    motor on the first, and a bead held to the second by a user constraint and a spring-damper:
    joint coordinates, rotors, user rows and point masses in one tree."""
    a = cs.RigidBody("a", 2.0, (0.3, 0.4, 0.5))
    b = cs.RigidBody("b", 1.0, (0.1, 0.2, 0.25), position=(0.6, 0.0, 0.0), angular_velocity=(0.0, 0.0, 2.0),
                     velocity=(0.0, 0.6, 0.0))
    bead = cs.PointMass("bead", 0.2, position=(0.6, 1.0, 0.0), velocity=(0.3, 0.6, 0.1))
    hinge = cs.Revolute(a, b, at=(0.3, 0.0, 0.0), axis=(0.0, 0.0, 1.0), name="hinge")
    ring = cs.Constraint([b, bead], residual=lambda fb, fp: jnp.sum((fp.position - fb.position) ** 2)[None] - 1.0,
                         rows=1, name="ring")
    wheel = cs.Rotor("wheel", on=a, axis=(1.0, 0.0, 0.0), offset=(-0.2, 0.0, 0.0), mass=0.5, axial_inertia=0.01,
                     transverse_inertia=0.006, spin_rate=30.0, motor=lambda t, rotor: 0.01 * jnp.cos(t))
    return cs.System([a, b, bead, hinge, ring, wheel,
                      cs.JointSpringDamper(hinge, stiffness=3.0, damping=0.1, name="torsion"),
                      cs.JointMotor(hinge, lambda t, joint: 0.2 * jnp.sin(t), name="motor"),
                      cs.SpringDamper(b, bead, at_a=(0.2, 0.0, 0.0), at_b=(0.0, 0.0, 0.0), stiffness=4.0,
                                      damping=0.05, name="tether")])


MODELS = {
    "chain": lambda: chain(5),
    "forces": hinged_pair_with_forces,
    "crane (rope on a winch rotor)": lambda: problems.RotaryCrane().system(),
    "satellite (star)": lambda: problems.thompson_examples()["satellite"][0],
    "rotorcraft (rotors on a hub)": lambda: problems.thompson_examples()["rotorcraft"][0],
    # a 5 t tower 60 m high: condition ~1e14 of the tower's block, too ill-conditioned to eliminate
    # without pivoting between blocks, so the dense LU serves
    "wind turbine (ill-conditioned)": lambda: problems.thompson_examples()["wind turbine"][0],
    "slider-crank (loop)": lambda: problems.slider_crank(),
    "double four-bar (loops)": lambda: problems.double_four_bar(),
}
TREES = {"chain", "forces", "crane (rope on a winch rotor)", "satellite (star)", "rotorcraft (rotors on a hub)",
         "double four-bar (loops)", "slider-crank (loop)"}  # loops closed through the ground: chains of nodes


@pytest.mark.parametrize("name", sorted(MODELS))
def test_structured_jacobians_and_solve_equal_the_dense_ones(name):
    """On every model the compressed (coloured) Jacobian of the dense solver equals jacfwd's to
    round-off at a point other than the samples its pattern came from; loops and ill-conditioned
    blocks get no tree, and there it needs at most half as many derivatives as unknowns (so it
    serves); on every tree model the tree solver's coloured-derivative blocks equal jacfwd's too
    and the elimination solves J x = r to round-off."""
    assembly = MODELS[name]().assemble()
    model, state = assembly.model, assembly.initial_state
    nq, nc, nr = model.n_coordinates, model.n_constraints, model.n_rotors
    samples = sampled_jacobians(model, state)
    tree = block_tree(samples, _nodes(model))
    assert (tree is not None) == (name in TREES)
    solver = coloured(samples, np.concatenate([np.arange(nq) // 3, nq // 3 + np.arange(nc + 2 * nr)]))
    n = nq + nc + 2 * nr
    rng = np.random.default_rng(1)
    noise, r, w = 1e-4 * rng.standard_normal(n), rng.standard_normal(n), np.abs(rng.standard_normal(n))
    J, compressed, assembled, dx, dx_kernel, abs_times = (
        np.asarray(a) if a is not None else None for a in _jacobians(model, state, noise, solver, tree, r, w))
    scale = np.max(np.abs(J))
    np.testing.assert_allclose(compressed, J, rtol=0, atol=1e-13 * scale)
    if tree is None:  # loops and the wind turbine: at most half as many derivatives as unknowns
        assert 2 * solver.n_colours <= n
        return
    np.testing.assert_allclose(assembled, J, rtol=0, atol=1e-13 * scale)
    for x in (dx, dx_kernel):  # LAPACK's inverses of the diagonal blocks, and Gauss–Jordan's (kernel=True)
        backward = np.max(np.abs(J @ x - r)) / (np.max(np.abs(J) @ np.abs(x)) + np.max(np.abs(r)))
        assert backward < 1e-12
    np.testing.assert_allclose(abs_times, np.abs(J) @ w, rtol=1e-13, atol=1e-15 * scale)


@partial(once, static_argnums=(3, 4))
def _jacobians(model, state, noise, solver, tree, r, w):
    """At x = the initial guess of a step of 2 ms + noise: jacfwd's J, the coloured solver's J,
    and with the tree solver its blocks assembled densely, its solution of J δx = r with LAPACK's
    and with Gauss–Jordan's block inverses, and |J| w (None without a tree); one program per model."""
    nc, h = model.n_constraints, 2e-3
    x = initial_guess(model, state, jnp.zeros(nc), h) + noise

    def residual(x):
        return _residual(model, state, 0.1, h, x)

    J = jax.jacfwd(residual)(x)
    if tree is None:
        return J, solver.jacobian(residual, x), None, None, None, None
    blocks = tree.jacobian(residual, x)
    kernel = dataclasses.replace(tree, kernel=True)
    return (J, solver.jacobian(residual, x), tree.dense(blocks), tree.solve(tree.factorise(blocks), r),
            kernel.solve(kernel.factorise(blocks), r), tree.abs_times(blocks, w))


@pytest.mark.parametrize("name", ["chain", "forces"])
def test_tree_and_dense_runs_agree(name):
    """The same steps to the Newton tolerance with either solver — the tree's blocks inverted by
    LAPACK or, as a run compiled "optimized" takes them, by Gauss–Jordan (``kernel=True``) —, with
    the exact energy balance."""
    assembly = MODELS[name]().assemble()
    tree = cs.simulate(assembly, 0.1, 2e-3, backend=Director(linear="tree"))
    blocks = Director(linear="tree").prepare(assembly.model, assembly.initial_state).linear
    kernel = cs.simulate(assembly, 0.1, 2e-3, backend=Director(linear=dataclasses.replace(blocks, kernel=True)))
    dense = cs.simulate(assembly, 0.1, 2e-3, backend=Director(linear="dense"))
    scale = np.max(np.abs(dense.q))
    assert np.max(np.abs(tree.q - dense.q)) <= 1e-10 * scale
    assert np.max(np.abs(kernel.q - dense.q)) <= 1e-10 * scale
    for sol in (tree, kernel, dense):
        assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * np.max(np.abs(sol.energy.kinetic))
        assert np.max(sol.constraint_residual) <= 1e-10


def test_loop_runs_with_coloured_jacobians_agree_with_dense_ones():
    """A model with kinematic loops takes the coloured dense solver by default, and its steps
    equal the plain jacfwd solver's to the Newton tolerance, with the exact energy balance."""
    assembly = problems.double_four_bar().assemble()
    auto = cs.simulate(assembly, 0.05, 2e-3)
    assert isinstance(Director().prepare(assembly.model, assembly.initial_state).linear, Coloured)
    dense = cs.simulate(assembly, 0.05, 2e-3, backend=Director(linear="dense"))
    assert (auto.stats["newton_matrix"], dense.stats["newton_matrix"]) == ("coloured", "dense")
    assert np.max(np.abs(auto.q - dense.q)) <= 1e-10 * np.max(np.abs(dense.q))
    for sol in (auto, dense):
        assert np.max(np.abs(sol.energy_balance_error)) <= 1e-12 * np.max(np.abs(sol.energy.kinetic))
        assert np.max(sol.constraint_residual) <= 1e-10


def test_a_model_run_again_is_not_sampled_again(monkeypatch):
    """The Newton matrix's structure is found once per model object: preparing the same model again
    (a loop of runs from other initial states) samples no Jacobians and returns the same solver; an
    equal model built anew is sampled."""
    from conserve.backends import director
    assembly = problems.double_four_bar().assemble()
    found = Director().prepare(assembly.model, assembly.initial_state).linear
    calls = []
    monkeypatch.setattr(director, "sampled_jacobians", lambda *args: calls.append(1) or sampled_jacobians(*args))
    moved = assembly.initial_state._replace(v=0.5 * assembly.initial_state.v)
    assert Director().prepare(assembly.model, moved).linear is found and not calls
    other = problems.double_four_bar().assemble()
    assert Director().prepare(other.model, other.initial_state).linear == found and len(calls) == 1


def test_failure_with_a_sampled_pattern_names_the_dense_matrix():
    """A step that fails with a structured Newton matrix (its sparsity sampled at the start) says
    so and how to run with the plain jacfwd matrix."""
    with pytest.raises(cs.ConvergenceError, match=r"Director\(linear='dense'\) \(this run's Newton matrix is 'coloured'"):
        cs.simulate(problems.double_four_bar(), 0.01, 2e-3, newton=cs.Newton(max_iterations=1))


def free_ring(n, joint=cs.Revolute, spin=(0.3, -0.2, 1.0), closure=None):
    """n bars (1 m, 1 kg) joined in a regular n-gon in the x–y plane by revolute joints about e3
    (``joint=cs.Spherical``: spherical ones), floating without ground, turning rigidly at ``spin``
    rad/s about the origin; ``closure``: a spring-damper stiffness to join the last bar to the
    first instead of a joint."""
    angles = 2 * np.pi * np.arange(n) / n
    corners = (0.5 / np.sin(np.pi / n)) * np.stack([np.cos(angles), np.sin(angles), np.zeros(n)], axis=1)
    bars = [_bar(f"bar{k}", corners[k], corners[(k + 1) % n], omega=spin, pivot=np.zeros(3)) for k in range(n)]
    axis = {"axis": (0.0, 0.0, 1.0)} if joint is cs.Revolute else {}
    joints = [joint(bars[k], bars[k + 1], at=corners[k + 1], name=f"joint{k}", **axis) for k in range(n - 1)]
    if closure is None:
        joints.append(joint(bars[-1], bars[0], at=corners[0], name="closing", **axis))
    else:
        joints.append(cs.SpringDamper(bars[-1], bars[0], at_a=(0.4, 0.0, 0.0), at_b=(-0.4, 0.0, 0.0),
                                      stiffness=closure, damping=0.0, name="closing"))
    return cs.System([*bars, *joints])


@pytest.mark.parametrize("n, joint, chain, border", [(6, cs.Revolute, 6, 2), (12, cs.Spherical, 12, 3),
                                                    (6, "spring", 5, 23)])
def test_a_free_ring_is_a_bordered_tree_that_solves_as_the_dense_lu(n, joint, chain, border):
    """A ring of free bodies has no tree of nodes, but without its closing joint's rows (the
    border: 3 for a spherical joint, 2 for the revolute one, whose other 3 are redundant in the
    plane and dropped) it is a chain; a ring closed by a spring (a direct coupling of two bodies,
    no multiplier to set aside) is one without a body, its 12 coordinates, 6 rows of its own and
    the 5 of its joint in the border. The blocks and the border's B, C, E, read from the coloured
    derivatives, assemble jacfwd's J, and the Schur complement elimination solves J x = r to
    round-off, with LAPACK's LU and with Gauss–Jordan (``kernel=True``)."""
    closure = 50.0 if joint == "spring" else None
    model, state = _model_and_state(free_ring(n, cs.Revolute if closure else joint, closure=closure))
    samples = sampled_jacobians(model, state)
    assert block_tree(samples, _nodes(model)) is None  # a cycle
    solver = bordered_tree(samples, _nodes(model))
    assert isinstance(solver, BorderedTree) and solver.n_nodes == chain and solver.n_border == border
    assert solver.largest_inverse(len(samples[0])) == max(solver.width, border)
    rng = np.random.default_rng(1)
    size = len(samples[0])
    noise, r, w = 1e-4 * rng.standard_normal(size), rng.standard_normal(size), np.abs(rng.standard_normal(size))
    J, assembled, dx, dx_kernel, abs_times = (np.asarray(a) for a in _bordered(model, state, noise, solver, r, w))
    scale = np.max(np.abs(J))
    np.testing.assert_allclose(assembled, J, rtol=0, atol=1e-13 * scale)
    for x in (dx, dx_kernel):
        backward = np.max(np.abs(J @ x - r)) / (np.max(np.abs(J) @ np.abs(x)) + np.max(np.abs(r)))
        assert backward < 1e-13
    np.testing.assert_allclose(abs_times, np.abs(J) @ w, rtol=1e-13, atol=1e-15 * scale)


@partial(once, static_argnums=(3,))
def _bordered(model, state, noise, solver, r, w):
    """As :func:`_jacobians` for a :class:`BorderedTree`: jacfwd's J, the solver's blocks assembled,
    its solutions of J δx = r (LAPACK, Gauss–Jordan) and |J| w."""
    nc, h = model.n_constraints, 2e-3
    x = initial_guess(model, state, jnp.zeros(nc), h) + noise

    def residual(x):
        return _residual(model, state, 0.1, h, x)

    blocks = solver.jacobian(residual, x)
    kernel = dataclasses.replace(solver, kernel=True)
    return (jax.jacfwd(residual)(x), solver.dense(blocks), solver.solve(solver.factorise(blocks), r),
            kernel.solve(kernel.factorise(blocks), r), solver.abs_times(blocks, w))


def test_a_free_ring_runs_on_its_bordered_tree_as_on_the_dense_lu():
    """Eight bars in a floating ring, spinning: "auto" and "tree" take the bordered tree (factors
    not carried across steps by default, as for loops); its first step is the dense solver's to
    round-off, and a run conserves energy, linear and angular momentum to round-off and keeps the
    constraints."""
    assembly = free_ring(8).assemble()
    model, state = assembly.model, assembly.initial_state
    director = Director().prepare(model, state)
    assert isinstance(director.linear, BorderedTree) and director.linear.n_nodes == 8
    assert Director(linear="tree").prepare(model, state).linear == director.linear
    assert not director._reuses(model)
    one, dense = (cs.simulate(assembly, 2e-3, 2e-3, backend=backend, compile="quick")
                  for backend in (director, Director(linear="dense")))
    assert (one.stats["newton_matrix"], dense.stats["newton_matrix"]) == ("bordered tree", "dense")
    assert np.max(np.abs(one.q[-1] - dense.q[-1])) <= 1e-13 * np.max(np.abs(dense.q))
    assert np.max(np.abs(one.v[-1] - dense.v[-1])) <= 1e-13 * np.max(np.abs(dense.v))
    sol = cs.simulate(assembly, 0.2, 2e-3, backend=director, compile="quick")
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-13 * sol.energy_scale
    for name in ("angular_momentum", "linear_momentum"):
        momentum = getattr(sol, name)
        assert np.max(np.abs(momentum - momentum[0])) <= 1e-13 * sol.momentum_scale(name)
    assert np.max(sol.constraint_residual) <= 1e-13
    assert np.linalg.norm(sol.angular_momentum[0]) > 1.0  # spinning
    assert np.max(np.abs(sol.q[-1] - sol.q[0])) > 0.1  # and turned


def test_bordered_tree_sets_aside_the_rows_or_the_node_that_close_a_cycle():
    """A chain of 5 nodes closed into a ring by a multiplier row joining its ends: that row is the
    border; with every pair of neighbours also coupled directly (springs, or joint rows bilinear
    in two bodies), the cycle's closing coupling is direct: the last node and the row touching it
    are. Either elimination solves J x = r; without a cycle there is
    no bordered tree (:func:`block_tree` serves)."""
    J, node = _kkt_chain(5)
    assert bordered_tree([J], node) is None
    closed = np.pad(J, ((0, 1), (0, 1)))
    closed[-1, [0, 1, 8, 9]] = closed[[0, 1, 8, 9], -1] = [1.0, -0.5, 0.7, 0.3]  # a row on nodes 0 and 4
    sprung = J.copy()
    for a, c in ((0, 1), (1, 2), (2, 3), (3, 4), (0, 4)):  # every pair of neighbours coupled directly too
        qa, qc = [2 * a, 2 * a + 1], [2 * c, 2 * c + 1]
        sprung[np.ix_(qa, qc)] = sprung[np.ix_(qc, qa)] = 0.3
    rng = np.random.default_rng(3)
    for matrix, nodes, border in ((closed, np.append(node, -1), [len(closed) - 1]), (sprung, node, [8, 9, 14])):
        tree = bordered_tree([matrix], nodes)
        assert isinstance(tree, BorderedTree) and list(tree.border) == border
        r = rng.standard_normal(len(matrix))

        @once
        def solve(J, r):
            return tree.solve(tree.factorise(tree.jacobian(lambda x: J @ x, jnp.zeros(len(r)))), r)

        np.testing.assert_allclose(np.asarray(solve(jnp.asarray(matrix), jnp.asarray(r))), np.linalg.solve(matrix, r),
                                   rtol=1e-10)


@pytest.mark.slow
def test_a_free_ring_with_carried_factors_keeps_the_energy():
    """``reuse=True`` carries a bordered tree's factors across steps (turned with the bodies outside
    the solver, as any solver's): the same steps to the Newton tolerance, the exact energy balance."""
    assembly = free_ring(8).assemble()
    backend = Director(reuse=True).prepare(assembly.model, assembly.initial_state)
    assert isinstance(backend.linear, BorderedTree) and backend._reuses(assembly.model)
    sol = cs.simulate(assembly, 0.4, 2e-3, backend=backend, compile="quick")
    dense = cs.simulate(assembly, 0.4, 2e-3, backend=Director(linear="dense"), compile="quick")
    assert np.max(np.abs(sol.q - dense.q)) <= 1e-10 * np.max(np.abs(dense.q))
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-13 * sol.energy_scale
    assert np.max(sol.constraint_residual) <= 1e-13


def test_a_small_ring_keeps_the_coloured_dense_lu():
    """Fewer than BORDERED_MIN_NODES bodies: "auto" keeps the coloured dense LU for a ring of five
    bars, "tree" takes its bordered tree."""
    assert BORDERED_MIN_NODES == 6
    model, state = _model_and_state(free_ring(5, cs.Spherical))
    assert isinstance(Director().prepare(model, state).linear, Coloured)
    assert isinstance(Director(linear="tree").prepare(model, state).linear, BorderedTree)


def test_a_chain_of_loops_closed_through_the_ground_is_eliminated_in_linear_time():
    """The N-four-bar (N loops closed through the ground, 3N redundant rows dropped) is a chain of
    nodes — each loop's closing joint with the two bodies it joins (a crank on its ground pivot
    cannot also hold the rows that close the loop at its tip) — so the Newton matrix is eliminated
    along it: N + 1 nodes of at most 48 unknowns, O(N) per step instead of the dense LU's O(N³).
    The steps are the dense solver's to round-off and conserve energy."""
    system = problems.four_bars(6)
    assembly = system.assemble()
    director = Director().prepare(assembly.model, assembly.initial_state)
    solver = director.linear
    assert isinstance(solver, BlockTree) and solver.n_nodes == 7 and solver.width <= 48 and solver.loops
    assert not director._reuses(assembly.model)  # carried factors drift the energy of loops (Director.reuse)
    sol = cs.simulate(assembly, 0.3, 1e-3, compile="quick")
    dense = cs.simulate(assembly, 0.3, 1e-3, backend=Director(linear="dense"), compile="quick")
    assert np.max(np.abs(sol.q - dense.q)) <= 1e-12
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-13 * sol.energy_scale
    assert np.max(np.abs(sol.constraint_residual)) <= 1e-13


def _model_and_state(system):
    assembly = system.assemble()
    return assembly.model, assembly.initial_state


def _kkt_chain(n, width=2):
    """A chain of n nodes: node k has `width` coordinates and one multiplier row coupling it
    to node k − 1 (and node 0 one to the ground), like a chain of pendulums."""
    size = n * (width + 1)
    J = np.zeros((size, size))
    node = np.full(size, -1)
    rng = np.random.default_rng(0)
    for k in range(n):
        q = np.arange(k * width, (k + 1) * width)
        node[q] = k
        J[np.ix_(q, q)] = np.eye(width) * 2.0
        lam = n * width + k
        touched = [q] if k == 0 else [q, np.arange((k - 1) * width, k * width)]
        for t in touched:
            J[lam, t] = J[t, lam] = rng.standard_normal(width)
    return J, node


def test_block_tree_of_a_chain_needs_derivatives_independent_of_its_length_and_solves():
    """The tree solver's Jacobian takes as many directional derivatives for a chain of 40 nodes as
    for one of 20, fewer than the unknowns of three nodes (what colouring whole nodes would take),
    and its elimination solves J x = r."""
    J, node = _kkt_chain(20)
    tree = block_tree([J], node)
    assert tree.n_nodes == 20 and tree.width == 3
    assert tree.n_colours == block_tree([_kkt_chain(40)[0]], _kkt_chain(40)[1]).n_colours < 3 * tree.width
    r = np.random.default_rng(2).standard_normal(len(J))

    @once
    def solve(J, r):  # the tree's elimination of J δx = r, J from its coloured derivatives
        return tree.solve(tree.factorise(tree.jacobian(lambda x: J @ x, jnp.zeros(len(r)))), r)

    np.testing.assert_allclose(np.asarray(solve(jnp.asarray(J), jnp.asarray(r))), np.linalg.solve(J, r), rtol=1e-10)


def test_block_tree_refuses_cycles_and_rows_over_three_nodes():
    J, node = _kkt_chain(4)
    looped = J.copy()
    looped[-1, :2] = looped[:2, -1] = 1.0  # node 3's row also touches node 0: a loop
    assert block_tree([looped], node) is None
    wide = J.copy()
    wide[-1, 2:4] = wide[2:4, -1] = 1.0  # node 3's row touches nodes 1, 2, 3
    assert block_tree([wide], node) is None
    singular = J.copy()
    singular[np.ix_(range(8), range(8))] = 0.0  # no mass: the nodes' blocks are singular
    assert block_tree([singular], node) is None


def test_an_accepted_chord_leaves_less_than_the_chord_error():
    """400 scalar equations x + c x² = b (|x| ≲ 3e-3) from x0 = b: Newton's correction, then chords
    with its factors until one is accepted. The error the accepted iterate leaves, |r(x)/r'(x)| in
    exact rational arithmetic, must be below CHORD_ERROR (plus the iterate's own rounding), as
    its contract says. The first chord after a Newton correction shrinks by a rate about twice the
    Newton correction's ratio to the error before it; measuring its leftover with that ratio let
    leftovers up to 3.9e-17 through (14 of these 400)."""
    from fractions import Fraction

    from conserve.discrete.newton import CHORD_ERROR, Newton, newton_solve

    rng = np.random.default_rng(0)
    c, b = rng.uniform(-30.0, 30.0, 400), rng.uniform(-3e-3, 3e-3, 400)

    def solve(c, b):
        residual = lambda x: x + c * x * x - b  # noqa: E731
        x, _, converged, _, _ = newton_solve(residual, b[None], Newton(), lambda x: 1.0 + jnp.abs(x), jnp.zeros(1))
        return x[0], converged

    x, converged = map(np.asarray, jax.jit(jax.vmap(solve))(c, b))
    assert converged.all()
    error = [abs((X + C * X * X - B) / (1 + 2 * C * X)) for X, C, B in
             ((Fraction(float(xi)), Fraction(float(ci)), Fraction(float(bi))) for xi, ci, bi in zip(x, c, b))]
    assert np.all(np.array([float(e) for e in error]) <= CHORD_ERROR + np.spacing(np.abs(x)))

def test_reused_factors_give_the_same_steps():
    """Factors carried from step to step (simplified Newton across steps) leave every step
    converged: the same trajectory as fresh Newton matrices to the tolerance, with the exact
    energy balance and constraints."""
    assembly = MODELS["forces"]().assemble()
    reused = cs.simulate(assembly, 0.2, 2e-3, backend=Director(reuse=True))
    fresh = cs.simulate(assembly, 0.2, 2e-3, backend=Director(reuse=False))
    assert np.max(np.abs(reused.q - fresh.q)) <= 1e-10 * np.max(np.abs(fresh.q))
    assert np.max(np.abs(reused.energy_balance_error)) <= 1e-12 * np.max(np.abs(reused.energy.kinetic))
    assert np.max(reused.constraint_residual) <= 1e-10


def test_reused_factors_do_not_drift_the_energy():
    """2·10⁴ steps of a 4-link chain, every step ending on a chord with reused factors: the error a
    chord leaves has one sign step after step, so it must be held below round-off (CHORD_ERROR);
    accepted at 1e-15 it drifts 4.7e-12, measured now 5e-14 (1e-15 without reuse)."""
    sol = cs.simulate(chain(4).assemble(), 20.0, 1e-3, backend=Director(reuse=True))
    E = np.asarray(sol.energy.total)
    assert np.max(np.abs(E - E[0])) <= 2e-13 * abs(E[0])


@pytest.mark.slow
def test_reused_factors_on_a_loop_do_not_drift_the_energy():
    """2·10⁴ steps of the slider-crank (a kinematic loop: the coloured dense LU) with carried
    factors. Its chords' rates alternate (0.013, 0.002, 0.026, …): with the leftover of a chord
    judged by the last rate observed above the tolerance, chords were accepted with errors of one
    sign and the energy balance drifted 4.0e-13 of max |E| (t-statistic 15 over eight blocks); with
    the largest rate from the second chord on, measured 1e-14 at most, no trend."""
    sol = cs.simulate(problems.slider_crank(), 20.0, 1e-3, backend=Director(reuse=True))
    assert len(sol) == 20001
    scale = np.max(np.abs(np.asarray(sol.energy.total)))
    assert np.max(np.abs(np.asarray(sol.energy_balance_error))) <= 5e-14 * scale


@pytest.mark.slow
def test_default_tree_solve_does_not_drift_the_energy():
    """10⁴ steps of the P8 satellite (a hub and its appendages, the tree solver) with the default
    backend, which carries the Newton factors across steps turned with the bodies: no drift beyond
    round-off. With factors carried unturned (and the bound of a solve's own chords) the accepted
    chords left errors of one sign and the energy balance drifted 1.2e-10 relative (6.8e-15 with
    fresh factors)."""
    assembly = problems.thompson_examples()["satellite"][0].assemble()
    backend = Director().prepare(assembly.model, cs.initial_state(assembly))
    assert backend.linear.name == "tree" and backend.init(assembly.model, cs.initial_state(assembly)).memory is not None
    sol = cs.simulate(assembly, 10.0, 1e-3, backend=backend)
    assert np.max(np.abs(sol.energy_balance_error)) <= 1e-13 * np.max(np.abs(sol.energy.total))


@pytest.mark.slow
def test_carried_factors_with_joint_springs_do_not_drift_the_energy():
    """2·10⁴ steps of the P8 rotorcraft with a stiff spring on every flap hinge: joint springs act
    on relative coordinates, so the default backend carries its factors turned with the bodies
    (a central field does not: ``turns_with_the_bodies``, test_reliability), and the energy error
    is a random walk: no significant trend over eight blocks, |E_N − E_0| at round-off."""
    system, _ = problems.thompson_examples()["rotorcraft"]
    flaps = [e for e in system.elements if e.name.startswith("flap")]
    assembly = cs.System(system.elements + [cs.JointSpringDamper(f, stiffness=2e4) for f in flaps]).assemble()
    backend = Director().prepare(assembly.model, cs.initial_state(assembly))
    assert backend.init(assembly.model, cs.initial_state(assembly)).memory is not None
    n = 20_000
    E = cs.simulate(assembly, n * 1e-3, 1e-3, backend=backend).energy.total
    blocks = np.diff(E[:: n // 8])
    assert abs(np.mean(blocks) / (np.std(blocks, ddof=1) / np.sqrt(len(blocks)))) <= 4.0, blocks
    assert abs(E[-1] - E[0]) <= 1e-13 * abs(E[0])


@dataclasses.dataclass(frozen=True)
class CountingDense(Dense):
    """The dense solver, counting the Newton matrices it forms (a host callback per Jacobian)."""

    def jacobian(self, residual, x):
        jax.debug.callback(lambda: JACOBIANS.append(1))
        return super().jacobian(residual, x)


JACOBIANS = []


@pytest.mark.parametrize("dt, most", [(1e-3, 0.15), (2e-3, 0.4)])
def test_carried_factors_need_a_jacobian_only_when_they_stop_contracting(dt, most):
    """The heavy top, its factors carried across steps turned with the body: a Jacobian is formed
    only when they no longer contract the corrections tenfold, not to redo a first chord that
    contracted them but shrank the residual's max-norm less than tenfold, nor to accept a chord at
    the round-off floor. Measured per step at Δt = 1e-3 / 2e-3: 0.008–0.013 / 0.30 (at 1e-3 also
    0.12 after changes that only moved the round-off of this unoptimized code: the run then falls
    into a cycle of a Jacobian every ~9 steps instead of ~80; so since carried chords are judged by
    their largest rate, 0.12 / 0.34, while quick and optimized code take 0.0075 / 0.29 as before);
    0.21 / 0.59 when such a first chord was undone; 0.27 / 0.47 when, no longer undone, a carried
    chord's leftover was estimated from the rates of the round-off noise. Every step converged, energy exact."""
    JACOBIANS.clear()
    top = problems.heavy_top().assemble()
    sol = cs.simulate(top, 400 * dt, dt, backend=Director(linear=CountingDense()))
    assert len(sol) == 401 and sol.newton_iterations.max() < 25
    assert len(JACOBIANS) <= most * 400, len(JACOBIANS) / 400
    E = sol.energy.total
    assert np.max(np.abs(E - E[0])) <= 1e-13 * abs(E[0])


def test_factors_that_no_longer_fit_are_dropped():
    """A free body tumbling at |ω| h = 5 turns its directors ~2 rad per step: the last step's
    factors send the first chord astray (it stalled Newton before the guard); the chord is undone
    and Newton starts from the predictor, so every step converges with energy and momentum exact."""
    omega = np.array([50.0, 300.0, 400.0])
    dt = 5.0 / np.linalg.norm(omega)
    sol = cs.simulate(problems.free_body(angular_velocity=omega), t_end=100 * dt, dt=dt, backend=Director(reuse=True))
    assert len(sol) == 101
    E, J = sol.energy.total, sol.angular_momentum
    assert np.max(np.abs(E - E[0])) <= 1e-10 * abs(E[0])
    assert np.max(np.abs(J - J[0])) <= 1e-10 * np.linalg.norm(J[0])



def test_kernel_inverse_pivots_and_solves_as_lapack():
    """The Gauss–Jordan inverse in XLA operations (Dense(kernel=True): what a small model's run
    compiled quick solves with, conserve.compilation) takes LAPACK's pivots (getrf's row exchanges,
    applied in turn) and is J's inverse, its solutions LAPACK's to round-off, also where the first
    pivot is zero and for a 1 × 1 system."""
    from jax.scipy.linalg import lu_factor, lu_solve

    from conserve.discrete.linear import Dense, kernel_inverse, kernel_inverse_solve

    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 21, 40):
        J = rng.standard_normal((n, n))
        J[0, 0] = 0.0 if n > 1 else 1.5  # row exchanges needed from the first column on
        r = rng.standard_normal(n)
        (B, perm), (lu, piv) = once(kernel_inverse)(J), lu_factor(J)
        order = np.arange(n)
        for i, p in enumerate(np.asarray(piv)):  # getrf's exchanges as a permutation
            order[[i, p]] = order[[p, i]]
        assert np.array_equal(np.asarray(perm), order)  # the same pivots
        inverse = np.empty((n, n))
        inverse[:, np.asarray(perm)] = B  # J⁻¹ r = B r[perm]
        assert np.max(np.abs(inverse @ J - np.eye(n))) <= 1e-15 * n * np.linalg.cond(J)
        x = once(kernel_inverse_solve)((B, perm), r)
        assert np.max(np.abs(x - lu_solve((lu, piv), r))) <= 1e-15 * np.linalg.cond(J) * np.max(np.abs(x))
    assert Dense(kernel=True) != Dense() and hash(Dense(kernel=True)) != hash(Dense())  # distinct programs


@pytest.mark.parametrize("make", [lambda: problems.HeavyTop().system(), lambda: chain(3)], ids=["top", "chain"])
def test_the_newton_matrix_turns_with_the_bodies(make):
    """Objectivity, what carried factors rely on (conserve.discrete.turning): the step's Newton
    matrix at a configuration turned about the fixed point (the origin) by R, with the unknowns
    turned alike, is Q J Qᵀ, Q the turn of every body by R (R on each coordinate block and on each
    point coincidence's rows and multipliers: the joints to the ground and between bodies)."""
    from scipy.spatial.transform import Rotation

    from conserve.discrete.turning import directors, turn
    from conserve.model.assembled import State

    assembly = make().assemble()
    model, state = assembly.model, cs.initial_state(assembly)
    nq, nc, nr, h = model.n_coordinates, model.n_constraints, model.n_rotors, 1e-3
    x = np.asarray(initial_guess(model, state, jnp.zeros(nc), h)) + 1e-3 * np.random.default_rng(1).standard_normal(
        nq + nc + 2 * nr)
    R = Rotation.from_rotvec([0.3, -0.5, 0.8]).as_matrix()
    turned = lambda v: (np.asarray(v).reshape(-1, 3) @ R.T).ravel()  # noqa: E731
    rotated = State(turned(state.q), turned(state.v), state.s, state.p, state.theta, state.q_low)
    Q = turn(model, rotated.q, directors(model, state.q))
    assert np.allclose(np.asarray(Q.rotations)[:nq // 3], R, atol=1e-14)  # every coordinate block turns by R
    jacobian = jax.jit(lambda s, y: jax.jacfwd(lambda z: _residual(model, s, 0.0, h, z))(y))
    J, J_turned = jacobian(state, x), jacobian(rotated, Q.forward(x))
    QJQt = jax.vmap(Q.forward, in_axes=1, out_axes=1)(jax.vmap(Q.forward)(J))  # Q J Qᵀ: Q on columns and rows
    assert np.max(np.abs(J_turned - QJQt)) <= 1e-12 * np.max(np.abs(J))
    assert np.max(np.abs(J_turned - J)) > 1e-3 * np.max(np.abs(J))  # without Q the matrices differ
