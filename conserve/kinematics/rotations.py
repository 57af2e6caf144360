"""Rotations: user input -> rotation matrix (numpy, checked), and the director kinematics (jax).

Directors are the columns of the rotation matrix, R = [d1 d2 d3], so a body vector X sits at
X_i d_i in the inertial frame (Betsch and Steinmann 2001).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from scipy.spatial.transform import Rotation

from ..errors import InvalidOrientation

#: Largest accepted |RᵀR − I| (max-norm) or | |quaternion| − 1 | for user-given orientations.
ORTHONORMALITY_TOL = 1e-9


def as_rotation_matrix(name, orientation=None, quaternion=None, euler=None, degrees=False):
    """The rotation matrix R = [d1 d2 d3] of body `name` from exactly one description.

    Parameters
    ----------
    orientation : (3, 3) array_like or scipy Rotation, optional
        Rotation matrix whose columns are the body axes in the inertial frame.
    quaternion : (4,) array_like, optional
        Unit quaternion (w, x, y, z), scalar first.
    euler : (str, (3,) array_like), optional
        Sequence and angles in rad (in degrees with ``degrees=True``), as scipy's
        ``Rotation.from_euler`` (upper case: intrinsic, e.g. ``("ZXZ", (psi, theta, phi))``;
        lower case: extrinsic).
    degrees : bool, the Euler angles are in degrees

    Raises
    ------
    InvalidOrientation
        Non-orthonormal matrix, reflection (det −1), non-unit quaternion, non-finite values.
    """
    given = [x is not None for x in (orientation, quaternion, euler)]
    if sum(given) > 1:
        raise InvalidOrientation(
            f"body '{name}': give only one of orientation=, quaternion=, euler=."
        )
    if quaternion is not None:
        qv = np.asarray(quaternion, dtype=float)
        if qv.shape != (4,) or not np.all(np.isfinite(qv)):
            raise InvalidOrientation(
                f"body '{name}': quaternion must be 4 finite numbers (w, x, y, z), got {quaternion!r}."
            )
        if abs(np.linalg.norm(qv) - 1.0) > ORTHONORMALITY_TOL:
            raise InvalidOrientation(
                f"body '{name}': quaternion {qv.tolist()} has norm {np.linalg.norm(qv):.12g}, not 1; "
                "normalise it (q / |q|)."
            )
        return Rotation.from_quat(qv, scalar_first=True).as_matrix()
    if euler is not None:
        try:
            seq, angles = euler
            angles = np.atleast_1d(np.asarray(angles, dtype=float))
            valid = isinstance(seq, str) and angles.shape == (len(seq),) and np.all(np.isfinite(angles))
        except (TypeError, ValueError):
            valid = False
        if not valid:
            raise InvalidOrientation(
                f"body '{name}': euler must be (sequence, angles) with one finite angle in "
                f"{'degrees' if degrees else 'rad'} per axis, e.g. ('ZXZ', (psi, theta, phi)); got {euler!r}.")
        try:
            return Rotation.from_euler(seq, angles, degrees=bool(degrees)).as_matrix()
        except ValueError as err:  # scipy's words for a sequence it does not know, e.g. "XQ" or "xYz"
            raise InvalidOrientation(f"body '{name}': euler sequence {seq!r}: {err} (axes from x, y, z; all upper "
                                     "case for intrinsic, all lower case for extrinsic rotations).") from None
    if orientation is None:
        return np.eye(3)
    if isinstance(orientation, Rotation):
        return orientation.as_matrix()
    R = np.asarray(orientation, dtype=float)
    if R.shape != (3, 3) or not np.all(np.isfinite(R)):
        raise InvalidOrientation(
            f"body '{name}': orientation must be a finite 3x3 rotation matrix, got shape {R.shape}."
        )
    err = np.max(np.abs(R.T @ R - np.eye(3)))
    if err > ORTHONORMALITY_TOL:
        raise InvalidOrientation(
            f"body '{name}': orientation is not orthonormal (max |RᵀR − I| = {err:.3g} > "
            f"{ORTHONORMALITY_TOL:g}); orthonormalise it, e.g. "
            "scipy.spatial.transform.Rotation.from_matrix(R).as_matrix()."
        )
    if np.linalg.det(R) < 0:
        raise InvalidOrientation(
            f"body '{name}': orientation has det(R) = −1 (a reflection, left-handed axes); "
            "flip the sign of one column to make the axes right-handed."
        )
    U, _, Vt = np.linalg.svd(R)
    return U @ Vt  # the nearest rotation: removes the accepted ≤ 1e-9 error, so g(q0) is round-off


def rotation_to_quaternion(R):
    """Unit quaternions (w, x, y, z), w ≥ 0, of rotation matrices R with shape (..., 3, 3)."""
    R = np.asarray(R)
    q = Rotation.from_matrix(R.reshape(-1, 3, 3)).as_quat(canonical=True, scalar_first=True)
    return q.reshape(R.shape[:-2] + (4,))


def angular_velocity(directors, director_rates):
    """Inertial angular velocity ω = ½ Σ_i d_i × d_i' (from d_i' = ω × d_i for orthonormal d_i).

    directors, director_rates : (..., 3, 3) with d_i in row i. Returns (..., 3) in rad/s.
    """
    return 0.5 * jnp.sum(jnp.cross(directors, director_rates), axis=-2)


def skew(w):
    """The matrix ŵ with ŵ x = w × x, for w of shape (..., 3)."""
    z = jnp.zeros_like(w[..., 0])
    return jnp.stack(
        [
            jnp.stack([z, -w[..., 2], w[..., 1]], -1),
            jnp.stack([w[..., 2], z, -w[..., 0]], -1),
            jnp.stack([-w[..., 1], w[..., 0], z], -1),
        ],
        -2,
    )


def solve3(A, b):
    """x = A⁻¹ b for batches of 3×3 systems A (..., 3, 3), b (..., 3), by cofactors.

    Closed form instead of ``jnp.linalg.solve``: XLA's LU call costs tens of µs per tiny batch on
    the CPU, which dominated the step of small models."""
    c0 = jnp.cross(A[..., 1, :], A[..., 2, :])
    c1 = jnp.cross(A[..., 2, :], A[..., 0, :])
    c2 = jnp.cross(A[..., 0, :], A[..., 1, :])
    det = jnp.sum(A[..., 0, :] * c0, axis=-1)
    adj_b = c0 * b[..., 0:1] + c1 * b[..., 1:2] + c2 * b[..., 2:3]  # adj(A) b = Σ_i b_i (row_j × row_k)
    return adj_b / det[..., None]


def cayley(x):
    """Cayley map cay(x) = (I − ½x̂)⁻¹(I + ½x̂), a rotation by 2 atan(|x|/2) about x; x (..., 3).

    The midpoint rule turns a free spin ω by exactly cay(hω) per step (an angle 2 atan(ωh/2), not
    ωh), which makes it the Newton predictor for fast-spinning bodies.
    """
    return jnp.eye(3, dtype=jnp.result_type(x)) + cayley_increment(x)


def cayley_increment(x):
    """cay(x) − I = 4 (x̂ + ½x̂²) / (4 + |x|²) for x (..., 3), in closed form (no solve, and
    without the cancellation of cay(x) − I: a small turn keeps its relative accuracy, as the
    reduced backend's increments need)."""
    X = skew(x)
    X2 = jnp.sum(X[..., :, :, None] * X[..., None, :, :], axis=-2)  # x̂², a product and sum (see tensor.py)
    return (4.0 / (4.0 + jnp.sum(x * x, axis=-1)))[..., None, None] * (X + 0.5 * X2)


def rotation_correction(X):
    """N(X) − X = ½ (X⁻ᵀ − X) (3, 3), for X within round-off of a rotation: N(X) = ½ (X + X⁻ᵀ) is
    one Newton step of the polar decomposition towards the nearest rotation, which removes a
    symmetric error S of X = (I + S) R to O(|S|²) (keeps chained products of rotations from
    accumulating round-off); the correction is computed without cancelling X."""
    cof = jnp.stack([jnp.cross(X[1], X[2]), jnp.cross(X[2], X[0]), jnp.cross(X[0], X[1])])
    return 0.5 * (cof / jnp.sum(X[0] * cof[0]) - X)
