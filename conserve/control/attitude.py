"""Attitude control: rotation parametrisations, attitude and rate errors, reaction wheel allocation, a PD/PID law.

Conventions (the library's). A rotation matrix R (3, 3) maps body components to inertial ones, x = R X, so
its columns are the body axes d1, d2, d3 in inertial components. Angular velocities ω are in body axes
(rad/s). Quaternions are (w, x, y, z), scalar first, multiplied by Hamilton's rule, and q and −q are the
same rotation. Modified Rodrigues parameters (MRP) are σ = q_vec / (1 + w) = tan(θ/4) n. Angles in rad,
torques in N m, angular momenta in N m s.

All functions are jax.numpy, float64, traceable under jit, vmap and grad; the leading axes ``...`` of their
arguments are batch axes unless said otherwise.

References
----------
Lee, Leok, McClamroch (2010), Geometric tracking control of a quadrotor UAV on SE(3), IEEE CDC, 5420–5425.
Shepperd (1978), Quaternion from rotation matrix, J. Guidance and Control 1(3), 223–224.
Schaub, Junkins (2018), Analytical Mechanics of Space Systems, 4th ed., AIAA (MRPs and their shadow set).
Wie, Weiss, Arapostathis (1989), Quaternion feedback regulator for spacecraft eigenaxis rotations,
J. Guidance 12(3), 375–380.
Markley, Crassidis (2014), Fundamentals of Spacecraft Attitude Determination and Control, Springer, ch. 7
(reaction wheel torque distribution and momentum management).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics.rotations import skew

#: the attitude errors :func:`attitude_error` knows
ERROR_KINDS = ("rotation", "quaternion", "mrp")


def hat(w):
    """The skew matrix ŵ (..., 3, 3) of vectors w (..., 3), with ŵ x = w × x."""
    return skew(w)


def vee(W):
    """The axial vector (..., 3) of the skew part ½(W − Wᵀ) of matrices W (..., 3, 3); vee(hat(w)) = w."""
    return 0.5 * jnp.stack([W[..., 2, 1] - W[..., 1, 2], W[..., 0, 2] - W[..., 2, 0], W[..., 1, 0] - W[..., 0, 1]], -1)


def _transpose(R):
    return jnp.swapaxes(R, -1, -2)


def rotation_from_axis_angle(axis, angle):
    """The rotation by ``angle`` (rad, right hand) about ``axis`` (Rodrigues' formula).

    axis : (..., 3), any non-zero length (normalised here); angle : (...). Returns R (..., 3, 3),
    R = I + sin θ n̂ + (1 − cos θ) n̂². The axis is normalised apart from the angle, so R is smooth in the
    angle everywhere, θ = 0 included (dR/dθ = n̂ there); 1 − cos θ is evaluated as 2 sin²(θ/2).
    """
    axis = jnp.asarray(axis)
    n = axis / jnp.linalg.norm(axis, axis=-1, keepdims=True)
    K = skew(n)
    angle = jnp.asarray(angle)[..., None, None]
    return jnp.eye(3) + jnp.sin(angle) * K + 2.0 * jnp.sin(0.5 * angle) ** 2 * (K @ K)


def quaternion_from_rotation(R):
    """The unit quaternion (..., 4), (w, x, y, z), of rotation matrices R (..., 3, 3), with w ≥ 0.

    Shepperd's method: each of w, x, y, z gives the quaternion as 4 q_i q / (4 q_i²); the largest of
    4w² = 1 + tr R and 4x² = 1 + 2 R₁₁ − tr R, ... (the largest of tr R, R₁₁, R₂₂, R₃₃) is chosen, so the
    division is well conditioned for every rotation, 180° included. At w = 0 (180°) the sign is the one of
    the chosen candidate.
    """
    m = lambda i, j: R[..., i, j]  # noqa: E731
    trace = m(0, 0) + m(1, 1) + m(2, 2)
    candidates = jnp.stack([  # (..., 4 candidates, 4 components), candidate i = 4 q_i q
        jnp.stack([1 + trace, m(2, 1) - m(1, 2), m(0, 2) - m(2, 0), m(1, 0) - m(0, 1)], -1),
        jnp.stack([m(2, 1) - m(1, 2), 1 + 2 * m(0, 0) - trace, m(0, 1) + m(1, 0), m(0, 2) + m(2, 0)], -1),
        jnp.stack([m(0, 2) - m(2, 0), m(0, 1) + m(1, 0), 1 + 2 * m(1, 1) - trace, m(1, 2) + m(2, 1)], -1),
        jnp.stack([m(1, 0) - m(0, 1), m(0, 2) + m(2, 0), m(1, 2) + m(2, 1), 1 + 2 * m(2, 2) - trace], -1)], -2)
    largest = jnp.argmax(jnp.stack([trace, m(0, 0), m(1, 1), m(2, 2)], -1), axis=-1)
    q = jnp.take_along_axis(candidates, largest[..., None, None], axis=-2)[..., 0, :]
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    return jnp.where(q[..., :1] < 0, -q, q)


def rotation_from_quaternion(q):
    """The rotation matrix (..., 3, 3) of unit quaternions q (..., 4), (w, x, y, z) (not normalised here)."""
    w, x, y, z = jnp.moveaxis(jnp.asarray(q), -1, 0)
    return jnp.stack([jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                      jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                      jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def quaternion_multiply(p, q):
    """Hamilton's product p ⊗ q (..., 4) of quaternions (w, x, y, z); R(p ⊗ q) = R(p) R(q)."""
    p, q = jnp.asarray(p), jnp.asarray(q)
    pw, pv, qw, qv = p[..., :1], p[..., 1:], q[..., :1], q[..., 1:]
    return jnp.concatenate([pw * qw - jnp.sum(pv * qv, -1, keepdims=True),
                            pw * qv + qw * pv + jnp.cross(pv, qv)], -1)


def quaternion_conjugate(q):
    """The conjugate (w, −x, −y, −z) (..., 4): the inverse rotation of a unit quaternion."""
    q = jnp.asarray(q)
    return q * jnp.array([1.0, -1.0, -1.0, -1.0])


def mrp_from_quaternion(q):
    """The modified Rodrigues parameters σ = q_vec / (1 + w) = tan(θ/4) n (..., 3) of unit quaternions (..., 4).

    The shadow set is chosen so that ‖σ‖ ≤ 1 (rotation angle θ ≤ π): q's sign is flipped first where w < 0.
    """
    q = jnp.asarray(q)
    q = jnp.where(q[..., :1] < 0, -q, q)
    return q[..., 1:] / (1 + q[..., :1])


def mrp_from_rotation(R):
    """The modified Rodrigues parameters (..., 3), ‖σ‖ ≤ 1, of rotation matrices R (..., 3, 3)."""
    return mrp_from_quaternion(quaternion_from_rotation(R))


def attitude_error(R, R_target, kind="rotation"):
    """The attitude error e (..., 3), in body axes, of attitude R from R_target (both (..., 3, 3)).

    The error rotation is R_e = R_targetᵀ R, by θ (0 ≤ θ ≤ π) about n; its axis n has the same components in
    body and target axes. ``kind`` (a Python string, static) selects the measure of it:

    * ``"rotation"``: e = ½ vee(R_targetᵀ R − Rᵀ R_target) = sin θ n, the geometric error of Lee, Leok and
      McClamroch (2010); smooth everywhere, but it vanishes again at θ = π.
    * ``"quaternion"``: e = 2 sign(w_e) q_e,vec = 2 sin(θ/2) n with q_e = q_target* ⊗ q (computed as the
      quaternion of R_e with w_e ≥ 0), the quaternion feedback error (Wie et al. 1989).
    * ``"mrp"``: e = 4 σ(q_e) = 4 tan(θ/4) n, the MRP error with ‖σ‖ ≤ 1 (Schaub and Junkins).

    All three are zero at the target, point along n, and equal the rotation vector θ n of R_e to third order
    (θ − θ³/6, θ − θ³/24, θ + θ³/48), so a gain tuned for one fits the others for small errors.
    """
    R_e = _transpose(R_target) @ R
    if kind == "rotation":
        return 0.5 * vee(R_e - _transpose(R_e))
    if kind == "quaternion":
        return 2.0 * quaternion_from_rotation(R_e)[..., 1:]
    if kind == "mrp":
        return 4.0 * mrp_from_rotation(R_e)
    raise ValueError(f"attitude_error: kind must be one of {ERROR_KINDS}, got {kind!r}.")


def rate_error(omega, R, R_target, omega_target=None):
    """The angular velocity error ω − Rᵀ R_target ω_target (..., 3), rad/s, in body axes (Lee et al. 2010).

    omega : (..., 3) body angular velocity; R, R_target : (..., 3, 3); omega_target : (..., 3), the target
    frame's angular velocity in target axes (default zero: e = ω).
    """
    omega = jnp.asarray(omega)
    if omega_target is None:
        return omega
    return omega - (_transpose(R) @ R_target @ jnp.asarray(omega_target)[..., None])[..., 0]


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True, eq=False)
class WheelCluster:
    """Reaction wheels with unit spin axes a_k (body axes), ``axes`` (n, 3), n ≥ 3, spanning 3-D.

    The motor of wheel k exerts u_k (N m) on the wheel about a_k and −u_k a_k on the bus, so the bus feels
    −A u with A = axesᵀ (3, n). The axes are normalised and checked (numpy, so they must be concrete) at
    construction: ValueError unless they span 3-D. A jax pytree whose leaf is ``axes``.
    """

    axes: jax.Array

    def __post_init__(self):
        axes = np.asarray(self.axes, dtype=float)
        if axes.ndim != 2 or axes.shape[1] != 3 or not np.all(np.isfinite(axes)):
            raise ValueError(f"WheelCluster: axes must be finite, of shape (n, 3), got shape {axes.shape}.")
        rank = np.linalg.matrix_rank(axes)
        if rank < 3:
            raise ValueError(f"WheelCluster: the {len(axes)} wheel axes span a space of rank {rank}, not 3: "
                             "they cannot give every body torque.")
        object.__setattr__(self, "axes", jnp.asarray(axes / np.linalg.norm(axes, axis=1, keepdims=True)))

    def tree_flatten(self):
        return (self.axes,), None

    @classmethod
    def tree_unflatten(cls, _, children):  # traced or transformed axes: not checked again
        cluster = object.__new__(cls)
        object.__setattr__(cluster, "axes", children[0])
        return cluster

    @property
    def matrix(self):
        """A = axesᵀ (3, n): the body torque of wheel torques u is −A u."""
        return self.axes.T

    @property
    def null_space(self):
        """N = I − A⁺A (n, n), the orthogonal projector onto the wheel torques that give no bus torque."""
        A = self.matrix
        return jnp.eye(A.shape[1]) - A.T @ jnp.linalg.solve(A @ A.T, A)

    def allocate(self, torque_body, momentum=None, momentum_target=0.0, gain=0.0):
        """The wheel motor torques u (n,), N m, whose reaction on the bus is ``torque_body`` (3,), N m.

        u = −A⁺ τ with A⁺ = Aᵀ(AAᵀ)⁻¹, the least-norm u with −A u = τ; given the wheels' axial momenta
        ``momentum`` (n,), N m s, it adds −gain N (momentum − momentum_target), which drives the null-space
        part of the momenta to the target's at the rate ``gain`` (1/s) and leaves the bus torque unchanged.
        """
        A = self.matrix
        u = -A.T @ jnp.linalg.solve(A @ A.T, torque_body)
        if momentum is None:
            return u
        return u - gain * (self.null_space @ (momentum - momentum_target))


