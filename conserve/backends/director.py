"""The director backend: the energy-momentum step (:mod:`conserve.discrete.scheme`) solved for
all its unknowns (Δq, λ̃, Δp̃, Δθ) in director coordinates by Newton's method (Gonzalez 1996;
Betsch and Steinmann 2002; hybrid rotors after Becker, Betsch, Franke and Siebert).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation.modes import jit_quick
from ..discrete.linear import BlockTree, BorderedTree, Coloured, Dense, block_tree, bordered_tree, coloured
from ..discrete.newton import Newton, empty_memory, newton_solve
from ..discrete.scheme import advance, equations, predictor, rotor_weights, spin_rates, turn_rates
from ..discrete.turning import directors, turn, turns_with_the_bodies
from ..model.assembled import Model, State
from ..model.parameters import bound
from .base import Carry, StepBackend


@dataclass(frozen=True)
class Director(StepBackend):
    """The energy-momentum step on all its unknowns, ``newton`` its Newton options.

    ``linear`` chooses the Newton matrix's linear algebra (:mod:`conserve.discrete.linear`):
    "auto" (default) eliminates along the bodies' tree when the model's couplings form one of at
    least ``TREE_MIN_NODES`` nodes (chains, trees, and chains of kinematic loops closed through
    the ground such as the N-four-bar, each loop's closing joint and the two bodies it joins one
    node: cost linear in the number of bodies and loops) — or of two or more nodes without loops
    when the factors are carried across steps (``reuse``) —, or along a tree bordered by the rows
    that close loops of free bodies (a floating ring of at least ``BORDERED_MIN_NODES`` bodies:
    :class:`~conserve.discrete.linear.BorderedTree`, the Schur complement of k border unknowns,
    linear in the bodies for a fixed number of loops), and uses a dense LU otherwise: of a
    matrix formed from coloured derivatives (:class:`~conserve.discrete.linear.Coloured`) for
    other loops and small trees, of ``jax.jacfwd``'s
    for fewer than ``STRUCTURE_MIN_NODES`` bodies; "dense" (``jax.jacfwd``) and "tree" force one
    ("tree" takes a bordered tree too, and refuses a model that is neither). The structure is found by
    :meth:`prepare` (``simulate`` calls it); an unprepared backend, as in ``cs.step`` on a traced
    model, solves densely. All give the same steps to the Newton tolerance.

    ``reuse`` carries the Newton matrix's factors from step to step (simplified Newton across
    steps, :func:`~conserve.discrete.newton.newton_solve`), turned with the bodies
    (:mod:`conserve.discrete.turning`: the factors of the last step's Newton matrix J, made when
    the bodies' directors were D_old, serve as Q J Qᵀ with each body's rotation D_n D_oldᵀ since;
    the step equations are objective, so this misses J only by how the motion changed otherwise):
    True, False, or "auto" (default): carried with the plain dense LU (single bodies) and with the
    tree solver of a tree (not of loops, nor a bordered tree), for a model without forces whose
    derivative changes with the configuration (``conserve.discrete.turning.turns_with_the_bodies``:
    no potentials but uniform gravity, no applied loads; a field's force gradient does not turn
    with the bodies, and carried chords then drift the energy). Carried factors pay on single
    bodies and trees; "auto" leaves the coloured dense LU (loops, two or three bodies) and the tree
    solver of loops without: there the bodies turn against each other, a joint's rows can turn with
    only one of them, the chords converge slowly, which pays for some models and not for others,
    and their leftovers can drift the energy (the 4-loop four-bar: −1.6e-14 relative over 10⁵
    steps, against a random walk within 4e-15 with fresh factors) — pass ``reuse=True`` where it
    pays (the P5 crane). A bordered tree's loops are left without likewise; ``reuse=True`` carries
    its factors as any solver's (the turn is applied outside the solver: Q J_old⁻¹ Qᵀ).
    Chords with carried factors are accepted only below
    :data:`~conserve.discrete.newton.CHORD_ERROR_CARRIED`, so the energy balance holds to
    round-off as with fresh factors (measurements: benchmarks/results/defaults.md, sections
    ``Director.reuse`` and ``CHORD_ERROR_CARRIED``).

    Newton starts each step from a guess extrapolated from the last two steps
    (:func:`~conserve.backends.director.initial_guess`, carried as a
    :class:`~conserve.backends.director.Trend`): second order, so most steps need one Jacobian.
    """

    newton: Newton = field(default_factory=Newton)
    linear: object = "auto"
    reuse: object = "auto"
    name = "director"

    def __post_init__(self):
        check_options(self)

    def prepare(self, model: Model, state: State) -> Director:
        if not isinstance(self.linear, str):
            return self
        # a small tree is eliminated along when its factors will be carried (its loops are
        # checked where it is found)
        small_trees = self._reuses(model, loops=False)
        return replace(self, linear=linear_solver(self, model, state, bordered=True, small_trees=small_trees))

    def init(self, model: Model, state: State) -> Carry:
        """The carry at t0: the state, zero multipliers, the :class:`Trend` of the rates at t0
        held constant and, when factors are reused, a Newton memory without any."""
        lam = np.zeros(model.n_constraints, state.q.dtype)  # numpy: no jax dispatch (~50 µs) per run
        trend = _trend_start(model, state)
        if not self._reuses(model):
            return Carry(state, lam, None, trend)
        memory = empty_memory(np.zeros(unknowns(model), state.q.dtype), self._linear, directors(model, state.q))
        return Carry(state, lam, memory, trend)

    def _reuses(self, model: Model, loops=None):
        """Whether factors are carried across steps (``reuse``: "auto" with the plain dense LU and
        with the tree solver of a tree, not with the coloured LU nor a tree of loops, for a model
        whose Newton matrix turns with the bodies, ``conserve.discrete.turning.turns_with_the_bodies``).
        ``loops``: whether the Newton matrix's solver serves loops (None: this backend's ``linear``)."""
        if self.reuse != "auto":
            return self.reuse
        if loops is None:
            loops = isinstance(self.linear, Coloured) or getattr(self.linear, "loops", False)
        return turns_with_the_bodies(model) and not loops

    @property
    def _linear(self):
        return self.linear if isinstance(self.linear, (Dense, BlockTree, BorderedTree)) else Dense()

    def step(self, model: Model, carry: Carry, t, h):
        state, record, memory, trend = step(model, carry.state, carry.multipliers, t, h, self.newton, self._linear,
                                            carry.memory, carry.trend)
        return Carry(state, record.multipliers, memory if carry.memory is not None else None, trend), record

    def unknowns(self, model: Model) -> int:
        return unknowns(model)


def check_options(backend):
    """A clear error for ``linear`` and ``reuse`` options a backend does not know."""
    kind = type(backend).__name__
    solvers = (Dense, BlockTree, BorderedTree)
    if not (backend.linear in ("auto", "dense", "tree") or isinstance(backend.linear, solvers)):
        raise ValueError(f"{kind}: linear must be 'auto', 'dense' or 'tree', got {backend.linear!r}.")
    if backend.reuse not in ("auto", True, False):
        raise ValueError(f"{kind}: reuse must be True, False or 'auto', got {backend.reuse!r}.")


def unknowns(model: Model) -> int:
    """Newton unknowns per step: coordinates, kept multipliers, 2 per hybrid rotor."""
    return model.n_coordinates + model.n_constraints + 2 * model.n_rotors


#: "auto" looks for the Newton matrix's structure from this many nodes (bodies, point masses) on;
#: a single body gains too little to repay finding it, a compilation (measurements:
#: benchmarks/results/defaults.md, section ``STRUCTURE_MIN_NODES``)
STRUCTURE_MIN_NODES = 2

#: "auto" eliminates along the tree from this many nodes on; below, one dense LU of the coloured
#: Jacobian is cheaper — unless the tree has no loops and the director carries its factors across
#: steps (``small_trees`` of :func:`linear_solver`): then from 2 nodes on (measurements:
#: benchmarks/results/defaults.md, section ``TREE_MIN_NODES``)
TREE_MIN_NODES = 4

#: "auto" eliminates along a bordered tree (a ring of free bodies) from this many nodes of the
#: model on (bodies, point masses; those set aside into the border counted); below, the coloured
#: dense LU is as fast or faster (measurements: benchmarks/results/defaults.md, section
#: ``BORDERED_MIN_NODES``)
BORDERED_MIN_NODES = 6


def linear_solver(backend, model: Model, state: State, tree_possible=True, bordered=False, small_trees=False):
    """The solver a backend's ``linear`` option ("auto", "dense" or "tree") chooses for a model:
    the :class:`~conserve.discrete.linear.BlockTree` of the step's Newton matrix if there is one,
    else with ``bordered`` (the director backend's choice; the reduced backend's structured form
    takes none) the :class:`~conserve.discrete.linear.BorderedTree` of its cycles of free bodies
    if their closing rows can be set aside and its elimination passes the condition check (for
    "auto", a tree of at least ``TREE_MIN_NODES`` nodes — with ``small_trees``, the director's
    when it carries the factors across steps, any tree of two or more nodes without loops —, a
    bordered tree of a model of at least ``BORDERED_MIN_NODES``); else, for "auto", the
    :class:`~conserve.discrete.linear.Coloured` dense solver when colouring saves directional
    derivatives (a double pendulum's 29 instead of 44, the P5 crane's 32 instead of 53;
    measurements: benchmarks/results/defaults.md, section ``Director.linear``), and
    :class:`~conserve.discrete.linear.Dense` otherwise;
    "dense" is always :class:`~conserve.discrete.linear.Dense` (``jax.jacfwd``); "tree" without a
    tree or bordered tree (or ``tree_possible`` False) is an error. Found once per model object (``_found``)."""
    n_rigid = model.rigid_frames.shape[0]
    nodes = n_rigid + model.n_coordinates // 3 - 4 * n_rigid  # bodies and point masses
    if backend.linear == "dense" or (backend.linear == "auto" and nodes < STRUCTURE_MIN_NODES):
        return Dense()  # too small to gain from structure: skip finding it (a compilation)
    key = (id(model), backend.linear, tree_possible, bordered, small_trees)
    if key in _found and _found[key][0]() is model:  # found for this model object before (any state)
        _found.move_to_end(key)
        return _found[key][1]
    solver = _found_solver(backend, model, state, tree_possible, bordered, small_trees)
    _found.pop(key, None)  # a stale entry of an earlier model at this address: the new one goes last
    _found[key] = (weakref.ref(model), solver)
    while len(_found) > MAX_FOUND:
        _found.popitem(last=False)
    return solver


#: The solvers :func:`linear_solver` found, per model object (its id, and a weak reference that
#: tells a model from a later one at the same address), at most ``MAX_FOUND``: a model simulated
#: again (a loop of runs from other initial states, a sweep) is not sampled again (sampling is about
#: half of a short run's time; measurements: benchmarks/results/defaults.md, section ``MAX_FOUND``).
#: Its initial state then plays no part, as for the members of an ensemble, which all take the
#: solver found at the first member's.
_found: OrderedDict = OrderedDict()
MAX_FOUND = 32


def _found_solver(backend, model: Model, state: State, tree_possible, bordered=False, small_trees=False):
    """:func:`linear_solver`'s search: the pattern of sampled Newton matrices, its colouring and
    tree (:func:`~conserve.discrete.linear.block_tree`); without one and with ``bordered``, the
    tree bordered by the rows that close cycles of free bodies
    (:func:`~conserve.discrete.linear.bordered_tree`: a Schur complement of k border unknowns,
    O(N k + k³) per step)."""
    jacobians = sampled_jacobians(model, state)
    nq, n = model.n_coordinates, jacobians[0].shape[0]
    # one colouring of the sampled pattern (widened to 3-blocks of coordinates) for either solver
    columns = coloured(jacobians, np.concatenate([np.arange(nq) // 3, nq // 3 + np.arange(n - nq)]))
    node = _nodes(model)
    tree = block_tree(jacobians, node, columns=columns) if tree_possible else None
    if tree is not None and (backend.linear == "tree" or tree.n_nodes >= TREE_MIN_NODES
                             or (small_trees and not tree.loops)):
        return tree
    if tree is None and tree_possible and bordered:  # cycles of free bodies: set their closing rows aside
        tree = bordered_tree(jacobians, node, columns=columns)
        if tree is not None and (backend.linear == "tree" or int(node.max()) + 1 >= BORDERED_MIN_NODES):
            return tree
    if tree is None and backend.linear == "tree":
        loops = "" if bordered else "a loop of free bodies, "
        raise ValueError(f"{type(backend).__name__}(linear='tree'): the model's couplings are not a tree of bodies "
                         f"({loops}an element joining more than two bodies or distant ones, or blocks too "
                         "ill-conditioned to eliminate); use 'auto' or 'dense'.")
    return columns if columns.n_colours < n else Dense()


def _nodes(model: Model):
    """(n,) the node of each Newton unknown for :func:`~conserve.discrete.linear.block_tree`: each
    rigid body's 12 coordinates, each other 3-block (a point mass), each hybrid rotor's two
    unknowns with its master; −1 for multipliers (they join the bodies their rows couple)."""
    nq, nc, nr = model.n_coordinates, model.n_constraints, model.n_rotors
    n_blocks = nq // 3
    block_node = np.full(n_blocks + 4, -1)
    frames = np.asarray(model.rigid_frames)
    block_node[frames.ravel()] = np.repeat(np.arange(len(frames)), 4)
    loose = np.flatnonzero(block_node[:n_blocks] < 0)
    block_node[loose] = len(frames) + np.arange(len(loose))
    rotor_node = block_node[np.asarray(model.rotor_params["frame"])[:, 0]] if nr else np.zeros(0, int)
    return np.concatenate([np.repeat(block_node[:n_blocks], 3), np.full(nc, -1), rotor_node, rotor_node])


def sampled_jacobians(model: Model, state: State):
    """Two dense Newton matrices (n, n) (numpy) of the step at random points near the initial
    step's predictor: their nonzeros give the sparsity pattern the structured solvers use."""
    noise = 1e-3 * np.random.default_rng(0).standard_normal((2, unknowns(model)))
    return list(np.asarray(_sample_jacobians(model, state, noise)))


