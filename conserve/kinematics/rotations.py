"""Rotations: user input -> rotation matrix (numpy, checked), and the director kinematics (jax).

Directors are the columns of the rotation matrix, R = [d1 d2 d3], so a body vector X sits at
X_i d_i in the inertial frame (Betsch and Steinmann 2001).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

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
        return quaternion_to_rotation(qv)
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
            return euler_to_rotation(seq, np.radians(angles) if degrees else angles)
        except ValueError as err:  # a sequence it does not know, e.g. "XQ" or "xYz"
            raise InvalidOrientation(f"body '{name}': euler sequence {seq!r}: {err} (axes from x, y, z; all upper "
                                     "case for intrinsic, all lower case for extrinsic rotations).") from None
    if orientation is None:
        return np.eye(3)
    if type(orientation).__module__.startswith("scipy.spatial"):  # a scipy Rotation
        return np.asarray(orientation.as_matrix(), dtype=float)
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


def elementary_rotation(axis: int, angle: float):
    """The (3, 3) rotation by ``angle`` (rad) about the coordinate axis ``axis`` (0, 1, 2)."""
    c, s = np.cos(angle), np.sin(angle)
    i, j = (axis + 1) % 3, (axis + 2) % 3
    R = np.eye(3)
    R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
    return R


def euler_to_rotation(seq: str, angles):
    """The rotation matrix of Euler angles (rad) about the axes of ``seq`` (1–3 of x, y, z, no axis
    twice in a row): upper case intrinsic (about the rotated axes, R = R₁R₂R₃), lower case
    extrinsic (about the fixed axes, R = R₃R₂R₁) — scipy's ``Rotation.from_euler`` convention.
    Raises ValueError for another sequence."""
    axes = seq.lower()
    if not 1 <= len(seq) <= 3 or set(axes) - set("xyz") or not (seq.isupper() or seq.islower()):
        raise ValueError("expected 1 to 3 axes from x, y, z, all upper or all lower case")
    if any(a == b for a, b in zip(axes, axes[1:])):
        raise ValueError("an axis repeated in a row")
    factors = [elementary_rotation("xyz".index(a), angle) for a, angle in zip(axes, np.atleast_1d(angles))]
    R = np.eye(3)
    for F in (factors if seq.isupper() else factors[::-1]):
        R = R @ F
    return R


def rotation_vector_to_rotation(rotvec):
    """The rotation matrix of a rotation vector θ n (rad; Rodrigues' formula)."""
    r = np.asarray(rotvec, dtype=float)
    theta = np.linalg.norm(r)
    K = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
    if theta < 1e-8:  # the series: I + K + K²/2
        return np.eye(3) + K + 0.5 * K @ K
    return np.eye(3) + np.sin(theta) / theta * K + (1.0 - np.cos(theta)) / theta**2 * K @ K


def quaternion_to_rotation(q):
    """The rotation matrices of unit quaternions (w, x, y, z), shape (..., 4) -> (..., 3, 3)."""
    w, x, y, z = np.moveaxis(np.asarray(q, dtype=float), -1, 0)
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                     np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                     np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def rotation_to_quaternion(R):
    """Unit quaternions (w, x, y, z) of rotation matrices R with shape (..., 3, 3), canonical:
    w ≥ 0 (at w = 0 the first non-zero of x, y, z positive). Shepperd's method: from the largest
    of w², x², y², z² (well conditioned for every rotation)."""
    R = np.asarray(R, dtype=float)
    flat = R.reshape(-1, 3, 3)
    d = np.stack([np.trace(flat, axis1=1, axis2=2), flat[:, 0, 0], flat[:, 1, 1], flat[:, 2, 2]], -1)
    m = lambda i, j: flat[:, i, j]  # noqa: E731
    candidates = np.stack([  # 4 q_i q (unnormalised) from q_i², i = w, x, y, z: (4 candidates, n, 4)
        np.stack([1 + d[:, 0], m(2, 1) - m(1, 2), m(0, 2) - m(2, 0), m(1, 0) - m(0, 1)], -1),
        np.stack([m(2, 1) - m(1, 2), 1 + 2 * d[:, 1] - d[:, 0], m(0, 1) + m(1, 0), m(0, 2) + m(2, 0)], -1),
        np.stack([m(0, 2) - m(2, 0), m(0, 1) + m(1, 0), 1 + 2 * d[:, 2] - d[:, 0], m(1, 2) + m(2, 1)], -1),
        np.stack([m(1, 0) - m(0, 1), m(0, 2) + m(2, 0), m(1, 2) + m(2, 1), 1 + 2 * d[:, 3] - d[:, 0]], -1)])
    q = candidates[np.argmax(d, axis=-1), np.arange(flat.shape[0])]
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    # canonical sign: w > 0, or at w = 0 the first non-zero of x, y, z positive
    lead = np.where(q[:, 0] != 0, q[:, 0], np.where(q[:, 1] != 0, q[:, 1], np.where(q[:, 2] != 0, q[:, 2], q[:, 3])))
    q *= np.where(lead < 0, -1.0, 1.0)[:, None]
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
