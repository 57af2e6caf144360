"""The kinematics of the kinematic tree (:class:`conserve.model.tree.Tree`) in minimal
coordinates: Thompson's null-space map H2 (Thompson §III, eqs. (15)–(18)) and the finite update
of the discrete null-space method (Betsch and Leyendecker 2006), used by the reduced and ode
backends and by :func:`conserve.linearize`.

Pure functions of the tree, each a vectorised map over the links composed down the tree
by pointer jumping (:func:`down_the_tree`), so their compiled size does not grow with the tree:

- :func:`velocities`: ν ↦ q̇ = H2(q) ν, the null-space map built from the joints' velocity
  relations (Thompson's H_a q̇ = H_b ν: each joint's child twist an affine map of its parent's,
  no SVD). Every body moves rigidly, ḋ_i = ω × d_i, and every tree joint's relation annihilates its own rows of G
  at any configuration, so at q_{n+½} the columns of H2 span the null space of Ḡ exactly.
- :func:`increments`: Δq = F(q_n, u) − q_n, the finite update by minimal increments u: a root
  turns by cay(u_ω) and shifts by u_x; a child's relative rotation R_rel = R_aᵀ R_b turns by
  cay(Σ u_k a_k) · R_rel · cay(Σ u_k b_k) and its joint offset p_rel = R_aᵀ(x_B − x_A) slides by
  Σ u_k (u_k × w_k). Δq is formed from increments only (never q_{n+1} − q_n), so the step's
  velocities 2Δq/h − v_n keep their digits far from the origin; orthonormality and every tree
  constraint hold at q_n + Δq to round-off, which does not pile up (rotations are projected to
  the nearest rotation and the offsets a joint fixes are reset to zero every step).
- :func:`increments_and_inverse` and :func:`increment_rates`: δu = F_u⁻¹ δq, the inverse of the
  update's tangent F_u = ∂Δq/∂u, link by link (the reduced backend's structured Newton corrections).
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics.rotations import cayley_increment, rotation_correction
from ..kinematics.tensor import contract
from ..model.tree import Tree


class Topology(NamedTuple):
    """The tree's static index arrays (numpy), link k in tree order, L links, the ground = L.

    parent : (L + 1,) the parent link (L for a root and for the ground itself)
    frame_a, frame_b, child : (L, 4) block indices into the extended blocks (a root's part a is
        the ground frame; a point mass's directors are the ground's)
    parent_is_a, rigid : (L,) bool
    rot_a, rot_b, slide : (L, 3) indices into (u, 0) of the link's increments, the padding → the 0
    """

    parent: np.ndarray
    frame_a: np.ndarray
    frame_b: np.ndarray
    child: np.ndarray
    parent_is_a: np.ndarray
    rigid: np.ndarray
    rot_a: np.ndarray
    rot_b: np.ndarray
    slide: np.ndarray


@lru_cache(maxsize=64)
def topology(links: tuple, n_blocks: int) -> Topology:
    """The :class:`Topology` of ``links`` (cached per tree structure)."""
    L = len(links)
    ground = tuple(range(n_blocks, n_blocks + 4))
    link_of = {link.child[0]: k for k, link in enumerate(links)}
    parent = np.array([link_of[link.parent[0]] if link.kind == "joint" and link.parent[0] in link_of else L
                       for link in links] + [L], np.int64)
    parent_frames = [link.parent if link.kind == "joint" else ground for link in links]
    pia = np.array([link.parent_is_a for link in links], bool)
    child = np.array([link.child for link in links], np.int64).reshape(L, 4)
    up = np.array(parent_frames, np.int64).reshape(L, 4)
    sentinel = sum(link.n_dof for link in links)
    index = np.full((L, 3, 3), sentinel, np.int64)  # (rot_a, rot_b, slide) per link
    i = 0
    for k, link in enumerate(links):
        for which, n in enumerate(link.dof):
            index[k, which, :n] = np.arange(i, i + n)
            i += n
    return Topology(parent, np.where(pia[:, None], up, child), np.where(pia[:, None], child, up), child, pia,
                    np.array([link.rigid for link in links], bool), index[:, 0], index[:, 1], index[:, 2])


def down_the_tree(parent, maps, compose):
    """Every link's map composed with all its ancestors' (pointer jumping, Wyllie 1979): maps
    (pytree of (L + 1, ...) arrays, the identity at the ground L), ``compose(upper, lower)``
    the map of lower ∘ upper, vectorised over links. After round r each link holds the composition
    of its 2^r nearest links; ⌈log₂ depth⌉ rounds of vectorised work (a 64-link chain: 6), one
    compiled round in a ``fori_loop`` over the rounds' parent pointers, so the compiled program
    grows neither with the number of links nor with the depth, and compiles and steps faster than
    the rounds unrolled (measurements: benchmarks/results/defaults.md, section ``down_the_tree``).
    Returns the composed maps (L + 1, ...)."""
    up = np.asarray(parent)
    ground = len(up) - 1
    rounds = []
    while np.any(up != ground):
        rounds.append(up)
        up = up[up]
    if not rounds:
        return maps
    ups = jnp.asarray(np.stack(rounds))
    return jax.lax.fori_loop(0, len(rounds), lambda r, maps: compose(jax.tree.map(lambda m: m[ups[r]], maps), maps),
                             maps)


def _frames(Q, f):
    """(φ (L, 3), R (L, 3, 3), directors as columns) of the frames with block indices f (L, 4)."""
    return Q[f[:, 0]], jnp.swapaxes(Q[f[:, 1:]], -1, -2)


def _with_identity(identity, maps):
    """Append the ground's identity map (index L) to maps (L, ...)."""
    return jax.tree.map(lambda i, m: jnp.concatenate([m, i[None].astype(m.dtype)]), identity, maps)


