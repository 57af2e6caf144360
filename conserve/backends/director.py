"""The director backend: the energy-momentum step (:mod:`conserve.discrete.scheme`) solved for
all its unknowns (Δq, λ̃, Δp̃, Δθ) in director coordinates by Newton's method (Gonzalez 1996;
Betsch and Steinmann 2002; hybrid rotors after Becker, Betsch, Franke and Siebert).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation import jit_quick
from ..discrete.linear import BlockTree, Dense, block_tree, coloured
from ..discrete.newton import Newton, empty_memory, newton_solve
from ..discrete.scheme import advance, equations, predictor, rotor_weights
from ..model.assembled import Model, State
from .base import Carry, StepBackend


@dataclass(frozen=True)
class Director(StepBackend):
    """The energy-momentum step on all its unknowns, ``newton`` its Newton options.

    ``linear`` chooses the Newton matrix's linear algebra (:mod:`conserve.discrete.linear`):
    "auto" (default) eliminates along the bodies' tree when the model's couplings form one
    (chains, trees: cost linear in the number of bodies) and uses a dense LU otherwise: of a
    matrix formed from coloured derivatives (:class:`~conserve.discrete.linear.Coloured`) for
    loops, of ``jax.jacfwd``'s for fewer than ``TREE_MIN_NODES`` bodies; "dense" (``jax.jacfwd``)
    and "tree" force one ("tree" refuses a model that is not a tree). The structure is found by
    :meth:`prepare` (``simulate`` calls it); an unprepared backend, as in ``cs.step`` on a traced
    model, solves densely. All give the same steps to the Newton tolerance.

    ``reuse`` carries the Newton matrix's factors from step to step (simplified Newton across
    steps, :func:`~conserve.discrete.newton.newton_solve`): True, False, or "auto" (default) for
    the tree solver only, where forming and eliminating the matrix dominates a step (a 32-link
    chain: 1.4 → 0.73 ms per step); with a dense matrix of a few dozen unknowns it saves little.
    Chords with reused factors are accepted only when their error estimate is below round-off
    (:data:`~conserve.discrete.newton.CHORD_ERROR`); what they leave still has one sign, a
    relative energy drift of ~3e-18 per step (a 4-link chain over 4·10⁴ steps: 1.2e-13; 1.5e-15
    without reuse). For runs of many millions of steps, ``reuse=False``.
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
        return replace(self, linear=linear_solver(self, model, state))

    def init(self, model: Model, state: State) -> Carry:
        """The carry at t0: the state, zero multipliers and, when factors are reused, a Newton
        memory without any."""
        lam = jnp.zeros(model.n_constraints, state.q.dtype)
        if not (self.reuse is True or (self.reuse == "auto" and isinstance(self.linear, BlockTree))):
            return Carry(state, lam)
        nq, nc, nr = model.n_coordinates, model.n_constraints, model.n_rotors
        residual = lambda x: _residual(model, state, jnp.zeros((), state.q.dtype), 1.0, x, nq, nc, nr)  # noqa: E731
        return Carry(state, lam, empty_memory(residual, jnp.zeros(unknowns(model), state.q.dtype), self._linear))

    @property
    def _linear(self):
        return self.linear if isinstance(self.linear, (Dense, BlockTree)) else Dense()

    def step(self, model: Model, carry: Carry, t, h):
        state, record, memory = step(model, carry.state, carry.multipliers, t, h, self.newton, self._linear,
                                     carry.memory)
        return Carry(state, record.multipliers, memory if carry.memory is not None else None), record

    def unknowns(self, model: Model) -> int:
        return unknowns(model)


def check_options(backend):
    """A clear error for ``linear`` and ``reuse`` options a backend does not know."""
    kind = type(backend).__name__
    if not (backend.linear in ("auto", "dense", "tree") or isinstance(backend.linear, (Dense, BlockTree))):
        raise ValueError(f"{kind}: linear must be 'auto', 'dense' or 'tree', got {backend.linear!r}.")
    if backend.reuse not in ("auto", True, False):
        raise ValueError(f"{kind}: reuse must be True, False or 'auto', got {backend.reuse!r}.")


def unknowns(model: Model) -> int:
    """Newton unknowns per step: coordinates, kept multipliers, 2 per hybrid rotor."""
    return model.n_coordinates + model.n_constraints + 2 * model.n_rotors


#: "auto" eliminates along the tree from this many nodes (bodies) on; below, one dense LU is cheaper.
TREE_MIN_NODES = 3