@jit_quick(mode="unoptimized")
def _sample_jacobians(model, state, noise):
    """(k, n, n) the step's dense Newton matrices for h = 1e-3 s at the initial guess plus each
    row of noise (k, n) (compiled once per model structure)."""
    nc = model.n_constraints
    with bound(model.parameters):  # the laws' Parameters read the model's values, as in the step
        x0 = initial_guess(model, state, jnp.zeros(nc), 1e-3)
        jacobian = jax.jacfwd(lambda x: _residual(model, state, 0.0, 1e-3, x))
        return jax.lax.map(lambda e: jacobian(x0 + e), noise)


def _split(x, nq, nc, nr):
    return x[:nq], x[nq:nq + nc], x[nq + nc:nq + nc + nr], x[nq + nc + nr:]


def _residual(model, state, t, h, x):
    """The step's residual (R1, R2, R3, R4) (n,) at x = (Δq, λ̃, Δp̃, Δθ) (:func:`equations`), as
    one jitted function of everything it reads: traced once per model structure and jax's cache
    shares that trace with every program that evaluates it — the step's, the structure
    detection's (:func:`sampled_jacobians`), the reduced backend's — instead of tracing the
    model's code for each (a 6-axis arm with motors: 0.3 s per trace). t and h are made float64
    arrays so that a Python float and a traced step hit the same trace."""
    return _traced_residual(model, state, jnp.asarray(t, jnp.float64), jnp.asarray(h, jnp.float64), x)


