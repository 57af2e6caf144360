"""The reduced backend (Thompson's null-space form, Thompson §III): the tree's null-space map H2
annihilates the tree constraints' Jacobian at any configuration (also off the constraints, as at
a step's midpoint), the finite update keeps them exactly, and the reduced step reproduces the
director step's trajectory and multipliers with the same conservation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import once
from hypothesis import given, settings
from hypothesis import strategies as st
from test_joints import KINDS, directions, make_joint, rotations, vectors
from test_linear import MODELS as LINEAR_MODELS

import conserve as cs
from conserve import problems
from conserve.backends import loops
from conserve.backends.null_space import configure, increment_rates, increments_and_inverse, null_space
from conserve.backends.null_space import increments as tree_increments
from conserve.backends.reduced import Reduced
from conserve.discrete.linear import BlockTree, Coloured
from conserve.run.chunks import kernel_code

TREE_KINDS = ["Spherical", "Revolute", "Universal", "Cylindrical", "Prismatic", "Planar", "Fixed"]
increments = st.lists(st.floats(-0.5, 0.5), min_size=12, max_size=12).map(np.array)


@pytest.mark.parametrize("kind", TREE_KINDS)
@pytest.mark.parametrize("child_is_a", [False, True])
@settings(max_examples=10, deadline=None)
@given(Ra=rotations, Rb=rotations, pa=vectors, pb=vectors, x=vectors, n=directions, r=directions,
       u0=increments, u1=increments)
def test_null_space_of_every_tree_joint(kind, child_is_a, Ra, Rb, pa, pb, x, n, r, u0, u1):
    """G_tree(q) H2(q) = 0 and rank H2 = DOF at the midpoint of two random tree configurations
    (directors not orthonormal there), for the joint in either orientation; F keeps g_tree = 0."""
    if abs(r @ n) > 0.95:
        r = np.cross(n, [1.0, 0.0, 0.0]) + np.cross(n, [0.0, 1.0, 0.0])
    u, w = n, np.cross(n, r) / np.linalg.norm(np.cross(n, r))
    root = cs.RigidBody("root", 1.0, (1.0, 1.2, 1.5), position=pa, orientation=Ra)
    other = cs.RigidBody("other", 2.0, (0.5, 0.7, 0.9), position=pb, orientation=Rb)
    joint = make_joint(kind, other, root, x, n, u, w) if child_is_a else make_joint(kind, root, other, x, n, u, w)
    assembly = cs.System([root, other, joint]).assemble()
    model, state = assembly.model, assembly.initial_state
    tree = model.tree
    assert not tree.cut_rows and tree.links[1].parent_is_a == (not child_is_a)
    assert tree.n_dof == assembly.degrees_of_freedom == 12 - joint.n_constraints
    u0, u1 = jnp.asarray(u0[:tree.n_dof]), jnp.asarray(u1[:tree.n_dof])
    gaps, G, H2, round_trip, increments_gap = _tree_maps(model, state, u0, u1)
    assert np.max(gaps) <= 1e-13  # the finite update keeps every tree constraint
    np.testing.assert_allclose(G @ H2, 0.0, atol=1e-13)
    assert np.linalg.matrix_rank(H2, tol=1e-9) == tree.n_dof
    # the tangent of the update is inverted link by link: δu = F_u⁻¹ (F_u δu), with the increments
    # formed from the same link maps
    assert np.max(np.abs(round_trip - (u1 - u0))) <= 1e-12 and increments_gap <= 1e-15


@once
def _tree_maps(model, state, u0, u1):
    """At q_a = F(q*, u0) and q_b = F(q*, u1) (q* the state's configuration): the tree constraints'
    max |g| at both, G and H2 at their midpoint, F_u⁻¹ F_u δu for δu = u1 − u0 at u0, and max |Δq of
    increments_and_inverse − Δq of increments| at u0 (compiled once per tree structure)."""
    tree, Q0 = model.tree, model.blocks(state.q)
    qa, qb = configure(tree, Q0, u0), configure(tree, Q0, u1)
    gaps = jnp.stack([jnp.max(jnp.abs(model.constraints(q, state.theta, state.s))) for q in (qa, qb)])
    qm = 0.5 * (qa + qb)
    G = jax.jacfwd(lambda q: model.constraints(q, state.theta, state.s))(qm)
    tangent = jax.jvp(lambda u: configure(tree, Q0, u), (u0,), (u1 - u0,))[1]
    dq, inverse = increments_and_inverse(tree, Q0, u0)
    return (gaps, G, null_space(tree, model.blocks(qm)), increment_rates(tree, inverse, tangent),
            jnp.max(jnp.abs(dq - tree_increments(tree, Q0, u0))))


def test_finite_update_closes_round_off_gaps_down_a_long_chain():
    """A 40-link chain whose directors are off orthonormality and whose joints are open by 1e-9
    (round-off a long run leaves, magnified): one update F(q_n, u) puts every link exactly on its
    parent's new pose, so all constraints hold to round-off at the far end too (a parent's error
    reaching its child doubled grew ×3 per link: a 32-link chain left its constraints by 1e-7 in
    8 steps)."""
    n, length = 40, 0.3
    axis = np.array([np.sin(0.4), 0.0, -np.cos(0.4)])
    bars = [cs.RigidBody(f"bar{k}", 1.0, (1e-3, 0.01, 0.01), position=(k + 0.5) * length * axis,
                         euler=("y", np.pi / 2 - 0.4)) for k in range(n)]
    joints = [cs.Spherical(cs.ground if k == 0 else bars[k - 1], bars[k], at=k * length * axis) for k in range(n)]
    assembly = cs.System([*bars, *joints]).assemble()
    model, state = assembly.model, assembly.initial_state
    rng = np.random.default_rng(3)
    Q = np.asarray(state.q).reshape(n, 4, 3)
    S = rng.normal(size=(n, 3, 3)) * 1e-9
    Q = np.concatenate([Q[:, :1] + 1e-9 * rng.normal(size=(n, 1, 3)),
                        np.einsum("nij,njk->nik", np.eye(3) + S + np.swapaxes(S, 1, 2), Q[:, 1:])], axis=1)
    u = jnp.asarray(rng.normal(size=model.tree.n_dof) * 0.05)
    gap = once(lambda Q, u: jnp.max(jnp.abs(model.constraints(configure(model.tree, model.blocks(Q), u),
                                                              state.theta, state.s))))(jnp.asarray(Q.ravel()), u)
    assert gap <= 1e-13


@pytest.mark.parametrize("kind", sorted(set(KINDS) - set(TREE_KINDS)))
def test_joints_without_a_relative_motion_are_cut(kind):
    n = np.array([0.0, 0.0, 1.0])
    a = cs.RigidBody("a", 1.0, (1.0, 1.2, 1.5))
    b = cs.RigidBody("b", 2.0, (0.5, 0.7, 0.9), position=(1.0, 0.5, 0.2))
    joint = make_joint(kind, a, b, np.zeros(3), n, n, np.array([1.0, 0.0, 0.0]))
    tree = cs.System([a, b, joint]).assemble().model.tree
    assert tree.n_dof == 12 and len(tree.loop_rows) == joint.n_constraints and not tree.cut_rows  # two free roots


SYSTEMS = {
    "heavy top": (lambda: problems.HeavyTop().system(), 1.0, 2e-3),
    "double pendulum": (problems.double_pendulum, 1.0, 2e-3),
    "P3a hybrid wheels": (lambda: problems.spacecraft("hybrid"), 2.0, 1e-2),
    "P3a body wheels": (lambda: problems.spacecraft("body"), 1.0, 1e-2),
    "crane, hybrid winch (rope cut)": (lambda: problems.RotaryCrane().system("hybrid"), 1.0, 1e-2),
    "crane, body winch (coordinate relation cut)": (lambda: problems.RotaryCrane().system("body"), 1.0, 1e-2),
    "double four-bar (loops, redundant rows)": (problems.double_four_bar, 0.5, 1e-3),
}


SLOW = {"P3a body wheels", "crane, hybrid winch (rope cut)", "crane, body winch (coordinate relation cut)"}


def test_recovered_multipliers_are_read_saved_and_loaded_as_the_directors(tmp_path):
    """The multipliers the reduced backend eliminates are recovered from the nodes when first read
    (a run whose multipliers nobody reads does not pay for them), with the laws reading the model's
    Parameter values as in the step: read, or saved and loaded, they are the director backend's."""
    gain = cs.Parameter("gain", 0.0)
    top = problems.HeavyTop().system()
    push = cs.Force(top.parts()[0], force=lambda t, state: gain.value * jnp.array([1.0, 0.0, 0.0]), name="push")
    assembly = cs.System([*top.elements, push]).assemble()
    assembly = dataclasses.replace(assembly, model=dataclasses.replace(assembly.model, parameters={"gain": 5.0}))
    director = cs.simulate(assembly, 0.05, 2e-3)
    for read_first in (True, False):
        reduced = cs.simulate(assembly, 0.05, 2e-3, backend="reduced")
        early = [reduced.multipliers] if read_first else []
        reduced.save(tmp_path / "reduced.npz")
        back = cs.Solution.load(tmp_path / "reduced.npz")
        for lam in (*early, reduced.multipliers, back.multipliers):
            assert np.max(np.abs(lam - director.multipliers)) <= 1e-7 * np.max(np.abs(director.multipliers))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in SYSTEMS])