def _twist_compose(upper, lower):
    """A link's twist map (ρ, α, β): ω = ω_p + ρ, v = v_p + ω_p × α + β; lower ∘ upper."""
    rho_p, alpha_p, beta_p = upper
    rho_c, alpha_c, beta_c = lower
    return rho_p + rho_c, alpha_p + alpha_c, beta_p + jnp.cross(rho_p, alpha_c) + beta_c


def velocities(tree: Tree, Q, nu):
    """q̇ = H2(q) ν: the director velocities (n_blocks, 3) of the minimal velocities ν (n_dof,)
    at the configuration Q (extended blocks, (n_blocks + 4, 3)); linear in ν.

    Each link's joint relation gives the child's twist (v of φ, ω) as an affine map of its parent's:
    with arms r_a = R_a at_a, r_b = R_b at_b, the gap x_B − x_A and the joint's rates ρ (rotations)
    and s (slides), parent a: ω = ω_p + ρ, v = v_p + ω_p × (r_a + gap − r_b) + s − ρ × r_b; parent b:
    ω = ω_p − ρ, v = v_p + ω_p × (r_b − gap − r_a) + ρ × (gap + r_a) − s. The maps are composed down
    the tree by :func:`down_the_tree`."""
    top = topology(tree.links, tree.n_blocks)
    P = tree.params
    if not len(top.child):
        return jnp.zeros(tree.n_blocks * 3, Q.dtype)
    x = jnp.concatenate([nu, jnp.zeros(1, nu.dtype)])
    (pa, Ra), (pb, Rb) = _frames(Q, top.frame_a), _frames(Q, top.frame_b)
    rot = (contract("lij,lkj,lk->li", Ra, P["rot_a"], x[top.rot_a])
           + contract("lij,lkj,lk->li", Rb, P["rot_b"], x[top.rot_b]))
    slide = contract("lki,lk->li", jnp.cross(contract("lij,lkj->lki", Ra, P["slide_u"]),
                                               contract("lij,lkj->lki", Ra, P["slide_w"])), x[top.slide])
    arm_a, arm_b = contract("lij,lj->li", Ra, P["at_a"]), contract("lij,lj->li", Rb, P["at_b"])
    gap = pb + arm_b - pa - arm_a
    pia = top.parent_is_a[:, None]
    maps = (jnp.where(pia, rot, -rot), jnp.where(pia, arm_a + gap - arm_b, arm_b - gap - arm_a),
            jnp.where(pia, slide - jnp.cross(rot, arm_b), jnp.cross(rot, gap + arm_a) - slide))
    zero = jnp.zeros(3, Q.dtype)
    w, _, v = down_the_tree(top.parent, _with_identity((zero, zero, zero), maps), _twist_compose)
    return _to_blocks(top, tree.n_blocks, v[:-1], jnp.cross(w[:-1, None, :], Q[top.child[:, 1:]]))


