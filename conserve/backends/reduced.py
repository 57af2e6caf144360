"""Thompson's reduced form (Thompson §III, eqs. (15)–(18)) as an energy-momentum backend, a
discrete null-space method (Betsch and Leyendecker 2006): the director step of :mod:`.director`
projected onto the null space of the kinematic tree's constraints.

Unknowns x = (u, λ̃_c, Δp̃, Δθ): the minimal increments u (n_t,) of the tree
(:mod:`conserve.model.tree`), the scaled multipliers of the cut rows only (ropes, coordinate
relations, user constraints) and the hybrid rotors' increments. With q_{n+1} = F(q_n, u) every
tree constraint holds exactly; loops closed by cut joints, g_l(q) = 0, are kept as equations and
their forces eliminated by the loop coordinates of :mod:`conserve.backends.loops` (Führer–Wallrapp:
C̄ = Ḡ_l H2(q_{n+½}), dependent/independent split by pivoted QR of C at q_n, N a basis of ker C̄).
The equations are

    Nᵀ H2(q_{n+½})ᵀ R1 = 0,   g_l(q_{n+1}) = 0,   R2_c = 0,   R3 = 0,   R4 = 0

(R1…R4 of :func:`.director.step`). H2(q_{n+½})ᵀ annihilates Ḡ_treeᵀ λ̃_tree, since the columns
of H2(q_{n+½}) span exactly the null space of Ḡ_tree = G_tree(q_{n+½}) (the constraints are
quadratic), and Nᵀ then annihilates H2ᵀ Ḡ_lᵀ λ̃_l = C̄ᵀ λ̃_l. A solution of these equations is
therefore one of the director step, and vice versa: the same discrete trajectory, with the same
exact energy balance and momentum maps, for n_t + n_c + 2 n_r unknowns (degrees of freedom plus
loop equations plus cut rows; a four-bar: 5 instead of 119). The eliminated multipliers follow
after the run (:func:`recovered_multipliers`, when the Solution's multipliers are first read:
``Solution.deferred``) from Ḡᵀ λ̃ = −R1 (consistent, solved by least squares), so
the Solution's multipliers mean the same in both backends and the step costs only its minimal
solve (:func:`step`, the *dense form*).

Its Newton matrix couples every tree coordinate (a child moves with all its ancestors' u), so a
dense solve costs O(n_t³): 60 ms per step for a 64-link chain. For trees of bodies the
*structured form* (:func:`step_structured`) solves the same step in O(N): the unknowns are u and
all multipliers, the equations the director's without the tree rows (which hold for any u), and
each Newton correction comes from the director's Newton matrix, eliminated along the bodies' tree
(:class:`~conserve.discrete.linear.BlockTree`), mapped to δu link by link (:class:`Lifted`). The
iterates stay on the tree's constraints exactly, the multipliers need no recovery, and Newton
converges quadratically: it is Newton's method on the square system R1 = 0, R2_kept = 0 in
(u, λ̃), whose Jacobian is the director's times the tangent map of the update. Loops take it
too, with the director's coloured dense matrix (:class:`~conserve.discrete.linear.Coloured`;
the cut joints' rows are among the kept ones): the dense form's loop coordinates, differentiated
through their pivoted QR, compile twice as long (a slider-crank 7.6 s against 3.9 s) for a
similar step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation.modes import jit_quick
from ..discrete.forces import constraint_force
from ..discrete.linear import BlockTree, Coloured, Dense, Imaged
from ..discrete.newton import Newton, empty_memory, newton_solve
from ..discrete.scheme import advance, equations, rotor_weights
from ..discrete.turning import turns_with_the_bodies
from ..model.assembled import Model, State
from ..model.parameters import bound
from . import director, loops
from .base import Carry, StepBackend, map_steps
from .director import check_options, linear_solver
from .null_space import increment_rates, increments, increments_and_inverse, null_space


@dataclass(frozen=True)
class Reduced(StepBackend):
    """The energy-momentum step in the kinematic tree's minimal coordinates (Thompson's null-space
    form with Führer–Wallrapp loop coordinates), ``newton`` its Newton options. Same trajectory as
    :class:`~conserve.backends.director.Director`.

    ``linear`` chooses how Newton's linear systems are solved: "auto" (default) takes the
    structured form (:func:`~conserve.backends.reduced.step_structured`: the director's Newton
    matrix eliminated along the bodies' tree, cost linear in the number of bodies, every
    multiplier solved in the step) when the director backend would eliminate along a tree and the
    tree has at least ``STRUCTURED_MIN_DOF`` coordinates, or with the director's coloured dense
    matrix for loops, and otherwise (small trees) the dense form
    (:func:`~conserve.backends.reduced.step`: an LU of the n_dof + … minimal unknowns, the
    tree's multipliers recovered after the run); "dense" and "tree" force one. ``reuse``
    carries the Newton factors from step to step as in the director backend (True, False, or
    "auto", the default: in the structured form, whose chords are accepted below the tighter
    ``CHORD_ERROR_MINIMAL``, for a model without potentials but uniform gravity and without loads,
    ``conserve.discrete.turning.turns_with_the_bodies``: a central field's force gradient does not
    turn with the bodies, and carried chords then drift the energy; the dense form keeps none;
    measurements: benchmarks/results/defaults.md, section ``Reduced.reuse``). Chosen by
    :meth:`~conserve.backends.base.StepBackend.prepare`; unprepared (``cs.step`` on a traced
    model) or differentiated (``Newton(implicit=True)``), the step takes the dense form."""

    newton: Newton = field(default_factory=Newton)
    linear: object = "auto"
    reuse: object = "auto"
    name = "reduced"

    def __post_init__(self):
        check_options(self)

    def prepare(self, model: Model, state: State) -> Reduced:
        if not isinstance(self.linear, str):
            return self
        tree = model.tree  # the structured form needs every kept row but the tree's as an equation
        square = model.n_coordinates - len(tree.tree_rows) == tree.n_dof
        worth = self.linear == "tree" or tree.n_dof >= STRUCTURED_MIN_DOF or bool(tree.loop_rows)
        if not (square and worth) and self.linear != "tree":
            return replace(self, linear=Dense())
        linear = linear_solver(self, model, state, square and worth)
        structured = isinstance(linear, BlockTree) or (isinstance(linear, Coloured) and tree.loop_rows)
        return replace(self, linear=linear if structured else Dense())  # else the dense form: its own LU

    @property
    def _structured(self):
        return isinstance(self.linear, (BlockTree, Coloured)) and not self.newton.implicit

    def init(self, model: Model, state: State) -> Carry:
        lam = jnp.zeros(model.n_constraints, state.q.dtype)
        carries = self.reuse is True or (self.reuse == "auto" and turns_with_the_bodies(model))
        if not (self._structured and carries):
            return Carry(state, lam)
        linear = _structured_form(model, state, jnp.zeros((), state.q.dtype), 1.0, self.linear)[2]
        return Carry(state, lam, empty_memory(np.zeros(self.unknowns(model), state.q.dtype), linear))

    def step(self, model: Model, carry: Carry, t, h):
        if self._structured:
            state, record, memory = step_structured(model, carry.state, carry.multipliers, t, h, self.newton,
                                                    self.linear, carry.memory)
            return Carry(state, record.multipliers, memory if carry.memory is not None else None), record
        linear = Dense(kernel=getattr(self.linear, "kernel", False))  # the dense form's own matrix, by jacfwd
        state, record = step(model, carry.state, carry.multipliers, t, h, self.newton, linear)
        return Carry(state, record.multipliers), record

    def unknowns(self, model: Model) -> int:
        if self._structured:
            return model.tree.n_dof + model.n_constraints + 2 * model.n_rotors
        return unknowns(model)

    def recover_multipliers(self, model: Model, nodes: State, multipliers, t, h):
        if self._structured:  # solved in the step
            return multipliers
        return recovered_multipliers(model, nodes, multipliers, t, h)


#: "auto" takes the structured form from this many tree coordinates on; below, the dense form's LU
#: of n_dof + … unknowns is cheaper (measurements: benchmarks/results/defaults.md, section
#: ``STRUCTURED_MIN_DOF``).
STRUCTURED_MIN_DOF = 12


def unknowns(model: Model) -> int:
    """Newton unknowns per step of the dense form: tree coordinates, cut multipliers, 2 per hybrid rotor."""
    return model.tree.n_dof + len(model.tree.cut_rows) + 2 * model.n_rotors


def _rows(model: Model, which, lam, q0, q1, theta0, theta1, s0, s1):
    """Ḡᵀ (n_q, len(which)): the discrete constraint gradients of the kept rows ``which``
    (the constraint force is linear in λ̃)."""
    def force(lam_w):
        return constraint_force(model, q0, q1, theta0, theta1, s0, s1, jnp.zeros_like(lam).at[which].set(lam_w))[0]

    return jax.jacfwd(force)(jnp.zeros(len(which), q0.dtype))


#: The chord error bound of the minimal unknowns, in either form (:data:`~conserve.discrete.newton.CHORD_ERROR`
#: for the director's unknowns): an error in a minimal increment moves everything beyond its joint,
#: by its lever arm, and the velocities 2Δq/h with it, so that at ``CHORD_ERROR`` the energy jumps in
#: single steps or drifts, and at this bound moves by round-off only, at the cost of up to half an
#: iteration per step (measurements: benchmarks/results/defaults.md, section ``CHORD_ERROR_MINIMAL``).
CHORD_ERROR_MINIMAL = 1e-19


def step(model: Model, state: State, lam, t, h, newton, linear=Dense()):
    """One EM step in minimal coordinates; the contract of :func:`.director.step`, except that
    only the cut rows of ``lam`` are solved for (the others stay 0, see :func:`recovered_multipliers`);
    ``linear``: the :class:`~conserve.discrete.linear.Dense` solver of its Newton matrix.

    The increments Δq are the image of Newton's last correction (:class:`~conserve.discrete.linear.Imaged`:
    F(q_n, u_k) + F_u δu_k at the last evaluated iterate u_k), not F(q_n, u) of the solution rounded:
    a few minimal unknowns carry the whole step, an ulp of u moves the energy by several ε|E|, and
    which neighbour of the root the last correction rounds to is not random, so the energy would
    drift (measurements: benchmarks/results/defaults.md, section ``Imaged``). Differentiated
    (``newton.implicit``), Δq = F(q_n, u) of the solution."""
    tree = model.tree
    q0 = state.q
    Q0 = model.blocks(q0)
    nd, nr = tree.n_dof, state.p.shape[0]
    cut, loop = (np.asarray(r, np.int64) for r in (tree.cut_rows, tree.loop_rows))
    nc = len(cut)
    split = lambda x: (x[:nd], x[nd:nd + nc], x[nd + nc:nd + nc + nr], x[nd + nc + nr:])  # noqa: E731
    source = np.full(lam.shape[0], nc)  # every row's cut multiplier, nc → 0 (a gather, no scatter)
    source[cut] = np.arange(nc)
    with_cut = lambda lam_c: jnp.concatenate([lam_c, jnp.zeros(1, lam.dtype)])[source]  # noqa: E731

    def loop_matrix(qa, qb, H):  # C̄ = Ḡ_l H2 (n_l, n_t) between qa and qb
        return _rows(model, loop, lam, qa, qb, state.theta, state.theta, state.s, state.s).T @ H

    H0 = null_space(tree, Q0)
    if len(loop):  # loop coordinates for this step, pivoted at q_n
        dependent, independent = loops.partition(loop_matrix(q0, q0, H0))

    def residual(x):  # and its image, the increments Δq = F(q_n, u)
        u, lam_c, dp, dtheta = split(x)
        dq = increments(tree, Q0, u)
        r1, r2, r3, r4 = equations(model, state, t, h, dq, with_cut(lam_c), dp, dtheta)
        H = null_space(tree, model.blocks(q0 + 0.5 * dq))  # H2(q_{n+½}): n_t products, no transposes
        r = H.T @ r1
        if len(loop):
            C = loop_matrix(q0, q0 + dq, H)
            r = jnp.concatenate([loops.project(C, r, dependent, independent), r2[loop]])
        return jnp.concatenate([r, r2[cut], r3, r4]), dq

    def weights(x):  # minimal increments (angles, slides, translations) by their own size
        u, lam_c, dp, dtheta = split(x)
        w_lam = jnp.full_like(lam_c, 1.0 + jnp.max(jnp.abs(lam_c), initial=0.0))
        return jnp.concatenate([1.0 + jnp.abs(u), w_lam, *rotor_weights(state, dp, dtheta)])

    # predictor: u = h ν_n with ν_n the minimal velocities closest to v_n (a root's free spin
    # then turns by exactly cay(h ω), as the midpoint rule does)
    nu0 = jnp.linalg.solve(H0.T @ H0, H0.T @ state.v)
    rates = model.rotor_relative_rates(q0, state.v, state.p)
    x0 = jnp.concatenate([h * nu0, lam[cut], jnp.zeros(nr), h * rates])
    g_size = model.constraint_magnitudes(q0, state.theta, state.s, t + h)
    size = jnp.concatenate([jnp.zeros(nd - len(loop)), g_size[loop], g_size[cut], jnp.zeros(2 * nr)])
    if newton.implicit:  # differentiated at its root (custom_root), which takes no image
        x, *result, _ = newton_solve(lambda x: residual(x)[0], x0, newton, weights, size, linear,
                                     chord_error=CHORD_ERROR_MINIMAL)
        dq = increments(tree, Q0, split(x)[0])
    else:
        x, *result, _, dq = newton_solve(residual, x0, newton, weights, size,
                                         Imaged(linear, lambda x: increments(tree, Q0, split(x)[0])),
                                         chord_error=CHORD_ERROR_MINIMAL, image=True)
    _, lam_c, dp, dtheta = split(x)
    return advance(model, state, t, h, dq, dp, dtheta, with_cut(lam_c), result)


def _tree_multipliers(model: Model, state: State, new: State, lam, t, h):
    """All scaled multipliers of one converged step: the tree's and the cut joints' from
    Ḡᵀ λ̃ = −R1(λ̃_c) (consistent; least squares by QR), the cut rows' as solved."""
    kept = np.asarray(model.tree.tree_rows + model.tree.loop_rows, np.int64)
    dp = (new.p - state.p) * h / (2.0 * model.rotor_params["axial_inertia"])
    r1 = equations(model, state, t, h, new.q - state.q, lam, dp, new.theta - state.theta)[0]
    A = _rows(model, kept, lam, state.q, new.q, state.theta, new.theta, state.s, new.s)
    Qa, Ra = jnp.linalg.qr(A)
    return lam.at[kept].set(jax.scipy.linalg.solve_triangular(Ra, -Qa.T @ r1))


