"""Material points and vectors of director frames, evaluated for many elements at once.

Every part is a *frame* of four coordinate blocks (3-vectors) in the extended block array
Q_ext = [q.reshape(-1, 3); GROUND_BLOCKS]: its reference point φ and its directors d1, d2, d3.
A rigid body owns its four blocks; a point mass owns φ and borrows the ground's directors
(its body axes are the inertial axes); the ground is the constant frame (0, e1, e2, e3).
A material point with body coordinates X is x = φ + X_i d_i and a material vector is
u = U_i d_i: both are *linear* in q, which makes every joint built from them quadratic.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .tensor import contract

#: The ground frame: origin and inertial axes, appended below the unknown blocks.
GROUND_BLOCKS = np.vstack([np.zeros(3), np.eye(3)])

#: Names of the inertial (or body) axes accepted wherever a direction is given: a joint's axis or
#: normal, a rotor's spin axis ("-z" is −e3; upper case too).
AXIS_NAMES = {f"{sign}{name}": (1.0 if sign == "" else -1.0) * np.eye(3)[k]
              for k, name in enumerate("xyz") for sign in ("", "-", "+")}


def named_direction(value):
    """The unit vector of an axis name of ``AXIS_NAMES`` ('x', 'y', 'z', '-x', '-y', '-z',
    case-insensitive), a copy; anything else unchanged (a 3-vector is checked by its user)."""
    if isinstance(value, str) and value.strip().lower() in AXIS_NAMES:
        return AXIS_NAMES[value.strip().lower()].copy()
    return value


def material_point(Q, frame, X):
    """x = φ + X_i d_i for frames (n, 4) of block indices into Q (m, 3), body points X (n, 3)."""
    return Q[frame[:, 0]] + material_vector(Q, frame, X)


def material_vector(Q, frame, U):
    """u = U_i d_i for frames (n, 4) and body-fixed vectors U (n, 3); returns (n, 3)."""
    return contract("ni,nij->nj", U, Q[frame[:, 1:]])


def point_magnitude(Q, frame, X):
    """|φ| + |X_i| |d_i| componentwise (n, 3): the size of the terms that make up the material point
    (its round-off is ε times this; a point 10⁷ m from the origin is known to ~2e-9 m)."""
    return jnp.abs(Q[frame[:, 0]]) + vector_magnitude(Q, frame, X)


def vector_magnitude(Q, frame, U):
    """|U_i| |d_i| componentwise (n, 3): the size of the terms of the material vector."""
    return contract("ni,nij->nj", jnp.abs(U), jnp.abs(Q[frame[:, 1:]]))


class Frame(NamedTuple):
    """One part's configuration as user functions see it (constraints, potentials).

    position : (3,) reference point φ (centre of mass) in m; directors : (3, 3), d_i in row i.
    Both are linear in q: a function quadratic in them is quadratic in q.
    """

    position: jax.Array
    directors: jax.Array

    @property
    def rotation(self):
        """R = [d1 d2 d3] (orthonormal at the nodes)."""
        return self.directors.T

    def point(self, X):
        """Inertial position of the body point X (3,): φ + X_i d_i."""
        return self.position + jnp.asarray(X) @ self.directors

    def vector(self, U):
        """Inertial image of the body vector U (3,): U_i d_i."""
        return jnp.asarray(U) @ self.directors


def frames_of(Q, frames):
    """The Frames of parts with block indices ``frames`` (k, 4)."""
    return [Frame(Q[f[0]], Q[f[1:]]) for f in frames]
