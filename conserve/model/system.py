"""System: the user's collection of parts, assembled once into a :class:`Model` (DESIGN §2).

Assembly fixes the coordinate layout (parts in order of appearance, each owning consecutive
3-vector blocks), groups elements by kind, and checks the initial state: positions and
velocities on the constraints, constraint Jacobian of full row rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from ..errors import InconsistentInitialState, ModelError
from .assembled import Model, State
from .bodies import Ground, Part
from .joints import Joint
from .terms import stack_terms

#: Largest accepted initial constraint residual (m for joints, 1 for director constraints).
POSITION_TOL = 1e-9
#: Largest accepted initial velocity-constraint residual |G v0|, relative to 1 + max|v0|.
VELOCITY_TOL = 1e-9
#: Relative singular-value threshold below which constraint rows count as dependent.
RANK_TOL = 1e-10


@dataclass(frozen=True)
class Layout:
    """Where everything lives in the flat arrays; Python-side only (never traced).

    Attributes
    ----------
    parts : list of Part, the parts with coordinates, in block order
    offsets : dict name -> first block index of the part
    constraint_rows : list of (owner name, equation) for each row of g(q)
    """

    parts: list
    offsets: dict
    constraint_rows: list

    @property
    def n_blocks(self):
        return sum(p.n_blocks for p in self.parts)

    def frame(self, part):
        """Block indices (4,) of the part's frame (φ, d1, d2, d3) in the extended block array."""
        g = self.n_blocks
        if isinstance(part, Ground):
            return np.arange(g, g + 4)
        o = self.offsets[part.name]
        if part.n_blocks == 4:
            return np.arange(o, o + 4)
        return np.array([o, g + 1, g + 2, g + 3])  # point mass: inertial axes

    def describe(self):
        """{name: (kind, first block, number of blocks)} for saving with a Solution."""
        return {p.name: (type(p).__name__, self.offsets[p.name], p.n_blocks) for p in self.parts}


@dataclass(frozen=True)
class Assembly:
    """An assembled system: the model (traced), the layout (Python) and the initial state."""

    model: Model
    layout: Layout
    initial_state: State


class System:
    """A multibody system: bodies, joints and force fields.

    >>> system = cs.System([top, cs.Spherical(top, cs.ground, at=[0, 0, 0]), cs.Gravity()])

    Bodies that appear only in joints are added automatically. Names must be unique.
    """

    def __init__(self, elements=()):
        self.elements = []
        for e in elements:
            self.add(e)

    def add(self, element):
        if not hasattr(element, "terms"):
            raise ModelError(f"System: {element!r} is not a body, joint or force.")
        if isinstance(element, Ground):
            return self
        self.elements.append(element)
        return self

    def parts(self):
        """Parts with coordinates, in order of first appearance (listed or joined)."""
        seen = {}
        for e in self.elements:
            for p in (e,) if isinstance(e, Part) else e.parts() if isinstance(e, Joint) else ():
                if isinstance(p, Ground):
                    continue
                if p.name in seen and seen[p.name] is not p:
                    raise ModelError(f"System: two different parts are named '{p.name}'; names must be unique.")
                seen[p.name] = p
        return list(seen.values())

    def assemble(self) -> Assembly:
        """Fix the layout, build the model, check the initial state (see module docstring)."""
        parts = self.parts()
        names = [p.name for p in parts] + [getattr(e, "name", None) for e in self.elements
                                            if not isinstance(e, Part)]
        dup = sorted({n for n in names if n is not None and names.count(n) > 1})
        if dup:
            raise ModelError(f"System: the names {dup} are used more than once; names must be unique.")
        offsets, o = {}, 0
        for p in parts:
            offsets[p.name] = o
            o += p.n_blocks
        layout = Layout(parts, offsets, [])
        terms = [t for p in parts for t in p.terms(layout)]
        terms += [t for e in self.elements if not isinstance(e, Part) for t in e.terms(layout)]
        constraints, potentials = [], []
        for kind, params, owners in stack_terms(terms):
            params = {k: jnp.asarray(v) for k, v in params.items()}
            if hasattr(kind, "residual"):
                constraints.append((kind, params))
                layout.constraint_rows.extend((o, r) for o in owners for r in kind.rows)
            else:
                potentials.append((kind, params))
        mu = scipy.linalg.block_diag(*[p.mass_blocks() for p in parts])
        translational = np.concatenate([[1.0] + [0.0] * (p.n_blocks - 1) for p in parts])
        model = Model(
            mu=jnp.asarray(mu),
            translational=jnp.asarray(translational),
            rigid_frames=jnp.asarray(np.array([layout.frame(p) for p in parts if p.n_blocks == 4],
                                              dtype=np.int64).reshape(-1, 4)),
            constraint_params=tuple(p for _, p in constraints),
            potential_params=tuple(p for _, p in potentials),
            constraint_kinds=tuple(k for k, _ in constraints),
            potential_kinds=tuple(k for k, _ in potentials),
        )
        q0 = np.concatenate([p.initial_blocks().ravel() for p in parts])
        v0 = np.concatenate([p.initial_rates().ravel() for p in parts])
        state = State(jnp.asarray(q0), jnp.asarray(v0))
        check_initial_state(model, layout, state)
        return Assembly(model, layout, state)


def _rows_by_owner(layout, values):
    out = {}
    for (owner, row), val in zip(layout.constraint_rows, values):
        out.setdefault(owner, []).append((row, val))
    return out


def check_initial_state(model: Model, layout: Layout, state: State):
    """Raise InconsistentInitialState if q0 or v0 violates a constraint, ModelError if the
    constraint Jacobian G(q0) has dependent rows (redundant constraints)."""
    if model.n_constraints == 0:
        return
    g = np.asarray(model.constraints(state.q))
    G = np.asarray(jax.jacfwd(model.constraints)(state.q))
    gdot = G @ np.asarray(state.v)
    for owner, rows in _rows_by_owner(layout, np.abs(g)).items():
        worst = max(v for _, v in rows)
        if worst > POSITION_TOL:
            detail = ", ".join(f"{r}: {v:.3g}" for r, v in rows if v > POSITION_TOL)
            raise InconsistentInitialState(
                f"'{owner}': the initial positions violate its constraint by {worst:.3g} "
                f"({detail}); place the parts so that the joint is closed (e.g. give the joint "
                "as at= a world point, from which both body points are computed)."
            )
    vscale = 1.0 + np.max(np.abs(state.v))
    for owner, rows in _rows_by_owner(layout, gdot).items():
        vals = np.array([v for _, v in rows])
        if np.max(np.abs(vals)) > VELOCITY_TOL * vscale:
            raise InconsistentInitialState(
                f"'{owner}': the initial velocities violate its constraint: d/dt of "
                f"({', '.join(r for r, _ in rows)}) = {np.array2string(vals, precision=6)}; "
                "give velocities the joint allows, e.g. for a body pinned at point r0 with angular "
                "velocity ω the centre of mass needs velocity ω × (x_c − r0)."
            )
    # redundant constraints: QR with column pivoting on Gᵀ picks independent rows
    _, R, piv = scipy.linalg.qr(G.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > RANK_TOL * max(diag[0], 1.0))) if diag.size else 0
    if rank < G.shape[0]:
        dependent = sorted(piv[rank:])
        which = ", ".join(f"{layout.constraint_rows[i][0]} ({layout.constraint_rows[i][1]})" for i in dependent)
        raise ModelError(
            f"redundant constraints: {G.shape[0] - rank} of {G.shape[0]} constraint equations are "
            f"dependent on the others: {which}. Remove or replace joints so that each freedom is "
            "constrained once."
        )
