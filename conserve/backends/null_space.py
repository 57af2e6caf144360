"""The kinematics of the kinematic tree (:class:`conserve.model.tree.Tree`) in minimal
coordinates: Thompson's null-space map H2 (Thompson §III, eqs. (15)–(18)) and the finite update
of the discrete null-space method (Betsch and Leyendecker 2006), used by the reduced and ode
backends and by :func:`conserve.linearize`.

Two pure functions of the tree, both in tree order (parents before children):

- :func:`velocities`: ν ↦ q̇ = H2(q) ν, the null-space map built from the joints' velocity
  relations (Thompson's H_a q̇ = H_b ν solved joint by joint down the tree, no SVD). Every body
  moves rigidly, ḋ_i = ω × d_i, and every tree joint's relation annihilates its own rows of G
  at any configuration, so at q_{n+½} the columns of H2 span the null space of Ḡ exactly.
- :func:`increments`: Δq = F(q_n, u) − q_n, the finite update by minimal increments u: a root
  turns by cay(u_ω) and shifts by u_x; a child's relative rotation R_rel = R_aᵀ R_b turns by
  cay(Σ u_k a_k) · R_rel · cay(Σ u_k b_k) and its joint offset p_rel = R_aᵀ(x_B − x_A) slides by
  Σ u_k (u_k × w_k). Δq is formed from increments only (never q_{n+1} − q_n), so the step's
  velocities 2Δq/h − v_n keep their digits far from the origin; orthonormality and every tree
  constraint hold at q_n + Δq to round-off, which does not pile up (rotations are projected to
  the nearest rotation and the offsets a joint fixes are reset to zero every step).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics.frames import frames_of
from ..kinematics.rotations import cayley_increment, nearest_rotation, rotation_correction
from ..model.tree import Tree


def _frame(Q, f):
    """(φ (3,), R (3, 3) with the directors as columns) of the frame with block indices f."""
    frame = frames_of(Q, [np.asarray(f)])[0]
    return frame.position, frame.rotation


def velocities(tree: Tree, Q, nu):
    """q̇ = H2(q) ν: the director velocities (n_blocks, 3) of the minimal velocities ν (n_dof,)
    at the configuration Q (extended blocks, (n_blocks + 4, 3)); linear in ν."""
    twist = {}  # φ block -> (v, ω) of each placed part; the ground does not move
    zero = jnp.zeros(3, Q.dtype)
    i = 0
    for link, p in zip(tree.links, tree.params):
        n = link.n_dof
        x = nu[i:i + n]
        i += n
        if link.kind == "root":
            twist[link.child[0]] = (x[-3:], x[:3] if link.rigid else zero)
            continue
        a, b = (link.parent, link.child) if link.parent_is_a else (link.child, link.parent)
        (pa, Ra), (pb, Rb) = _frame(Q, a), _frame(Q, b)
        ka, kb, _ = link.dof
        rot = Ra @ (p["rot_a"][:ka].T @ x[:ka]) + Rb @ (p["rot_b"].T @ x[ka:ka + kb]) if link.rigid else zero
        slide = jnp.cross(Ra @ p["slide_u"].T, Ra @ p["slide_w"].T, axis=0) @ x[ka + kb:]
        arm_a, arm_b = Ra @ p["at_a"], Rb @ p["at_b"]
        gap = pb + arm_b - pa - arm_a  # x_B − x_A
        v_p, w_p = twist.get(link.parent[0], (zero, zero))
        if link.parent_is_a:
            w_b = w_p + rot
            xdot_b = v_p + jnp.cross(w_p, arm_a) + jnp.cross(w_p, gap) + slide
            twist[link.child[0]] = (xdot_b - jnp.cross(w_b, arm_b), w_b)
        else:
            w_a = w_p - rot
            xdot_a = v_p + jnp.cross(w_p, arm_b) - jnp.cross(w_a, gap) - slide
            twist[link.child[0]] = (xdot_a - jnp.cross(w_a, arm_a), w_a)
    qdot = jnp.zeros((tree.n_blocks, 3), Q.dtype)
    for link in tree.links:
        v, w = twist[link.child[0]]
        qdot = qdot.at[link.child[0]].set(v)
        if link.rigid:
            qdot = qdot.at[jnp.asarray(link.child[1:])].set(jnp.cross(w, Q[jnp.asarray(link.child[1:])]))
    return qdot.ravel()


def increments(tree: Tree, Q0, u):
    """Δq = F(q_n, u) − q_n (n_q,): the increment of the configuration Q0 (extended blocks) by the
    minimal increments u (n_dof,), formed from increments alone — cay(x) − I, the parent's
    increments and the joint's slide, never a difference of absolute positions — so it keeps its
    relative accuracy however far the parts are from the origin (a satellite 10⁷ m out moves by
    10³ m per step known to ε·10³ m, not ε·10⁷ m), as the director backend's unknowns do. Every
    tree constraint holds at q_n + Δq for any u: relative rotations stay rotations (projected to
    the nearest one, so round-off does not pile up down the tree) and a joint's offset is reset to
    its slides (the components the joint fixes are put back to zero), so the round-off gaps of
    q_n are closed instead of carried on."""
    pose, change = {}, {}  # φ block -> (φ_n, R_n) and (Δφ, ΔR) of each placed part
    ground = len(Q0) - 4
    eye, zero = jnp.eye(3, dtype=Q0.dtype), jnp.zeros(3, Q0.dtype)
    pose[ground], change[ground] = (zero, eye), (zero, jnp.zeros((3, 3), Q0.dtype))
    dQ = jnp.zeros((tree.n_blocks, 3), Q0.dtype)
    i = 0
    for link, p in zip(tree.links, tree.params):
        n = link.n_dof
        x = u[i:i + n]
        i += n
        if link.kind == "root":
            phi0, R0 = _frame(Q0, link.child)
            dR = (cayley_increment(x[:3]) @ nearest_rotation(R0) + rotation_correction(R0) if link.rigid
                  else jnp.zeros((3, 3), Q0.dtype))
            pose[link.child[0]], change[link.child[0]] = (phi0, R0), (x[-3:], dR)
            continue
        a, b = (link.parent, link.child) if link.parent_is_a else (link.child, link.parent)
        (pa, Ra), (pb, Rb) = _frame(Q0, a), _frame(Q0, b)
        X = Ra.T @ Rb
        R_rel = nearest_rotation(X)  # round-off of the parent must not pile up down the tree
        p_rel = Ra.T @ (pb + Rb @ p["at_b"] - pa - Ra @ p["at_a"])  # the joint's offset x_B − x_A in a
        ka, kb, _ = link.dof
        slides = jnp.cross(p["slide_u"], p["slide_w"]).T  # (3, k_s) slide directions in a
        dp_rel = slides @ x[ka + kb:] - p["fixed"] @ p_rel  # slide, and the fixed components back to 0
        if link.rigid:
            A, B = p["rot_a"].T @ x[:ka], p["rot_b"].T @ x[ka:ka + kb]
            cB = cayley_increment(B)
            dR_rel = cayley_increment(A) @ R_rel @ (eye + cB) + R_rel @ cB + rotation_correction(X)
        else:
            dR_rel = jnp.zeros((3, 3), Q0.dtype)
        R_rel1, p_rel1 = X + dR_rel, p_rel + dp_rel
        d_phi_p, dR_p = change[link.parent[0]]
        if link.parent_is_a:  # R_b = R_a R_rel, x_B = x_A + R_a p_rel
            dRa, dRb = dR_p, (Ra @ dR_rel + dR_p @ R_rel1 if link.rigid else jnp.zeros((3, 3), Q0.dtype))
            dx_b = d_phi_p + dRa @ p["at_a"] + dRa @ p_rel1 + Ra @ dp_rel
            dR_child, d_phi_child = dRb, dx_b - dRb @ p["at_b"]
        else:  # R_a = R_b R_relᵀ, x_A = x_B − R_a p_rel
            dRb, dRa = dR_p, (Rb @ dR_rel.T + dR_p @ R_rel1.T if link.rigid else jnp.zeros((3, 3), Q0.dtype))
            dx_a = d_phi_p + dRb @ p["at_b"] - dRa @ p_rel1 - Ra @ dp_rel
            dR_child, d_phi_child = dRa, dx_a - dRa @ p["at_a"]
        change[link.child[0]] = (d_phi_child, dR_child)
    for link in tree.links:
        d_phi, dR = change[link.child[0]]
        dQ = dQ.at[link.child[0]].set(d_phi)
        if link.rigid:
            dQ = dQ.at[jnp.asarray(link.child[1:])].set(dR.T)
    return dQ.ravel()


def configure(tree: Tree, Q0, u):
    """q_{n+1} = q_n + Δq (n_q,), Δq from :func:`increments`: the configuration reached from Q0
    (extended blocks) by the minimal increments u (n_dof,); every tree constraint holds for any u."""
    return Q0[:-4].ravel() + increments(tree, Q0, u)


def null_space(tree: Tree, Q):
    """H2(q) (n_q, n_dof) as a matrix (tests, linearisation, predictors)."""
    return jax.jacfwd(partial(velocities, tree, Q))(jnp.zeros(tree.n_dof, Q.dtype))