def _to_blocks(top: Topology, n_blocks, positions, directors):
    """(n_blocks · 3,) the links' child blocks set to positions (L, 3) and directors (L, 3, 3),
    zero elsewhere (a point mass's director blocks are the ground's: dropped). Gathered by static
    indices, not scattered: XLA's CPU compiler makes every scatter (and its derivatives) a loop of
    its own."""
    rows = jnp.concatenate([positions, directors.reshape(-1, 3), jnp.zeros((1, 3), positions.dtype)])
    return rows[_block_sources(top.child, n_blocks)].ravel()


def _block_sources(child, n_blocks):
    """(n_blocks,) per block its row in (positions (L, 3); directors (3L, 3); 0) of :func:`_to_blocks`."""
    L = len(child)
    source = np.full(n_blocks, 4 * L, np.int64)
    rows = np.concatenate([np.arange(L)[:, None], L + 3 * np.arange(L)[:, None] + np.arange(3)], axis=1)
    owned = child < n_blocks
    source[child[owned]] = rows[owned]
    return source


def _change_compose(upper, lower):
    """A link's increment map (M, K, a, b): ΔR = ΔR_p M + K, Δφ = Δφ_p + ΔR_p a + b; lower ∘ upper."""
    M_p, K_p, a_p, b_p = upper
    M_c, K_c, a_c, b_c = lower
    return (contract("lij,ljk->lik", M_p, M_c), contract("lij,ljk->lik", K_p, M_c) + K_c,
            a_p + contract("lij,lj->li", M_p, a_c),
            b_p + contract("lij,lj->li", K_p, a_c) + b_c)


def _link_change(pia, rigid, pa, Ra, pb, Rb, P, xa, xb, xs):
    """One link's increment map (M, K, a, b) of :func:`_change_compose` at q_n (vmapped over links).

    The relative rotation X = R_aᵀ R_b turns to R_rel' = cay(A) N(X) cay(B) (N: the nearest
    rotation), the offset p_rel = R_aᵀ d, d = x_B − x_A, slides to p_rel' = p_rel + S x_s with its
    fixed components reset to 0. The child is then placed exactly on its parent's new pose:
    parent a: R_b' = R_a' R_rel', x_B' = x_A' + R_a' p_rel'; parent b: R_a' = R_b' R_rel'ᵀ,
    x_A' = x_B' − R_a' p_rel'. As increments (parent a; b alike):
    ΔR_b = ΔR_a R_rel' + R_a ΔR_rel + (R_a X − R_b), Δx_B = Δx_A + ΔR_a p_rel' + R_a Δp_rel +
    (R_a p_rel − d); Δφ of the child = Δx of its joint point − ΔR at its joint point. The gaps
    (R_a X − R_b) = (R_a R_aᵀ − I) R_b and (R_a p_rel − d) are round-off of a parent that is not
    exactly orthonormal: without them it would reach the child doubled (R_b' − R_a' R_rel' =
    −2 S_a R_b for R_a = (I + S_a) Q) and grow by ×3 per link down a chain (a 32-link chain
    left its constraints by 1e-7 in 8 steps)."""
    eye = jnp.eye(3, dtype=Ra.dtype)
    mm = lambda A, B: contract("ij,jk->ik", A, B)  # noqa: E731
    mv = lambda A, x: contract("ij,j->i", A, x)  # noqa: E731
    X = contract("ji,jk->ik", Ra, Rb)
    correction = rotation_correction(X)
    R_rel = X + correction  # the nearest rotation: round-off must not pile up down the tree
    d = pb + mv(Rb, P["at_b"]) - pa - mv(Ra, P["at_a"])
    p_rel = contract("ji,j->i", Ra, d)
    dp_rel = contract("k,ki->i", xs, jnp.cross(P["slide_u"], P["slide_w"])) - mv(P["fixed"], p_rel)
    cB = cayley_increment(contract("ji,j->i", P["rot_b"], xb))
    dR_rel = mm(mm(cayley_increment(contract("ji,j->i", P["rot_a"], xa)), R_rel), eye + cB) + mm(R_rel, cB) + correction
    R_rel1, p_rel1 = X + dR_rel, p_rel + dp_rel
    K = jnp.where(pia, mm(Ra, dR_rel) + (mm(Ra, X) - Rb), mm(Rb, dR_rel.T) + (mm(Rb, X.T) - Ra))
    K = jnp.where(rigid, K, 0.0)  # a point mass has no rotation
    M = jnp.where(rigid, jnp.where(pia, R_rel1, R_rel1.T), 0.0)
    s = jnp.where(pia, P["at_a"] + p_rel1, P["at_b"])
    t = jnp.where(pia, 1.0, -1.0) * (mv(Ra, dp_rel) + (mv(Ra, p_rel) - d))
    r = jnp.where(pia, P["at_b"], p_rel1 + P["at_a"])
    return M, K, s - mv(M, r), t - mv(K, r)


