"""The kinematic tree: the spanning tree of the joints whose relative freedoms are the reduced
backend's minimal coordinates (Thompson §III–IV).

A spanning tree of the joints (in listing order, so loops are closed by their last-listed joint)
carries minimal coordinates: every part is either a *root* (a free body: translation and
rotation increments; a part on the ground: nothing) or the *child* of one tree joint (the joint's
relative freedoms, :class:`~conserve.model.joints.JointMotion`). Joints that close a loop and
joints without a relative-motion description are *cut joints*: their constraints (functions of q
alone) are kept as equations and eliminated from the dynamics by loop coordinates
(:mod:`conserve.backends.loops`). All other constraints (ropes, coordinate relations, user
constraints) are *cut rows* that keep their multipliers in the reduced step.

The tree is data (part of the Model, built at assembly, whose redundancy check lists tree rows
first); its kinematics — the null-space map H2 and the finite update — are the reduced
backend's, :mod:`conserve.backends.null_space`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import numpy as np

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
    """The spanning tree: ``links`` (static, tree order), the links' geometry ``params`` stacked
    over the links (:func:`link_geometry`), and the roles of the kept constraint rows, as indices
    into the step's multiplier vector:
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
                               "slide_u": m.slide_u, "slide_w": m.slide_w, "fixed": _fixed_offsets(m)})
                used.append(j)
                placed.add(key(child))
                frontier.append(key(child))
    owners = {p.name for p in parts if isinstance(p, RigidBody)} | {j.name for j in used}
    return tuple(links), tuple(params), owners


def link_geometry(links, params):
    """The links' geometry stacked (L, ...) in one padded form, so the tree's kinematics is one
    vectorised map over the links (:mod:`conserve.backends.null_space`): joint points at_a, at_b
    (L, 3) in a's and b's axes; rotation axes rot_a, rot_b (L, 3, 3) and slide vector pairs
    slide_u, slide_w (L, 3, 3), their rows past the link's own (k_a, k_b, k_s) zero; fixed
    (L, 3, 3) = I − P, P the projection onto the slide directions. A root is a free joint to the
    ground: its rotations about the inertial axes (none for a point mass), its slides along them
    (u × w = e_k), nothing fixed."""
    eye, zero = np.eye(3), np.zeros((3, 3))
    rows = {k: [] for k in ("at_a", "at_b", "rot_a", "rot_b", "slide_u", "slide_w", "fixed")}

    def padded(m, k):  # the first k rows of m (., 3), zero rows up to 3
        return np.vstack([np.asarray(m, float).reshape(-1, 3)[:k], np.zeros((3 - k, 3))])

    for link, p in zip(links, params):
        ka, kb, ks = link.dof
        if link.kind == "root":
            p = {"at_a": np.zeros(3), "at_b": np.zeros(3), "rot_a": eye[:ka], "rot_b": zero[:0],
                 "slide_u": eye[[1, 2, 0]], "slide_w": eye[[2, 0, 1]], "fixed": zero}
        for key, k in (("rot_a", ka), ("rot_b", kb), ("slide_u", ks), ("slide_w", ks)):
            rows[key].append(padded(p[key], k))
        for key in ("at_a", "at_b", "fixed"):
            rows[key].append(np.asarray(p[key], float))
    return {k: np.stack(v) if v else np.zeros((0, 3) if k in ("at_a", "at_b") else (0, 3, 3))
            for k, v in rows.items()}


def _fixed_offsets(motion):
    """I − P (3, 3): P projects a joint offset x_B − x_A (in a's axes) onto the joint's slide
    directions u × w; the rest is fixed at 0 by the joint's equations."""
    S = np.cross(motion.slide_u, motion.slide_w).reshape(-1, 3)  # (k_s, 3)
    P = S.T @ np.linalg.solve(S @ S.T, S) if len(S) else np.zeros((3, 3))
    return np.eye(3) - P
