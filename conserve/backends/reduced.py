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
after the run (:func:`recovered_multipliers`) from Ḡᵀ λ̃ = −R1 (consistent, solved by least squares), so
the Solution's multipliers mean the same in both backends and the step costs only its minimal
solve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from ..discrete.forces import constraint_force
from ..discrete.newton import Newton, newton_solve
from ..discrete.scheme import advance, equations, rotor_weights
from ..model.assembled import Model, State
from . import loops
from .base import Carry, StepBackend, map_steps
from .null_space import increments, null_space, velocities


@dataclass(frozen=True)
class Reduced(StepBackend):
    """The energy-momentum step in the kinematic tree's minimal coordinates (Thompson's null-space
    form with Führer–Wallrapp loop coordinates), ``newton`` its Newton options. Same trajectory as
    :class:`~conserve.backends.director.Director`; the tree's multipliers are recovered after the
    run."""

    newton: Newton = field(default_factory=Newton)
    name = "reduced"

    def step(self, model: Model, carry: Carry, t, h):
        state, record = step(model, carry.state, carry.multipliers, t, h, self.newton)
        return Carry(state, record.multipliers), record

    def unknowns(self, model: Model) -> int:
        return unknowns(model)

    def recover_multipliers(self, model: Model, nodes: State, multipliers, t0, h):
        return recovered_multipliers(model, nodes, multipliers, t0, h)


def unknowns(model: Model) -> int:
    """Newton unknowns per step: tree coordinates, cut multipliers, 2 per hybrid rotor."""
    return model.tree.n_dof + len(model.tree.cut_rows) + 2 * model.n_rotors


def _rows(model: Model, which, lam, q0, q1, theta0, theta1, s0, s1):
    """Ḡᵀ (n_q, len(which)): the discrete constraint gradients of the kept rows ``which``
    (the constraint force is linear in λ̃)."""
    def force(lam_w):
        return constraint_force(model, q0, q1, theta0, theta1, s0, s1, jnp.zeros_like(lam).at[which].set(lam_w))[0]

    return jax.jacfwd(force)(jnp.zeros(len(which), q0.dtype))


def step(model: Model, state: State, lam, t, h, newton):
    """One EM step in minimal coordinates; the contract of :func:`.director.step`, except that
    only the cut rows of ``lam`` are solved for (the others stay 0, see :func:`recovered_multipliers`)."""
    tree = model.tree
    q0 = state.q
    Q0 = model.blocks(q0)
    nd, nr = tree.n_dof, state.p.shape[0]
    cut, loop = (np.asarray(r, np.int64) for r in (tree.cut_rows, tree.loop_rows))
    nc = len(cut)
    split = lambda x: (x[:nd], x[nd:nd + nc], x[nd + nc:nd + nc + nr], x[nd + nc + nr:])  # noqa: E731
    with_cut = lambda lam_c: jnp.zeros_like(lam).at[cut].set(lam_c)  # noqa: E731

    def loop_matrix(qa, qb, H2_transpose):  # C̄ (n_l, n_t) between qa and qb
        G_l = _rows(model, loop, lam, qa, qb, state.theta, state.theta, state.s, state.s)
        return jax.vmap(H2_transpose, in_axes=1, out_axes=0)(G_l)

    if len(loop):  # loop coordinates for this step, pivoted at q_n
        _, at_q0 = jax.vjp(lambda nu: velocities(tree, Q0, nu), jnp.zeros(nd))
        dependent, independent = loops.partition(loop_matrix(q0, q0, lambda g: at_q0(g)[0]))

    def residual(x):
        u, lam_c, dp, dtheta = split(x)
        dq = increments(tree, Q0, u)
        r1, r2, r3, r4 = equations(model, state, t, h, dq, with_cut(lam_c), dp, dtheta)
        _, project = jax.vjp(lambda nu: velocities(tree, model.blocks(q0 + 0.5 * dq), nu), jnp.zeros(nd))
        r = project(r1)[0]
        if len(loop):
            C = loop_matrix(q0, q0 + dq, lambda g: project(g)[0])
            r = jnp.concatenate([loops.project(C, r, dependent, independent), r2[loop]])
        return jnp.concatenate([r, r2[cut], r3, r4])

    def weights(x):  # minimal increments (angles, slides, translations) by their own size
        u, lam_c, dp, dtheta = split(x)
        w_lam = jnp.full_like(lam_c, 1.0 + jnp.max(jnp.abs(lam_c), initial=0.0))
        return jnp.concatenate([1.0 + jnp.abs(u), w_lam, *rotor_weights(state, dp, dtheta)])

    # predictor: u = h ν_n with ν_n the minimal velocities closest to v_n (a root's free spin
    # then turns by exactly cay(h ω), as the midpoint rule does)
    H0 = null_space(tree, Q0)
    nu0 = jnp.linalg.solve(H0.T @ H0, H0.T @ state.v)
    rates = model.rotor_relative_rates(q0, state.v, state.p)
    x0 = jnp.concatenate([h * nu0, lam[cut], jnp.zeros(nr), h * rates])
    g_size = model.constraint_magnitudes(q0, state.theta, state.s)
    size = jnp.concatenate([jnp.zeros(nd - len(loop)), g_size[loop], g_size[cut], jnp.zeros(2 * nr)])
    x, *result, _ = newton_solve(residual, x0, newton, weights, size)
    u, lam_c, dp, dtheta = split(x)
    return advance(model, state, t, h, increments(tree, Q0, u), dp, dtheta, with_cut(lam_c), result)


def _tree_multipliers(model: Model, state: State, new: State, lam, t, h):
    """All scaled multipliers of one converged step: the tree's and the cut joints' from
    Ḡᵀ λ̃ = −R1(λ̃_c) (consistent; least squares by QR), the cut rows' as solved."""
    kept = np.asarray(model.tree.tree_rows + model.tree.loop_rows, np.int64)
    dp = (new.p - state.p) * h / (2.0 * model.rotor_params["axial_inertia"])
    r1 = equations(model, state, t, h, new.q - state.q, lam, dp, new.theta - state.theta)[0]
    A = _rows(model, kept, lam, state.q, new.q, state.theta, new.theta, state.s, new.s)
    Qa, Ra = jnp.linalg.qr(A)
    return lam.at[kept].set(jax.scipy.linalg.solve_triangular(Ra, -Qa.T @ r1))


@jax.jit
def _batch_multipliers(model: Model, before: State, after: State, lams, t, h):
    return jax.vmap(_tree_multipliers, in_axes=(None, 0, 0, 0, 0, None))(model, before, after, lams, t, h)


def recovered_multipliers(model: Model, nodes: State, lams, t0, h):
    """The tree multipliers of a finished run, after the time loop (so the step stays minimal):
    ``nodes`` the States at t_0 … t_N stacked (N + 1, ...), ``lams`` (N, n_c) the step's
    multipliers (cut rows filled). Returns (N, n_c) scaled multipliers λ̃ of every kept row."""
    before, after = (jax.tree.map(lambda a: a[k:len(a) - 1 + k], nodes) for k in (0, 1))
    times = t0 + h * np.arange(len(lams))
    return map_steps(lambda *a: _batch_multipliers(model, *a, h), before, after, lams, times)