def _changes(tree: Tree, Q0, u):
    """(topology, the links' increment maps at u composed down the tree) of :func:`increments`
    ((M, K, a, b) of :func:`_change_compose`, each (L + 1, ...), the ground's identity last)."""
    top = topology(tree.links, tree.n_blocks)
    x = jnp.concatenate([u, jnp.zeros(1, u.dtype)])
    (pa, Ra), (pb, Rb) = _frames(Q0, top.frame_a), _frames(Q0, top.frame_b)
    maps = jax.vmap(_link_change)(top.parent_is_a, top.rigid, pa, Ra, pb, Rb, tree.params,
                                  x[top.rot_a], x[top.rot_b], x[top.slide])
    eye, zero = jnp.eye(3, dtype=Q0.dtype), jnp.zeros((3, 3), Q0.dtype)
    return top, down_the_tree(top.parent, _with_identity((eye, zero, zero[0], zero[0]), maps), _change_compose)


def increments(tree: Tree, Q0, u):
    """Δq = F(q_n, u) − q_n (n_q,): the increment of the configuration Q0 (extended blocks) by the
    minimal increments u (n_dof,), formed from increments alone — cay(x) − I, the parent's
    increments and the joint's slide, never a difference of absolute positions — so it keeps its
    relative accuracy however far the parts are from the origin (a satellite 10⁷ m out moves by
    10³ m per step known to ε·10³ m, not ε·10⁷ m), as the director backend's unknowns do. Every
    tree constraint holds at q_n + Δq for any u: relative rotations stay rotations (projected to
    the nearest one, so round-off does not pile up down the tree) and a joint's offset is reset to
    its slides (the components the joint fixes are put back to zero), so the round-off gaps of
    q_n are closed instead of carried on. Each link's change is an affine map of its parent's
    (``_link_change``), composed down the tree by :func:`down_the_tree`."""
    if not tree.links:
        return jnp.zeros(tree.n_blocks * 3, Q0.dtype)
    top, (_, dR, _, d_phi) = _changes(tree, Q0, u)
    return _to_blocks(top, tree.n_blocks, d_phi[:-1], jnp.swapaxes(dR[:-1], -1, -2))


class TangentInverse(NamedTuple):
    """The inverse of the tangent map F_u = ∂Δq/∂u of :func:`increments` at one u, link by link
    (:func:`increments_and_inverse`): ``pinv`` (L, 9, 12) each link's least-squares inverse, on its
    9 increment slots (rot_a, rot_b, slide), of the 12 equations below; ``M`` (L, 3, 3) and ``a``
    (L, 3) its increment map's rotation and arm at u."""

    pinv: jax.Array
    M: jax.Array
    a: jax.Array