@jit_quick(mode="unoptimized")
def _batch_multipliers(model: Model, before: State, after: State, lams, t, h):
    with bound(model.parameters):  # the laws' Parameters read the model's values, as in the step
        return jax.vmap(_tree_multipliers, in_axes=(None, 0, 0, 0, 0, 0))(model, before, after, lams, t, h)


def recovered_multipliers(model: Model, nodes: State, lams, t, h):
    """The tree multipliers of a finished run, after the time loop (so the step stays minimal):
    ``nodes`` the States at t_0 … t_N stacked (N + 1, ...), ``t`` (N,) the steps' start times and
    ``h`` their sizes (N, or one for all) in s, ``lams`` (N, n_c) the step's multipliers (cut rows
    filled). Returns (N, n_c) scaled multipliers λ̃ of every kept row."""
    before, after = (jax.tree.map(lambda a: a[k:len(a) - 1 + k], nodes) for k in (0, 1))
    h = np.broadcast_to(np.asarray(h, np.float64), (len(lams),))
    return map_steps(partial(_batch_multipliers, model), before, after, lams, np.asarray(t, np.float64), h)


@dataclass(frozen=True, eq=False)
class Lifted:
    """The linear algebra of the structured reduced step (:func:`step_structured`): its Newton
    matrix Ĵ = ∂r̂/∂x̂ at x̂ = (u, λ̃, Δp̃, Δθ) is the director's J at x = lift(x̂) times the tangent
    map T = diag(F_u, I), F_u = ∂Δq/∂u, with the tree rows' equations (which hold identically)
    dropped. Ĵ δx̂ = r̂ is solved as the director system J δx = (r̂, 0 in the tree rows) — whose
    tree rows, G(q_{n+1}) δq = 0, put δq in the tangent space, the range of F_u — followed by
    δu = F_u⁻¹ δq link by link (:func:`~conserve.backends.null_space.increment_rates`): the
    director's factorisation (``inner``, e.g. a :class:`~conserve.discrete.linear.BlockTree`)
    serves, and the reduced step costs O(N) like the director step. The Jacobian is formed with
    lift(x̂) and F_u⁻¹ from the same link maps
    (:func:`~conserve.backends.null_space.increments_and_inverse`), and the factors keep that F_u⁻¹
    for their chords."""

    inner: object
    director_residual: object  # x (n,) -> r (n,)
    director_weights: object  # x (n,) -> w (n,)
    linearize: object  # x̂ -> (lift(x̂), F_u⁻¹ (TangentInverse))
    pullback: object  # (F_u⁻¹, δx) -> δx̂
    select: np.ndarray  # the rows of r̂ among the director's
    size: int  # the director's unknowns

    def jacobian(self, residual, x):  # (the director's J at lift(x̂), F_u⁻¹, lift(x̂))
        xd, inverse = self.linearize(x)
        return self.inner.jacobian(self.director_residual, xd), inverse, xd

    def factorise(self, J):
        return self.inner.factorise(J[0]), J[1]

    def solve(self, factors, r):
        return self.solve_image(factors, r)[0]

    def solve_image(self, factors, r):
        """(δx̂, δx) with Ĵ δx̂ = r̂: the director's correction δx, whose δq is tangent (its tree
        rows' right-hand side is 0), is lift's image of δx̂ to second order:
        lift(x̂ + δx̂) = lift(x̂) + δx + O(δ²) (:func:`~conserve.discrete.newton.newton_solve`'s
        ``image``; with factors carried from an earlier linearisation, + O(δ) times how far it is)."""
        inner_factors, inverse = factors
        rhs = jnp.zeros(self.size, r.dtype).at[self.select].set(r)  # 0 in the tree rows
        dx = self.inner.solve(inner_factors, rhs)
        return self.pullback(inverse, dx), dx

    def abs_times(self, J, w):  # |J| at the director's own scales of lift(x̂) (a bound for the round-off test)
        blocks, _, xd = J
        return self.inner.abs_times(blocks, self.director_weights(xd))[self.select]


