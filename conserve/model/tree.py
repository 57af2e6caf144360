"""The kinematic tree of the reduced backend (DESIGN §8, Thompson §III–IV, Betsch–Leyendecker's
discrete null-space method).

A spanning tree of the joints (in listing order, so loops are closed by their last-listed joint)
carries minimal coordinates: every part is either a *root* (a free body: translation and
rotation increments; a part on the ground: nothing) or the *child* of one tree joint (the joint's
relative freedoms, :class:`~conserve.model.joints.JointMotion`). Joints that close a loop and
joints without a relative-motion description are *cut joints*: their constraints (functions of q
alone) are kept as equations and eliminated from the dynamics by loop coordinates
(:mod:`conserve.model.loops`). All other constraints (ropes, coordinate relations, user
constraints) are *cut rows* that keep their multipliers in the reduced step.

Two pure functions of the tree, both in tree order (parents before children):

- :func:`velocities`: ν ↦ q̇ = H2(q) ν, the null-space map built from the joints' velocity
  relations (Thompson's H_a q̇ = H_b ν solved joint by joint down the tree, no SVD). Every body
  moves rigidly, ḋ_i = ω × d_i, and every tree joint's relation annihilates its own rows of G
  at any configuration, so at q_{n+½} the columns of H2 span the null space of Ḡ exactly.
- :func:`configure`: q_{n+1} = F(q_n, u), the finite update by minimal increments u: a root
  turns by cay(u_ω) and shifts by u_x; a child's relative rotation R_rel = R_aᵀ R_b turns by
  cay(Σ u_k a_k) · R_rel · cay(Σ u_k b_k) and its joint offset p_rel = R_aᵀ(x_B − x_A) slides by
  Σ u_k (u_k × w_k). Orthonormality and every tree constraint hold exactly (to round-off, which
  ``nearest_rotation`` keeps from growing down the tree).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics.frames import frames_of
from ..kinematics.rotations import cayley, nearest_rotation
from .bodies import Ground, PointMass, RigidBody
from .joints import Joint, Spherical


@dataclass(frozen=True)
class Link:
    """One entry of the tree in tree order (static).

    kind : "root" (a free part) or "joint"
    child : block indices (4,) of the part this link places (tuple of ints)
    parent : block indices (4,) of the parent part (joints only)
    parent_is_a : the parent is the joint's part a (else b)
    rigid : the child is a rigid body (else a point mass: no rotation)
    dof : (k_a, k_b, k_s) rotations about a-axes, b-axes and slides; a root: (3, 0, 3) or (0, 0, 3)
    name : the joint's or part's name (messages)
    """

    kind: str
    child: tuple
    parent: tuple
    parent_is_a: bool
    rigid: bool
    dof: tuple
    name: str

    @property
    def n_dof(self):
        return sum(self.dof)


@partial(jax.tree_util.register_dataclass, data_fields=["params"],
         meta_fields=["links", "tree_rows", "loop_rows", "cut_rows", "n_blocks"])
@dataclass(frozen=True)
class Tree:
    """The spanning tree: ``links`` (static, tree order), per link its geometry ``params``
    (at_a, at_b (3,), rot_a (k_a, 3), rot_b (k_b, 3), slide_u, slide_w (k_s, 3) body vectors),
    and the roles of the kept constraint rows, as indices into the step's multiplier vector:
    ``tree_rows`` (satisfied by construction), ``loop_rows`` (cut joints: loop coordinates) and
    ``cut_rows`` (multipliers kept)."""

    params: tuple
    links: tuple
    tree_rows: tuple
    loop_rows: tuple
    cut_rows: tuple
    n_blocks: int

    @property
    def closure_rows(self):
        """The kept rows the tree does not satisfy by construction: ``loop_rows + cut_rows``."""
        return self.loop_rows + self.cut_rows

    @property
    def n_dof(self):
        return sum(link.n_dof for link in self.links)


def spanning_tree(parts, elements, layout):
    """Choose the tree (Python, at assembly). Returns (links, params, tree owners, cut joints).

    Joints with a relative-motion description join two not yet connected parts in listing order
    (Kruskal); a point mass can only hang on a spherical joint. Each connected component is
    rooted at the ground if it touches it, else at its first-listed part (a free root)."""
    joints = [e for e in elements if isinstance(e, Joint) and e.motion() is not None]
    key = lambda p: "ground" if isinstance(p, Ground) else p.name  # noqa: E731
    leader = {key(p): key(p) for p in parts}
    leader["ground"] = "ground"

    def find(x):
        while leader[x] != x:
            leader[x] = leader[leader[x]]
            x = leader[x]
        return x

    edges = []
    for j in joints:
        ra, rb = find(key(j.a)), find(key(j.b))
        if ra != rb:  # the ground stays its component's leader
            leader[ra if rb == "ground" else rb] = rb if rb == "ground" else ra
            edges.append(j)
    # orient from the roots, breadth first; a point mass child needs a spherical joint
    placed, links, params, used = set(), [], [], []
    node = lambda p: "ground" if p is None else key(p)  # noqa: E731
    for start in [None, *parts]:  # None: the ground
        if node(start) in placed:
            continue
        if start is not None:
            rigid = isinstance(start, RigidBody)
            links.append(Link("root", tuple(int(i) for i in layout.frame(start)), (), True, rigid,
                              (3 if rigid else 0, 0, 3), start.name))
            params.append({})
        placed.add(node(start))
        frontier = [node(start)]
        while frontier:
            here = frontier.pop(0)
            for j in edges:
                if j in used:
                    continue
                ka, kb = key(j.a), key(j.b)
                if here not in (ka, kb) or {ka, kb} <= placed:
                    continue
                parent, child = (j.a, j.b) if ka == here else (j.b, j.a)
                if isinstance(child, PointMass) and not isinstance(j, Spherical):
                    continue  # the point mass will be a root and this joint a cut joint
                m = j.motion()
                rigid = isinstance(child, RigidBody)
                dof = (len(m.rot_a), len(m.rot_b), len(m.slide_u)) if rigid else (0, 0, len(m.slide_u))
                links.append(Link("joint", tuple(int(i) for i in layout.frame(child)),
                                  tuple(int(i) for i in layout.frame(parent)), parent is j.a, rigid, dof, j.name))
                params.append({"at_a": m.at_a, "at_b": m.at_b, "rot_a": m.rot_a, "rot_b": m.rot_b,
                               "slide_u": m.slide_u, "slide_w": m.slide_w})
                used.append(j)
                placed.add(key(child))
                frontier.append(key(child))
    owners = {p.name for p in parts if isinstance(p, RigidBody)} | {j.name for j in used}
    return tuple(links), tuple(params), owners


# --- the two maps (pure jax) -----------------------------------------------------------------


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


def configure(tree: Tree, Q0, u):
    """q_{n+1} = F(q_n, u) (n_q,): the configuration reached from Q0 (extended blocks) by the
    minimal increments u (n_dof,); every tree constraint holds exactly for any u."""
    pose = {}  # φ block -> (φ, R) of each placed part at n+1
    ground = len(Q0) - 4
    pose[ground] = (jnp.zeros(3, Q0.dtype), jnp.eye(3, dtype=Q0.dtype))
    Q1 = Q0[:-4]
    i = 0
    for link, p in zip(tree.links, tree.params):
        n = link.n_dof
        x = u[i:i + n]
        i += n
        phi0, R0 = _frame(Q0, link.child)
        if link.kind == "root":
            R1 = cayley(x[:3]) @ nearest_rotation(R0) if link.rigid else R0
            pose[link.child[0]] = (phi0 + x[-3:], R1)
            continue
        a, b = (link.parent, link.child) if link.parent_is_a else (link.child, link.parent)
        (pa, Ra), (pb, Rb) = _frame(Q0, a), _frame(Q0, b)
        R_rel = nearest_rotation(Ra.T @ Rb)  # round-off of the parent must not pile up down the tree
        p_rel = Ra.T @ (pb + Rb @ p["at_b"] - pa - Ra @ p["at_a"])
        ka, kb, _ = link.dof
        if link.rigid:
            R_rel = cayley(p["rot_a"].T @ x[:ka]) @ R_rel @ cayley(p["rot_b"].T @ x[ka:ka + kb])
        p_rel = p_rel + jnp.cross(p["slide_u"], p["slide_w"]).T @ x[ka + kb:]
        phi_p, R_p = pose[link.parent[0]]
        if link.parent_is_a:
            Rb1 = R_p @ R_rel if link.rigid else Rb
            x_b = phi_p + R_p @ p["at_a"] + R_p @ p_rel
            pose[link.child[0]] = (x_b - Rb1 @ p["at_b"], Rb1)
        else:
            Ra1 = R_p @ R_rel.T if link.rigid else Ra
            x_a = phi_p + R_p @ p["at_b"] - Ra1 @ p_rel
            pose[link.child[0]] = (x_a - Ra1 @ p["at_a"], Ra1)
    for link in tree.links:
        phi, R = pose[link.child[0]]
        Q1 = Q1.at[link.child[0]].set(phi)
        if link.rigid:
            Q1 = Q1.at[jnp.asarray(link.child[1:])].set(R.T)
    return Q1.ravel()


def null_space(tree: Tree, Q):
    """H2(q) (n_q, n_dof) as a matrix (tests, linearisation, predictors)."""
    return jax.jacfwd(partial(velocities, tree, Q))(jnp.zeros(tree.n_dof, Q.dtype))