def _read(gain):
    """A gain's value at call time: a Parameter's ``.value``, else the gain itself."""
    return gain.value if hasattr(gain, "value") else gain


def _apply(gain, e):
    """K e for a gain K that is a scalar, a (3,) diagonal or a (3, 3) matrix."""
    K = _read(gain)
    return K @ e if jnp.ndim(K) == 2 else K * e


def _is_zero(gain):
    """Whether a gain is a concrete zero (a Parameter or a traced gain counts as non-zero)."""
    if hasattr(gain, "value"):
        return False
    try:
        return not np.any(np.asarray(gain) != 0)
    except jax.errors.TracerArrayConversionError:
        return False


def _momenta(readings, keys):
    """The wheels' momenta (n,): None without keys, the reading of one key, or the n scalar readings of n keys."""
    if keys is None:
        return None
    if isinstance(keys, str):
        return readings[keys]
    return jnp.stack([readings[key] for key in keys])


def attitude_pd(target, kp, kd, *, ki=0.0, period=None, wheels=None, attitude="attitude", rate="rate",
                wheel_momentum=None, momentum_gain=0.0, limit=None, kind="rotation"):
    """A PD (PID with ``ki``) attitude control law ``law(t, readings, state) -> (commands, new_state)``.

    The body torque demand is τ = −kp e − kd ω_e − ki z, N m, with e = attitude_error(R, R_target, kind),
    ω_e = rate_error(ω, R, R_target) (a target at rest) and z the integral of e (rad s).

    Parameters
    ----------
    target : (3, 3) array_like R_target, or a function t -> R_target (3, 3)
    kp, kd, ki : gains, each a scalar, a (3,) (per body axis) or a (3, 3) matrix, N m/rad and N m s/rad
        (ki: N m/(rad s)); a jax tracer, or an object with a ``.value`` (a conserve Parameter) read at each
        call of the law
    period : float, s, the control period, the law's call interval (1 / the Controller's rate): z ← z + period e
        at each call. Required (positive) unless ki is a concrete zero; ValueError otherwise.
    wheels : WheelCluster, optional; then commands = wheels.allocate(τ, readings[wheel_momentum],
        gain=momentum_gain) (n,) wheel motor torques, else commands = τ (3,) the body torque
    attitude, rate : the keys of readings holding R (3, 3) and the body angular velocity ω (3,), rad/s
    wheel_momentum : optional key of readings holding the wheels' axial momenta (n,), N m s, or a tuple of n
        keys of scalar readings (one rotor_momentum sensor per wheel), for the null-space momentum management
        at the rate momentum_gain (1/s, may be a Parameter)
    limit : optional scalar (may be a Parameter): commands are clipped elementwise to [−limit, limit], the
        saturation of each actuator; anti-windup by conditional integration: z is integrated only when no
        command saturated
    kind : "rotation", "quaternion" or "mrp", the attitude error (see :func:`attitude_error`)

    readings is a dict of jax arrays; the state is z (3,): give the Controller ``state=jnp.zeros(3)``, also for
    a PD (then it is passed through unchanged). The returned law is a pure jax function of (t, readings, state).
    """
    if kind not in ERROR_KINDS:
        raise ValueError(f"attitude_pd: kind must be one of {ERROR_KINDS}, got {kind!r}.")
    integral = not _is_zero(ki)
    period = None if period is None else float(period)
    if integral and not (period is not None and period > 0):
        raise ValueError(f"attitude_pd: integral action (ki={ki!r}) needs the control period, a positive float "
                         f"in s, got period={period!r}.")
    target_at = target if callable(target) else (lambda t, R_target=jnp.asarray(target): R_target)

    def law(t, readings, state):
        R, R_target = readings[attitude], target_at(t)
        e = attitude_error(R, R_target, kind)
        torque = -_apply(kp, e) - _apply(kd, rate_error(readings[rate], R, R_target))
        if integral:
            torque = torque - _apply(ki, state)
        if wheels is None:
            commands = torque
        else:
            commands = wheels.allocate(torque, _momenta(readings, wheel_momentum), gain=_read(momentum_gain))
        saturated = False
        if limit is not None:
            bound = _read(limit)
            saturated = jnp.any(jnp.abs(commands) > bound)
            commands = jnp.clip(commands, -bound, bound)
        if not integral:
            return commands, state
        return commands, jnp.where(saturated, state, state + period * e)

    return law