@jax.jit
def _traced_residual(model, state, t, h, x):
    with bound(model.parameters):  # the laws' Parameters read this trace's values of the model's
        nq, nc, nr = model.n_coordinates, model.n_constraints, model.n_rotors
        r = equations(model, state, t, h, *_split(x, nq, nc, nr))
        return jnp.concatenate(r if nr else r[:2])


def weights(state, x):
    """The scale of each unknown x = (Δq, λ̃, Δp̃, Δθ) (:class:`~conserve.discrete.newton.Newton`):
    increments of each 3-block by their own size, ``1 + |Δφ|``, multipliers by the largest."""
    nq, nr = state.q.shape[0], state.p.shape[0]
    dq, lam, dp, dtheta = _split(x, nq, x.shape[0] - nq - 2 * nr, nr)
    w_q = jnp.repeat(1.0 + jnp.max(jnp.abs(dq.reshape(-1, 3)), axis=1), 3)
    w_lam = jnp.full_like(lam, 1.0 + jnp.max(jnp.abs(lam), initial=0.0))
    return jnp.concatenate([w_q, w_lam, *rotor_weights(state, dp, dtheta)])


class Trend(NamedTuple):
    """The last two steps, newest first, from which the next step's initial guess is extrapolated
    (:func:`initial_guess`): each step's unknowns as rates at its midpoint, ``rates`` (2, n) —
    Δq/h, λ̃/h² (= λ/2), Δp̃/h², Δθ/h —, each rigid body's turn rate ``turns`` (2, n_b, 3) in
    rad/s (:func:`~conserve.discrete.scheme.turn_rates`) and the ``steps`` (2,) h in s."""

    rates: jax.Array
    turns: jax.Array
    steps: jax.Array

    @staticmethod
    def constant(rates, turns) -> Trend:
        """The trend of a state with no steps behind it: these rates (n,) and turns (n_b, 3) at
        t_n held constant, so the first guess is the first-order predictor."""
        return Trend(jnp.stack([rates, rates]), jnp.stack([turns, turns]), jnp.ones(2, rates.dtype))

    def then(self, rates, turns, h) -> Trend:
        """The trend after a step h whose unknowns had these rates and turns."""
        return Trend(jnp.stack([rates, self.rates[0]]), jnp.stack([turns, self.turns[0]]),
                     jnp.stack([h, self.steps[0]]))

    def extrapolated(self, h, multipliers: slice):
        """(rates (n,), turns (n_b, 3)) extrapolated linearly to the midpoint of a step h from the
        last two steps' midpoints, at −h1/2 and −h1 − h2/2 from t_n (any step sizes, negative
        ones too, as in a composition); the ``multipliers`` rates are those of the step before
        the last (see :func:`initial_guess`)."""
        (r1, r2), (w1, w2), (h1, h2) = self
        span = 0.5 * (h1 + h2)
        slope = jnp.where(span != 0, 0.5 * (h + h1) / jnp.where(span != 0, span, 1.0), 0.0)
        rates = r1 + slope * (r1 - r2)
        rates = jnp.concatenate([rates[:multipliers.start], r2[multipliers], rates[multipliers.stop:]])
        return rates, w1 + slope * (w1 - w2)