def test_reduced_and_director_steps_agree(name):
    make, t_end, dt = SYSTEMS[name]
    assembly = make().assemble()
    director = cs.simulate(assembly, t_end, dt)
    reduced = cs.simulate(assembly, t_end, dt, backend="reduced")
    scale = np.max(np.abs(director.q))
    assert np.max(np.abs(reduced.q - director.q)) <= 1e-8 * scale
    assert np.max(np.abs(reduced.multipliers - director.multipliers)) <= 1e-7 * np.max(np.abs(director.multipliers))
    E0 = abs(reduced.energy.total[0])
    assert np.max(np.abs(reduced.energy_balance_error)) <= 1e-10 * E0
    J = reduced.angular_momentum
    if name.startswith("P3a"):  # torque-free: all of J is conserved
        assert np.max(np.abs(J - J[0])) <= 1e-10 * np.max(np.abs(J[0]))
    assert np.max(reduced.constraint_residual) <= 1e-10
    model = assembly.model
    tree, n_r = model.tree, model.n_rotors
    n_l, n_c = len(tree.loop_rows), len(tree.cut_rows)
    if isinstance(Reduced().prepare(model, assembly.initial_state).linear, (BlockTree, Coloured)):
        # the structured form: tree coordinates + every multiplier + 2 per rotor
        assert reduced.stats["unknowns"] == tree.n_dof + model.n_constraints + 2 * n_r
    else:  # the dense form: + loop equations + 2 per cut row (its equation and multiplier) + 1 per rotor
        assert reduced.stats["unknowns"] == assembly.degrees_of_freedom + n_l + 2 * n_c + n_r
    assert reduced.stats["unknowns"] < director.stats["unknowns"]