def increments_and_inverse(tree: Tree, Q0, u):
    """(Δq (n_q,) of :func:`increments`, F_u⁻¹ (:class:`TangentInverse`)) at u, in O(L): the
    inverse of the tangent F_u = ∂Δq/∂u for δq tangent to the tree's constraints at q_n + Δq(u)
    (else the least-squares fit of each link's part of it; apply it with :func:`increment_rates`),
    with the increments themselves from the same link maps.

    A link's child changes as ΔR = ΔR_p M(u_k) + K(u_k), Δφ = Δφ_p + ΔR_p a(u_k) + b(u_k)
    (``_change_compose``), so with the parent's δΔR_p, δΔφ_p and the child's δΔR, δΔφ read
    off δq, the link's own δu_k solves the 12 × k equations
    (ΔR_p ∂M + ∂K) δu_k = δΔR − δΔR_p M,  (ΔR_p ∂a + ∂b) δu_k = δΔφ − δΔφ_p − δΔR_p a
    (∂ by forward differentiation of ``_link_change``): no link waits for another. The reduced
    backend's structured Newton maps the director system's corrections to its minimal increments
    with it (:mod:`conserve.backends.reduced`)."""
    top = topology(tree.links, tree.n_blocks)
    x = jnp.concatenate([u, jnp.zeros(1, u.dtype)])
    slots = _slots(top)
    (pa, Ra), (pb, Rb) = _frames(Q0, top.frame_a), _frames(Q0, top.frame_b)

    def link_maps(pia, rigid, pa, Ra, pb, Rb, P, z):  # the link's derivatives (..., 9) by its 9 slots, and its maps
        def maps(z):
            m = _link_change(pia, rigid, pa, Ra, pb, Rb, P, z[:3], z[3:6], z[6:])
            return m, m
        return jax.jacfwd(maps, has_aux=True)(z)

    (dM, dK, da, db), maps = jax.vmap(link_maps)(top.parent_is_a, top.rigid, pa, Ra, pb, Rb, tree.params, x[slots])
    eye, zero = jnp.eye(3, dtype=Q0.dtype), jnp.zeros((3, 3), Q0.dtype)
    _, dR, _, d_phi = down_the_tree(top.parent, _with_identity((eye, zero, zero[0], zero[0]), maps), _change_compose)
    dR_p = dR[top.parent[:-1]]  # the parent's rotation increment (0 for the ground)
    A = jnp.concatenate([(contract("lij,ljkz->likz", dR_p, dM) + dK).reshape(-1, 9, 9),
                         contract("lij,ljz->liz", dR_p, da) + db], axis=1)  # (L, 12, 9)
    At = jnp.swapaxes(A, 1, 2)
    padding = jnp.asarray((slots == tree.n_dof)[:, :, None] * np.eye(9), u.dtype)  # slots a link does not have
    inverse = TangentInverse(jnp.linalg.solve(At @ A + padding, At), maps[0], maps[2])
    return _to_blocks(top, tree.n_blocks, d_phi[:-1], jnp.swapaxes(dR[:-1], -1, -2)), inverse


def increment_rates(tree: Tree, inverse: TangentInverse, dq):
    """δu = F_u⁻¹ δq (n_dof,) for δq (n_q,), F_u⁻¹ from :func:`increments_and_inverse`: per link, the
    right-hand sides of its 12 equations from its child's and parent's blocks of δq, times pinv."""
    if not tree.links:
        return jnp.zeros(0, dq.dtype)
    top = topology(tree.links, tree.n_blocks)
    D = jnp.concatenate([dq.reshape(-1, 3), jnp.zeros((4, 3), dq.dtype)])
    frame_p = np.where(top.parent_is_a[:, None], top.frame_a, top.frame_b)
    ddR_p, ddphi_p = jnp.swapaxes(D[frame_p[:, 1:]], -1, -2), D[frame_p[:, 0]]
    ddR, ddphi = jnp.swapaxes(D[top.child[:, 1:]], -1, -2), D[top.child[:, 0]]
    b = jnp.concatenate([(ddR - contract("lij,ljk->lik", ddR_p, inverse.M)).reshape(-1, 9),
                         ddphi - ddphi_p - contract("lij,lj->li", ddR_p, inverse.a)], axis=1)
    dz = contract("lzk,lk->lz", inverse.pinv, b)
    return jnp.zeros(tree.n_dof + 1, dq.dtype).at[_slots(top)].set(dz)[:tree.n_dof]


def _slots(top: Topology):
    """(L, 9) each link's indices into (u, 0) of its increments (rot_a, rot_b, slide); n_dof: padding."""
    return np.concatenate([top.rot_a, top.rot_b, top.slide], axis=1)


def configure(tree: Tree, Q0, u):
    """q_{n+1} = q_n + Δq (n_q,), Δq from :func:`increments`: the configuration reached from Q0
    (extended blocks) by the minimal increments u (n_dof,); every tree constraint holds for any u."""
    return Q0[:-4].ravel() + increments(tree, Q0, u)


def null_space(tree: Tree, Q):
    """H2(q) (n_q, n_dof) as a matrix (tests, linearisation, predictors)."""
    return jax.jacfwd(partial(velocities, tree, Q))(jnp.zeros(tree.n_dof, Q.dtype))