def _structured_form(model: Model, state: State, t, h, inner):
    """(x̂ ↦ (r̂, x = lift(x̂)), the rows of r̂ among the director's, the :class:`Lifted` solver) of
    the structured reduced step."""
    tree = model.tree
    nq, nc, nr, nd = model.n_coordinates, model.n_constraints, state.p.shape[0], tree.n_dof
    Q0 = model.blocks(state.q)
    kept = np.setdiff1d(np.arange(nc), np.asarray(tree.tree_rows, np.int64))
    select = np.concatenate([np.arange(nq), nq + kept, nq + nc + np.arange(2 * nr)]).astype(np.int64)

    def lift(x):
        return jnp.concatenate([increments(tree, Q0, x[:nd]), x[nd:]])

    def director_residual(xd):
        return director._residual(model, state, t, h, xd)

    def pullback(inverse, dxd):
        return jnp.concatenate([increment_rates(tree, inverse, dxd[:nq]), dxd[nq:]])

    def linearize(x):
        dq, inverse = increments_and_inverse(tree, Q0, x[:nd])
        return jnp.concatenate([dq, x[nd:]]), inverse

    def residual(x):  # and its image, the director's unknowns lift(x̂) (newton_solve's ``image``)
        xd = lift(x)
        return director_residual(xd)[select], xd

    linear = Lifted(inner, director_residual, partial(director.weights, state), linearize, pullback, select,
                    nq + nc + 2 * nr)
    return residual, select, linear