@pytest.mark.parametrize("name", ["chain", "forces"])
def test_structured_reduced_step_is_the_director_step(name):
    """The structured form (the director's Newton matrix eliminated along the bodies' tree, its
    corrections mapped to minimal increments link by link) solves the director step's equations in
    minimal coordinates: on a 5-link chain (compiled "optimized": the tree's blocks inverted by
    Gauss–Jordan in its one-kernel Newton loop), and on a hinged pair with joint forces, a hybrid
    rotor and a point mass on a user constraint, the director's trajectory and multipliers (all
    solved in the step), the exact energy balance and every constraint to round-off."""
    assembly = LINEAR_MODELS[name]().assemble()
    model = assembly.model
    backend = Reduced(linear="tree").prepare(model, assembly.initial_state)
    assert isinstance(backend.linear, BlockTree)
    compile = "optimized" if name == "chain" else "auto"
    assert kernel_code(backend, model, compile)[0].linear.kernel == (name == "chain")
    reduced = cs.simulate(assembly, 0.1, 2e-3, backend=backend, compile=compile)
    director = cs.simulate(assembly, 0.1, 2e-3)
    assert np.max(np.abs(reduced.q - director.q)) <= 1e-10 * np.max(np.abs(director.q))
    assert np.max(np.abs(reduced.multipliers - director.multipliers)) <= 1e-7 * np.max(np.abs(director.multipliers))
    assert np.max(np.abs(reduced.energy_balance_error)) <= 1e-12 * np.max(np.abs(reduced.energy.kinetic))
    assert np.max(reduced.constraint_residual) <= 1e-10
    assert reduced.stats["unknowns"] == model.tree.n_dof + model.n_constraints + 2 * model.n_rotors


def test_loop_coordinates_stay_meaningful():
    """Pivoted QR (Führer–Wallrapp): N spans ker C with the identity on the independent
    coordinates, and a coordinate the loop does not involve is never made dependent."""
    rng = np.random.default_rng(0)
    for n_l, n_t in [(1, 3), (3, 6), (5, 9)]:
        C = rng.normal(size=(n_l, n_t))
        C[:, -1] = 0.0  # e.g. a pendulum hanging off the loop
        r = rng.normal(size=n_t)
        independent, N, projected = _loop_coordinates(jnp.asarray(C), jnp.asarray(r))
        np.testing.assert_allclose(C @ N, 0.0, atol=1e-13)
        np.testing.assert_array_equal(N[np.asarray(independent)], np.eye(n_t - n_l))
        assert n_t - 1 in np.asarray(independent)
        np.testing.assert_allclose(projected, N.T @ r, atol=1e-13)