def _sizes(h, nq, nc, nr):
    """(n,) how each unknown scales with the step: Δq and Δθ like h, λ̃ and Δp̃ like h²."""
    return jnp.concatenate([jnp.full(nq, h), jnp.full(nc, h * h), jnp.full(nr, h * h), jnp.full(nr, h)])


def _constant_trend(model: Model, state: State, lam, h) -> Trend:
    """The :class:`Trend` of a state with no steps behind it: its rates held constant —
    velocities v_n, spins ω_n, the multipliers ``lam`` of a step h, no spin momentum change, the
    rotors' relative rates —, from which the first-order predictor is extrapolated."""
    nr = state.p.shape[0]
    rates = jnp.concatenate([state.v, lam / (h * h), jnp.zeros(nr, state.q.dtype),
                             model.rotor_relative_rates(state.q, state.v, state.p)])
    turns = spin_rates(model, state) if model.rigid_frames.shape[0] else jnp.zeros((0, 3), state.q.dtype)
    return Trend.constant(rates, turns)


@jit_quick(mode="unoptimized")
def _trend_start(model: Model, state: State) -> Trend:
    """The :class:`Trend` at t0 (zero multipliers)."""
    return _constant_trend(model, state, jnp.zeros(model.n_constraints, state.q.dtype), 1.0)


