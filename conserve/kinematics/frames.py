"""Material points and vectors of director frames, evaluated for many elements at once.

Every part is a *frame* of four coordinate blocks (3-vectors) in the extended block array
Q_ext = [q.reshape(-1, 3); GROUND_BLOCKS]: its reference point φ and its directors d1, d2, d3.
A rigid body owns its four blocks; a point mass owns φ and borrows the ground's directors
(its body axes are the inertial axes); the ground is the constant frame (0, e1, e2, e3).
A material point with body coordinates X is x = φ + X_i d_i and a material vector is
u = U_i d_i: both are *linear* in q, which makes every joint built from them quadratic.
"""

import jax.numpy as jnp
import numpy as np

#: The ground frame: origin and inertial axes, appended below the unknown blocks.
GROUND_BLOCKS = np.vstack([np.zeros(3), np.eye(3)])


def material_point(Q, frame, X):
    """x = φ + X_i d_i for frames (n, 4) of block indices into Q (m, 3), body points X (n, 3)."""
    return Q[frame[:, 0]] + material_vector(Q, frame, X)


def material_vector(Q, frame, U):
    """u = U_i d_i for frames (n, 4) and body-fixed vectors U (n, 3); returns (n, 3)."""
    return jnp.einsum("ni,nij->nj", U, Q[frame[:, 1:]])