def step_structured(model: Model, state: State, lam, t, h, newton, inner, memory=None):
    """One EM step in minimal coordinates with the director's structured linear algebra: the
    director's equations R1…R4 (:func:`.director.step`) without the tree rows' (which hold for any
    u), solved for x̂ = (u, λ̃, Δp̃, Δθ) — all multipliers, so none are recovered after the run —
    by Newton's method with the :class:`Lifted` solver. A solution is one of the director step:
    the same trajectory, conservation and multipliers; every tree constraint holds by construction
    (:func:`~conserve.backends.null_space.increments`), the solution's to second order in its last
    correction (Lifted.solve_image), which is below the tolerance or at the round-off floor —
    where Newton stalls, at most √tol, and the step is itself known only to what round-off the
    Newton matrix amplifies to that. The contract of :func:`.director.step`."""
    tree = model.tree
    nd, nq, nr = tree.n_dof, model.n_coordinates, state.p.shape[0]
    Q0 = model.blocks(state.q)
    residual, select, linear = _structured_form(model, state, t, h, inner)

    def weights(x):  # minimal increments by their own size, the rest as in the director step (whose
        # scales of multipliers and rotors do not depend on Δq: no tree update for them)
        rest = director.weights(state, jnp.concatenate([jnp.zeros(nq, x.dtype), x[nd:]]))[nq:]
        return jnp.concatenate([1.0 + jnp.abs(x[:nd]), rest])

    # predictor: the director's Δq (a free spin turned by cay(hω)) mapped to minimal increments by
    # the last step's F_u⁻¹ (to O(h²) as good as this step's, and free; without factors yet u = 0)
    xd0 = director.initial_guess(model, state, lam, h)
    inverse = (increments_and_inverse(tree, Q0, jnp.zeros(nd, xd0.dtype))[1] if memory is None
               else memory.factors[1])
    u0 = increment_rates(tree, inverse, xd0[:nq])
    x0 = jnp.concatenate([u0, xd0[nq:]])
    size = jnp.concatenate([jnp.zeros(nq), model.constraint_magnitudes(state.q, state.theta, state.s, t + h),
                            jnp.zeros(2 * nr)])[select]
    # the director's unknowns of the solution from the last iterate's and the last correction's
    # (Lifted.solve_image): the tree update not compiled a third time (0.3–0.6 s less at N = 32–64)
    x, iterations, converged, history, memory, xd = newton_solve(residual, x0, newton, weights, size, linear, memory,
                                                                 CHORD_ERROR_MINIMAL, image=True)
    dq, lam1, dp, dtheta = director._split(xd, nq, lam.shape[0], nr)
    return (*advance(model, state, t, h, dq, dp, dtheta, lam1, (iterations, converged, history)), memory)