def initial_guess(model, state, lam, h, trend=None):
    """Newton's initial guess x0 = (Δq, λ̃, Δp̃, Δθ) for a step h from ``state``.

    Without a :class:`Trend` (that of constant rates): the first-order predictor
    (:func:`~conserve.discrete.scheme.predictor`, h v_n with the directors turned by cay(h ω_n)),
    the last step's multipliers ``lam`` and the rotors' spin at their relative rates. Its error is
    O(h²) (a heavy top at Δt = 1e-3: ~5e-4 in the directors), and most steps then need a second
    Jacobian.

    With a trend: the rates linearly extrapolated to this step's midpoint from the last two steps'
    midpoints (:meth:`Trend.extrapolated`), the directors turned by cay(h ω) with ω so
    extrapolated: an error O(h³) (~1e-5 on that top), after which Newton's chords converge with
    the first Jacobian (measurements: benchmarks/results/defaults.md, section ``initial_guess``).
    A body that turns more than a radian per step (h|ω_n| > 1) keeps cay(h ω_n): its motion is
    not resolved in time, and a fast tumble's ω changes too much from step to step to
    extrapolate. The multipliers alternate from step to step (the index-3 midpoint rule's
    parasitic mode, that of its node velocities) by more than they change over two steps: they are
    guessed as those of the step before the last (a linear extrapolation of each parity,
    λ̃_{n−2} + λ̃_{n−1} − λ̃_{n−3}, is closer on smooth runs but makes Newton diverge after a few
    coarse steps).

    The guess moves only Newton's path: every step is solved to the same tolerance."""
    nq, nc, nr = state.q.shape[0], lam.shape[0], state.p.shape[0]
    trend = _constant_trend(model, state, lam, h) if trend is None else trend
    rates, turns = trend.extrapolated(h, slice(nq, nq + nc))
    if model.rigid_frames.shape[0]:  # a body that turns more than a radian per step: its spin now
        omega = spin_rates(model, state)
        turns = jnp.where(jnp.abs(h) * jnp.linalg.norm(omega, axis=1, keepdims=True) <= 1.0, turns, omega)
    return jnp.concatenate([predictor(model, state, h, rates[:nq], turns), (_sizes(h, nq, nc, nr) * rates)[nq:]])