def linear_solver(backend, model: Model, state: State, tree_possible=True):
    """The solver a backend's ``linear`` option ("auto", "dense" or "tree") chooses for a model:
    the :class:`~conserve.discrete.linear.BlockTree` of the step's Newton matrix if there is one
    (and, for "auto", at least ``TREE_MIN_NODES`` nodes); else, for "auto", the
    :class:`~conserve.discrete.linear.Coloured` dense solver when colouring at least halves the
    Jacobian's directional derivatives, and :class:`~conserve.discrete.linear.Dense` otherwise;
    "dense" is always :class:`~conserve.discrete.linear.Dense` (``jax.jacfwd``); "tree" without a
    tree (or ``tree_possible`` False) is an error."""
    n_rigid = model.rigid_frames.shape[0]
    nodes = n_rigid + model.n_coordinates // 3 - 4 * n_rigid  # bodies and point masses
    if backend.linear == "dense" or (backend.linear == "auto" and nodes < TREE_MIN_NODES):
        return Dense()  # too small to gain from structure: skip finding it (a compilation)
    jacobians = sampled_jacobians(model, state)
    tree = block_tree(jacobians, _nodes(model)) if tree_possible else None
    if tree is None and backend.linear == "tree":
        raise ValueError(f"{type(backend).__name__}(linear='tree'): the model's couplings are not a tree of bodies "
                         "(a kinematic loop, or an element joining more than two bodies or distant ones); use "
                         "'auto' or 'dense'.")
    if tree is not None and (backend.linear == "tree" or tree.n_nodes >= TREE_MIN_NODES):
        return tree
    nq, n = model.n_coordinates, jacobians[0].shape[0]
    solver = coloured(jacobians, np.concatenate([np.arange(nq) // 3, nq // 3 + np.arange(n - nq)]))
    return solver if 2 * solver.n_colours <= n else Dense()


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


@jit_quick(mode="once")
def _sample_jacobians(model, state, noise):
    """(k, n, n) the step's dense Newton matrices for h = 1e-3 s at the initial guess plus each
    row of noise (k, n) (compiled once per model structure)."""
    nq, nc, nr = model.n_coordinates, model.n_constraints, model.n_rotors
    x0 = _initial_guess(model, state, jnp.zeros(nc), 1e-3)
    jacobian = jax.jacfwd(lambda x: _residual(model, state, jnp.float64(0.0), 1e-3, x, nq, nc, nr))
    return jax.lax.map(lambda e: jacobian(x0 + e), noise)


def _split(x, nq, nc, nr):
    return x[:nq], x[nq:nq + nc], x[nq + nc:nq + nc + nr], x[nq + nc + nr:]


def _residual(model, state, t, h, x, nq, nc, nr):
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


def _initial_guess(model, state, lam, h):
    rates = model.rotor_relative_rates(state.q, state.v, state.p)
    return jnp.concatenate([predictor(model, state, h), lam, jnp.zeros(state.p.shape[0]), h * rates])


def step(model: Model, state: State, lam, t, h, newton, linear=Dense(), memory=None):
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
    memory : :class:`~conserve.discrete.newton.NewtonMemory` of the last step (its factors start
        Newton: simplified Newton across steps), or None

    Returns
    -------
    state : State at t_{n+1}
    record : :class:`~conserve.discrete.scheme.StepRecord` (with the step's scaled multipliers)
    memory : the Newton memory for the next step
    """
    q0 = state.q
    nq, nc, nr = q0.shape[0], lam.shape[0], state.p.shape[0]
    split = lambda x: _split(x, nq, nc, nr)  # noqa: E731
    blocks = (lambda r: jnp.concatenate(r)) if nr else (lambda r: jnp.concatenate(r[:2]))  # noqa: E731

    def residual(x):
        return _residual(model, state, t, h, x, nq, nc, nr)

    x0 = _initial_guess(model, state, lam, h)
    size = blocks((jnp.zeros(nq), model.constraint_magnitudes(q0, state.theta, state.s, t + h), jnp.zeros(nr),
                   jnp.zeros(nr)))
    x, iterations, converged, history, memory = newton_solve(residual, x0, newton, partial(weights, state), size,
                                                             linear, memory)
    dq, lam1, dp, dtheta = split(x)
    return (*advance(model, state, t, h, dq, dp, dtheta, lam1, (iterations, converged, history)), memory)
