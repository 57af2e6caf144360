"""Newton factors carried across steps, turned with the bodies (co-rotated simplified Newton).

The director step's equations are objective: turning every body's coordinates (position and
directors) and every vector constraint row by one rotation R turns the Newton matrix to
Q J Qᵀ, with Q = diag(R, …, R, 1, …, 1) (R on each 3-block of coordinates and on each point
coincidence's three rows and multipliers, 1 on scalar rows: director products, distances, rotor
unknowns). The mass matrix kron(μ, I3), the constraint Hessians kron(·, I3) and the gradients of
linear joint rows [I, X1 I, X2 I, X3 I] are unchanged by it; only the gradients of the quadratic
rows turn with the directors. So a body spinning by an angle φ per step changes its Newton matrix
by O(φ) from step to step, and factors carried from the last step contract the corrections only
at that rate (a heavy top at Δt = 1e-3, φ = 0.14 rad: rate 0.14; the chord then often grows the
residual and Newton takes a fresh Jacobian every step), while Q J_old Qᵀ, with R = D_n D_oldᵀ the
rotation of each body's directors since the factors were made, misses J only by how its motion
changed otherwise (the same top: rate 1.2e-3).

The chord with carried factors is then δ = Q J_old⁻¹ Qᵀ (−r): two rotations of a vector per
chord. Each 3-block takes its own body's rotation; a point coincidence the rotation of its first
body (of its second if the first is the ground or a point mass); point masses and the ground
none. Between bodies that turn differently the coupling blocks of a joint are then off by their
relative rotation per step, so trees gain less than a single body; the step is exact either way
(the chords are tested as every chord, :func:`~conserve.discrete.newton.newton_solve`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..model.joints import PointCoincidence


class Turn(NamedTuple):
    """Q of the module docstring for one step: ``rotations`` (k, 3, 3), one per 3-block of
    unknowns ``triples`` (k, 3) (static int numpy), the other unknowns untouched; ``reference``
    (n_b, 3, 3) the bodies' directors (in rows) now, kept with factors made in this step."""

    rotations: object
    triples: np.ndarray
    reference: object

    def forward(self, v):
        """Q v (n,)."""
        return _rotated(v, self.rotations, self.triples)

    def backward(self, v):
        """Qᵀ v (n,)."""
        return _rotated(v, jnp.swapaxes(self.rotations, 1, 2), self.triples)

    def unless(self, flag):
        """This turn, or the identity where ``flag`` (bool) holds."""
        return self._replace(rotations=jnp.where(flag, jnp.eye(3, dtype=self.rotations.dtype), self.rotations))


def _rotated(v, rotations, triples):
    """v with each triple of entries v[triples[j]] replaced by rotations[j] @ v[triples[j]] (no scatter:
    the turned triples and the untouched entries are concatenated and put in order by one gather)."""
    rest = np.setdiff1d(np.arange(v.shape[0]), triples.ravel())
    turned = jnp.einsum("kij,kj->ki", rotations, v[triples]).ravel()
    order = np.argsort(np.concatenate([triples.ravel(), rest]))
    return jnp.concatenate([turned, v[rest]])[order]


def turns_with_the_bodies(model) -> bool:
    """Whether the model's Newton matrix changes from step to step only as the module docstring
    has it (by the bodies' rotations, the multipliers and how the motion changes otherwise): no
    potential but ``uniform`` ones (uniform gravity: no force gradient) and no applied loads.
    A field's force gradient changes with where a body is, not with how it turns, which turning
    the factors does not follow, and the chords with carried factors then leave errors of one
    sign, which drift the energy (an eccentric orbit, ``conserve.problems.KeplerOrbit``). Joint
    springs, dampers and motors act on the joints' relative coordinates and keep it
    (measurements: benchmarks/results/defaults.md, section ``turns_with_the_bodies``)."""
    return all(kind.uniform for kind in model.potential_kinds) and not model.load_kinds


def directors(model, q):
    """(n_b, 3, 3) each rigid body's directors d1, d2, d3 in rows (numpy for concrete arrays: a run's
    start then costs no jax dispatch)."""
    if not any(isinstance(a, jax.core.Tracer) for a in (q, model.rigid_frames)):
        return np.asarray(q).reshape(-1, 3)[np.asarray(model.rigid_frames)[:, 1:]]
    return q.reshape(-1, 3)[model.rigid_frames[:, 1:]]


def turn(model, q, reference):
    """The :class:`Turn` of the factors made at bodies' directors ``reference`` (n_b, 3, 3) to the
    state q (n_q,): each body's R = D(q) D_refᵀ (D with the directors in columns), applied to its
    four coordinate blocks and to the point coincidences it is the first body of (see the module
    docstring). The unknowns start with the n_q coordinates and the kept constraint rows; their
    positions are static, the bodies' blocks come from the model's (traced) frames."""
    now = directors(model, q)
    R = jnp.einsum("bki,bkj->bij", now, reference)  # Σ_k d_k(now) d_k(ref)ᵀ
    frames = model.rigid_frames
    n_blocks = q.shape[0] // 3
    # each coordinate block's body (one-hot, rows of zeros for point masses): gathers, no scatter
    owner = jnp.any(jnp.arange(n_blocks)[:, None, None] == frames[None, :, :], axis=2).astype(q.dtype)
    rotations = [_owned(owner, R)]
    triples = [np.arange(3 * n_blocks).reshape(-1, 3)]
    kept = {row: i for i, row in enumerate(model.constraint_keep)}
    for kind, p, rows in model.constraint_groups():
        if not isinstance(kind, PointCoincidence):
            continue
        first = (p["frame_a"][:, None, :] == frames[None, :, :]).all(axis=2)  # (n_e, n_b)
        second = (p["frame_b"][:, None, :] == frames[None, :, :]).all(axis=2)
        body = jnp.where(first.any(axis=1, keepdims=True), first, second).astype(q.dtype)
        row = np.arange(rows.start, rows.stop).reshape(-1, 3)
        whole = np.array([all(r in kept for r in e) for e in row], bool)  # redundant rows dropped: untouched
        if whole.any():
            rotations.append(_owned(body[np.flatnonzero(whole)], R))
            triples.append(q.shape[0] + np.array([[kept[r] for r in e] for e in row[whole]]))
    return Turn(jnp.concatenate(rotations), np.concatenate(triples), now)


def _owned(owner, R):
    """(k, 3, 3) the rotation R of each row's body (owner (k, n_b) one-hot), the identity for rows of none."""
    alone = 1.0 - jnp.sum(owner, axis=1)
    return jnp.einsum("kb,bij->kij", owner, R) + alone[:, None, None] * jnp.eye(3, dtype=R.dtype)