def step(model: Model, state: State, lam, t, h, newton, linear=Dense(), memory=None, trend=None):
    """One energy-momentum step t_n -> t_{n+1} = t_n + h (:mod:`conserve.discrete.scheme`), solved
    for x = (Δq, λ̃, Δp̃, Δθ) by Newton's method with each unknown scaled by its own size.

    Parameters
    ----------
    state : State at t_n
    lam : (n_c,) scaled multipliers of the previous step (Newton's initial guess)
    t : float, t_n in s
    h : float, step in s
    newton : :class:`conserve.Newton`
    linear : the Newton matrix's linear algebra (:mod:`conserve.discrete.linear`)
    memory : :class:`~conserve.discrete.newton.NewtonMemory` of the last step (its factors,
        turned with the bodies since they were made, :mod:`conserve.discrete.turning`, start
        Newton: simplified Newton across steps), or None
    trend : :class:`Trend` of the last steps (Newton's initial guess extrapolates it), or None

    Returns
    -------
    state : State at t_{n+1}
    record : :class:`~conserve.discrete.scheme.StepRecord` (with the step's scaled multipliers)
    memory : the Newton memory for the next step
    trend : the Trend with this step (None if ``trend`` is None)
    """
    q0 = state.q
    nq, nc, nr = q0.shape[0], lam.shape[0], state.p.shape[0]
    split = lambda x: _split(x, nq, nc, nr)  # noqa: E731
    blocks = (lambda r: jnp.concatenate(r)) if nr else (lambda r: jnp.concatenate(r[:2]))  # noqa: E731

    def residual(x):
        return _residual(model, state, t, h, x)

    x0 = initial_guess(model, state, lam, h, trend)
    size = blocks((jnp.zeros(nq), model.constraint_magnitudes(q0, state.theta, state.s, t + h), jnp.zeros(nr),
                   jnp.zeros(nr)))
    bodies_turn = None if memory is None or memory.reference is None else turn(model, q0, memory.reference)
    x, iterations, converged, history, memory = newton_solve(residual, x0, newton, partial(weights, state), size,
                                                             linear, memory, turn=bodies_turn)
    dq, lam1, dp, dtheta = split(x)
    if trend is not None:
        turns = turn_rates(model, q0, dq, h) if model.rigid_frames.shape[0] else trend.turns[0]
        trend = trend.then(x / _sizes(h, nq, nc, nr), turns, h)
    return (*advance(model, state, t, h, dq, dp, dtheta, lam1, (iterations, converged, history)), memory, trend)