@once
def _loop_coordinates(C, r):
    """(the independent coordinates, N, Nᵀ r by loops.project) of the loop matrix C."""
    dependent, independent = loops.partition(C)
    return independent, loops.null_basis(C, dependent, independent), loops.project(C, r, dependent, independent)


def test_slider_crank_through_its_dead_centres():
    """A spatial slider-crank (1 DOF, tree 6 + loop 5) turned through a full crank revolution:
    the slider's dead centres make any fixed choice of loop coordinate singular somewhere (the
    crank angle cannot be solved from the slider travel there), so the pivoting must switch; the
    reduced step's dense form (loop coordinates; "auto" takes the structured form for loops) still
    reproduces the director step with 6 instead of 71 unknowns."""
    assembly = problems.slider_crank(crank_speed=5.0).assemble()
    model, tree = assembly.model, assembly.model.tree
    director = cs.simulate(assembly, 1.4, 2e-3)
    reduced = cs.simulate(assembly, 1.4, 2e-3, backend=Reduced(linear="dense"))
    assert reduced.stats["unknowns"] == tree.n_dof == 6 and len(tree.loop_rows) == 5
    assert np.max(np.abs(reduced.q - director.q)) <= 1e-8 * np.max(np.abs(director.q))
    assert np.max(np.abs(reduced.energy_balance_error)) <= 1e-10 * abs(reduced.energy.total[0])
    assert np.max(reduced.constraint_residual) <= 1e-10

    loop = np.asarray(tree.loop_rows, np.int64)

    @once
    def independent(q):  # the first independent loop coordinate at q
        G = jax.jacfwd(lambda x: model.constraints(x, reduced.theta[0], reduced.s[0])[loop])(q)
        return loops.partition(G @ null_space(tree, model.blocks(q)))[1][0]

    assert len({int(independent(jnp.asarray(q))) for q in reduced.q[::25]}) >= 2


@pytest.mark.parametrize("winch", ["hybrid", "body"])
def test_ropes_and_coordinate_relations_keep_their_multipliers(winch):
    """Rows that read spin angles or joint coordinates (a rope on a winch, the body winch's
    coordinate relation) cannot be eliminated by loop coordinates of q: they stay cut rows."""
    assembly = problems.RotaryCrane().system(winch).assemble()
    layout, model = assembly.layout, assembly.model
    owners = lambda rows: {layout.constraint_rows[model.constraint_keep[i]][0] for i in rows}  # noqa: E731
    assert "rope" in owners(model.tree.cut_rows) and not model.tree.loop_rows


def _block_t_statistic(E, blocks=8):
    """The t-statistic of the mean energy increment per step over ``blocks`` equal blocks of the
    run: |t| ≲ 2 for a random walk, ≫ 2 (and growing like √N) for a drift."""
    means = np.array([d.mean() for d in np.array_split(np.diff(E), blocks)])
    return means.mean() / (means.std(ddof=1) / np.sqrt(blocks))


@pytest.mark.slow
def test_one_degree_of_freedom_pendulum_energy_is_a_random_walk():
    """A pendulum (m = 2 kg, J = (0.1, 0.1, 0.05) kg m², centre 0.5 m below a revolute pivot, from
    rest at 2 rad), 10⁵ steps of Δt = 0.01 in the reduced backend's dense form at the default
    tolerance: its single unknown carries the whole step, and every bias of the step's last digits
    shows. The energy error stays a random walk, ~ε|E|√N with no trend (measured: at most 4.7e-13 J,
    t = −0.5); before, it fell 4.3e-15 J per step, 4.3e-10 J in all (t = −150 over 2·10⁴ steps):
    chords accepted after the first Newton correction with a leftover underestimated 4× and bounded
    by the director's 1e-17, Δq formed from the rounded u, and the node velocity rounded twice."""
    pendulum = problems.ThompsonPendulum(m=2.0, inertia=(0.1, 0.1, 0.05), beta0=2.0, spring=False, g=9.81)
    n = 100_000
    sol = cs.simulate(pendulum.system(), n * 0.01, 0.01, backend="reduced")
    E = np.asarray(sol.energy.total)
    assert np.max(np.abs(E - E[0])) <= 10 * np.finfo(float).eps * abs(E[0]) * np.sqrt(n)
    assert abs(_block_t_statistic(E)) <= 4.0
