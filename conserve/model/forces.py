"""Forces: gravity fields, applied loads, spring-dampers and motors.

Potentials (gravity, springs) enter the step through invariants (Gonzalez 1996; Betsch and
Steinmann 2001); dampers and motors act on joint coordinates with exact discrete derivatives
(:mod:`.coordinates`);
applied loads are evaluated at the midpoint. Every element's discrete work and dissipation per
step is reported in the Solution, so that E_n − E_0 = W_n − D_n can be checked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..kinematics.frames import material_point
from ..kinematics.tensor import contract
from .bodies import Ground, Part, PointMass, RigidBody
from .coordinates import SLIP_RATE, CoordinateElement, Length, passive
from .elements import ForceElement, LoadKind, PotentialKind
from .joints import Joint
from .laws import BODY, JOINT, SCALAR, Law, as_array, deprecated_form, positional_arity
from .terms import JointState, Term, midpoint_state


# --- kinds ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class UniformGravity(PotentialKind):
    """V = −m g·x for a mass m at the material point x = φ + X_i d_i (a part's centre of mass,
    X = 0, or a hybrid rotor's centre on its master).

    Invariant π = g·x (linear; in m²/s²), energy U = −m π in J.
    params: ``frame`` (n, 4), ``at`` (n, 3), ``mass`` (n,) in kg, ``g`` (n, 3) in m/s².
    """

    uniform = True

    def invariants(self, p, Q):
        return jnp.sum(p["g"] * material_point(Q, p["frame"], p["at"]), axis=1, keepdims=True)

    def energy(self, p, pi):
        return -p["mass"] * pi[0]

    def discrete_gradient(self, p, pi0, pi1):
        """−m: U is linear, so its difference quotient is its derivative exactly (Gonzalez's
        generic form would divide round-off by |Δπ|² and make Newton's Jacobian blow up when a
        mass barely moves)."""
        return jnp.full_like(pi0, -p["mass"])


@dataclass(frozen=True)
class CentralGravityPotential(PotentialKind):
    """Newtonian point-mass gravity of a centre at the origin: V = −μ m / |x| for a mass m at the
    material point x (as :class:`UniformGravity`).

    Invariant s = |x|² (quadratic, rotation invariant about the origin ⇒ angular momentum about
    the origin is conserved); closed-form discrete gradient ΔV/Δs, simplified so that it has no 0/0:
    Q = μ m / (√s0 √s1 (√s0 + √s1)).
    params: ``frame`` (n, 4), ``at`` (n, 3), ``mass`` (n,), ``mu`` (n,) in m³/s².
    """

    def invariants(self, p, Q):
        x = material_point(Q, p["frame"], p["at"])
        return jnp.sum(x * x, axis=1, keepdims=True)

    def energy(self, p, pi):
        return -p["mu"] * p["mass"] / jnp.sqrt(pi[0])

    def discrete_gradient(self, p, pi0, pi1):
        r0, r1 = jnp.sqrt(pi0), jnp.sqrt(pi1)
        return p["mu"] * p["mass"] / (r0 * r1 * (r0 + r1))


@dataclass(frozen=True)
class Load(LoadKind):
    """Applied force at a body point and/or pure torque, constant or ``fn(t, state)``.

    Generalized force (the virtual work of F at φ + X_i d_i and of m under δd_i = δα × d_i):
    f_φ = F, f_{d_i} = X_i F + ½ m × d_i, evaluated at the midpoint q_{n+½} and t_{n+½}; its
    discrete work f·Δq is reported per step.
    params: ``frame`` (n, 4), ``at`` (n, 3), ``force`` (n, 3), ``torque`` (n, 3).
    ``body_axes``: force and torque given in body axes (rotated by the midpoint directors).
    ``force_fn``, ``torque_fn``: None or the elements' laws ``fn(t, state)`` in a
    :class:`~conserve.model.lawtable.LawTable` (one law per element before assembly).
    """

    law_fields = ("force_fn", "torque_fn")

    force_fn: object = None
    torque_fn: object = None
    body_axes: bool = False

    def generalized_force(self, p, Q0, Q1, t, h):
        frame = p["frame"]
        dQ = Q1 - Q0
        state = midpoint_state(Q0, Q1, frame, h)
        d, dd = jnp.swapaxes(state.rotation, 1, 2), dQ[frame[:, 1:]]  # midpoint directors in rows, Δd_i
        F, M = p["force"], p["torque"]
        if self.force_fn is not None:
            F = self.force_fn.vmap((None, 0))(t, state)
        if self.torque_fn is not None:
            M = self.torque_fn.vmap((None, 0))(t, state)
        if self.body_axes:
            F = contract("ni,nij->nj", F, d)
            M = contract("ni,nij->nj", M, d)
        f_phi = F
        f_d = p["at"][:, :, None] * F[:, None, :] + 0.5 * jnp.cross(M[:, None, :], d)
        force = jnp.zeros_like(Q0).at[frame[:, 0]].add(f_phi).at[frame[:, 1:]].add(f_d)
        work = jnp.sum(f_phi * dQ[frame[:, 0]], axis=1) + jnp.sum(f_d * dd, axis=(1, 2))
        return force, work



# --- elements ------------------------------------------------------------------------------


def _vec3(name, what, value):
    try:
        v = np.asarray(value, dtype=float)
    except (TypeError, ValueError):  # "down", a list of strings
        raise ModelError(f"'{name}': {what} must be 3 finite numbers, got {value!r}.") from None
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ModelError(f"'{name}': {what} must be 3 finite numbers, got {value!r}.")
    return v


def _massive(parts, name):
    if parts is None:
        return None
    parts = tuple(parts)
    bad = [p for p in parts if not isinstance(p, (RigidBody, PointMass))]
    if bad:
        raise ModelError(f"'{name}': acts only on bodies and point masses, got {bad}.")
    return parts


class _Field(ForceElement):
    """A force field acting on every mass of the system (or of ``parts`` and the hybrid rotors they
    carry): one term of ``kind`` per mass, with the field's own parameters."""

    kind = None

    def __init__(self, parts, name):
        self.name = name
        self._parts = _massive(parts, name)

    def parts(self):
        return self._parts or ()

    def field_params(self):
        raise NotImplementedError

    def terms(self, layout):
        return [Term(self.kind, {"frame": frame, "at": at, "mass": mass, **self.field_params()}, owner)
                for frame, at, mass, owner in layout.masses(self._parts)]


class Gravity(_Field):
    """Uniform gravity field g (m/s², inertial frame) on every body and point mass (or ``parts``).

    Its potential V = −Σ m g·x_c is linear in q, so the midpoint gradient is exact (ΔV = ∇V·Δq).
    """

    kind = UniformGravity()

    def __init__(self, g=(0.0, 0.0, -9.81), parts=None, name="gravity"):
        super().__init__(parts, name)
        self.g = _vec3(name, "g", g)

    def field_params(self):
        return {"g": self.g}

    def __repr__(self):
        return f"Gravity({self.g.tolist()})"


class CentralGravity(_Field):
    """Newtonian gravity of a point mass μ = G M (m³/s²) at the origin on every body and point
    mass (or ``parts``): ``V = −μ m / |x_c|`` (no gravity-gradient torque). Conserves angular momentum
    about the origin exactly (closed-form discrete gradient in the rotation invariant ``s = |x_c|²``)."""

    kind = CentralGravityPotential()

    def __init__(self, mu, parts=None, name="central gravity"):
        super().__init__(parts, name)
        self.mu = float(mu)
        if not (self.mu > 0 and np.isfinite(self.mu)):
            raise ModelError(f"'{name}': mu must be positive, got {mu!r} m³/s².")

    def field_params(self):
        return {"mu": self.mu}


def _load_function(name, what, value, axes):
    """(callable(t, state) or None, constant (3,), the user's :class:`Law` or None)."""
    if value is None:
        return None, np.zeros(3), None
    if callable(value):
        returns = f"a (3,) {what} in {'N' if what == 'force' else 'N m'} ({axes} axes)"
        law = Law(f"{what} law", value, f"{what}(t, state) with state.position, .velocity, .rotation, "
                  ".angular_velocity of the part at t_{n+½}", (SCALAR, BODY), (3,), returns)
        if positional_arity(value) == 1:  # the old form f(t)
            deprecated_form(name, f"{what}(t)", f"{what}(t, state)")
            law = replace(law, signature=f"{what}(t)", args=(SCALAR,))
            return as_array(lambda t, state, f=value: f(t)), np.zeros(3), law
        return as_array(value), np.zeros(3), law
    return None, _vec3(name, what, value), None


class Force(ForceElement):
    """Applied force F (N) at a point of a part, and/or pure torque (N m).

    Parameters
    ----------
    part : RigidBody or PointMass
    force, torque : (3,) constants, or laws ``f(t, state)`` returning (3,) (jax-traceable), with
        ``state`` the part's :class:`~conserve.model.terms.BodyState` at t_{n+½} (``position``,
        ``velocity``, ``rotation``, ``angular_velocity``); the old form ``f(t)`` still works
        (deprecated)
    at : (3,) world point of application at the start (default: the centre of mass), or
    at_body : (3,) body point
    frame : "inertial" or "body" — axes of force and torque
    """

    def __init__(self, part, force=None, torque=None, *, at=None, at_body=None, frame="inertial", name=None):
        self.name = name or f"force on {getattr(part, 'name', part)}"
        if not isinstance(part, (RigidBody, PointMass)):
            raise ModelError(f"'{self.name}': loads act on bodies and point masses, got {part!r}.")
        if frame not in ("inertial", "body"):
            raise ModelError(f"'{self.name}': frame must be 'inertial' or 'body', got {frame!r}.")
        if torque is not None and isinstance(part, PointMass):
            raise ModelError(f"'{self.name}': a point mass cannot take a torque.")
        if force is None and torque is None:
            raise ModelError(f"'{self.name}': give a force=, a torque= or both (constant or a law f(t, state)).")
        self.part = part
        axes = "body" if frame == "body" else "inertial"
        self._force_fn, self._force, force_law = _load_function(self.name, "force", force, axes)
        self._torque_fn, self._torque, torque_law = _load_function(self.name, "torque", torque, axes)
        self._laws = [law for law in (force_law, torque_law) if law is not None]
        if at is not None and at_body is not None:
            raise ModelError(f"'{self.name}': give at= (world) or at_body=, not both.")
        self._at = part.body_point(_vec3(self.name, "at", at)) if at is not None else (
            _vec3(self.name, "at_body", at_body) if at_body is not None else np.zeros(3))
        self.kind = Load(self._force_fn, self._torque_fn, frame == "body")

    def parts(self):
        return (self.part,)

    def laws(self):
        return self._laws

    def terms(self, layout):
        p = {"frame": layout.frame(self.part), "at": self._at, "force": self._force, "torque": self._torque}
        return [Term(self.kind, p, self.name)]


def Torque(part, torque, *, frame="inertial", name=None):
    """A pure torque (N m) on a body: ``Force(part, torque=torque, ...)``."""
    return Force(part, torque=torque, frame=frame, name=name or f"torque on {part.name}")


class _CoordinateForce(ForceElement):
    """Base of elements acting on one joint coordinate (spring, damper, motor)."""

    def __init__(self, name, stiffness, damping, rest, motor, dry_friction=0.0, slip_rate=SLIP_RATE):
        self.name = name
        self.stiffness, self.damping = _real(name, "stiffness", stiffness), _real(name, "damping", damping)
        self.dry_friction, self.slip_rate = _real(name, "dry_friction", dry_friction), _real(name, "slip_rate",
                                                                                                slip_rate)
        for what, v in (("stiffness", self.stiffness), ("damping", self.damping),
                        ("dry_friction", self.dry_friction)):
            if not (v >= 0 and np.isfinite(v)):
                raise ModelError(f"'{name}': {what} must be ≥ 0 and finite, got {v}.")
        if not (self.slip_rate > 0 and np.isfinite(self.slip_rate)):
            raise ModelError(f"'{name}': slip_rate must be > 0 and finite, got {slip_rate!r}.")
        self.rest = _real(name, "rest", rest)
        if not np.isfinite(self.rest):
            raise ModelError(f"'{name}': the rest position must be finite, got {rest!r}.")
        self.motor = motor

    def laws(self):
        return []

    def _term(self, geometry, params):
        params = {**params, **passive(self.stiffness, self.damping, self.rest, self.dry_friction, self.slip_rate)}
        return Term(CoordinateElement(geometry, self.motor), params, self.name)


class SpringDamper(_CoordinateForce):
    """Translational spring-damper between two material points (Thompson §V): tension
    k (ℓ − ℓ0) + c ℓ' along the line, ℓ the distance.

    ``points=(x_a, x_b)`` world at the start or ``at_a``/``at_b`` body points; ``stiffness`` N/m,
    ``damping`` N s/m, ``rest_length`` m (default: the initial length).
    """

    def __init__(self, a, b, points=None, *, at_a=None, at_b=None, stiffness=0.0, damping=0.0,
                 rest_length=None, name=None):
        name = name or f"spring({getattr(a, 'name', a)}, {getattr(b, 'name', b)})"
        for part in (a, b):
            if not isinstance(part, Part):
                raise ModelError(f"'{name}': connects two parts (bodies, point masses or cs.ground), got {part!r}; "
                                 "pass the part objects, not their names.")
        if points is not None:
            xa, xb = (_vec3(name, "points", x) for x in points)
            at_a, at_b = a.body_point(xa), b.body_point(xb)
        elif at_a is None or at_b is None:
            raise ModelError(f"'{name}': give points=(x_a, x_b) or at_a= and at_b=.")
        self.a, self.b = a, b
        self.at_a, self.at_b = _vec3(name, "at_a", at_a), _vec3(name, "at_b", at_b)
        length = np.linalg.norm(a.world_point(self.at_a) - b.world_point(self.at_b))
        if length <= 1e-12 * (1.0 + np.linalg.norm(a.world_point(self.at_a))):
            raise ModelError(f"'{name}': its two points coincide at the start, so the line of action (the spring's "
                             "direction) is undefined; attach it at points apart, or use a Spherical joint "
                             "for a rigid link of zero length.")
        if rest_length is not None:
            rest_length = _real(name, "rest_length", rest_length)
            if not (rest_length >= 0 and np.isfinite(rest_length)):
                raise ModelError(f"'{name}': rest_length must be ≥ 0 and finite (a length in m), got {rest_length!r}.")
        super().__init__(name, stiffness, damping, length if rest_length is None else rest_length, None)

    def parts(self):
        return tuple(p for p in (self.a, self.b) if not isinstance(p, Ground))

    def sketch(self):
        return ("spring", self.a, self.at_a, self.b, self.at_b)

    def terms(self, layout):
        return [self._term(Length(), {"frame_a": layout.frame(self.a), "at_a": self.at_a,
                                    "frame_b": layout.frame(self.b), "at_b": self.at_b})]


class _OnJoint(_CoordinateForce):
    def __init__(self, joint, coordinate, name, stiffness, damping, rest, motor, **friction):
        if not isinstance(joint, Joint):
            raise ModelError(f"'{name}': acts on a joint (Revolute, Prismatic, Cylindrical), got {joint!r}.")
        self.joint, self.coordinate = joint, joint.chosen_coordinate(coordinate, name)
        super().__init__(name, stiffness, damping, rest, motor, **friction)

    def parts(self):
        return ()

    def terms(self, layout):
        return [self._term(*self.joint.coordinate(self.coordinate, layout))]


class JointSpringDamper(_OnJoint):
    """Spring-damper on a joint coordinate: rotational about a revolute/cylindrical axis
    (k in N m/rad, c in N m s/rad, ``rest`` angle in rad; the angle is 0 at the initial
    configuration) or along a prismatic/cylindrical axis (N/m, N s/m, m). Moment −k(θ − θ0) − c θ'
    (Thompson §V); the angle counts turns past ±π. ``dry_friction`` τ_c (N m or N) adds dry
    (Coulomb) friction −τ_c tanh(θ'/ω_s), regularised below the ``slip_rate`` ω_s (rad/s or m/s;
    :func:`~conserve.model.coordinates.dry_friction`); its work is reported as dissipation. Below
    the slip rate it acts as a damping τ_c/ω_s: a slip rate much smaller than τ_c h / J (J the
    inertia it brakes, h the step) makes the step's equations stiff for Newton."""

    def __init__(self, joint, stiffness=0.0, damping=0.0, rest=0.0, *, dry_friction=0.0, slip_rate=SLIP_RATE,
                 coordinate=None, name=None):
        name = name or f"spring-damper on {getattr(joint, 'name', joint)}"
        super().__init__(joint, coordinate, name, stiffness, damping, rest, None, dry_friction=dry_friction,
                         slip_rate=slip_rate)


class JointMotor(_OnJoint):
    """Internal actuator on a joint coordinate: torque τ in N m about a revolute axis (on b,
    reaction on a) or force in N along a prismatic axis, ``law(t, joint)`` (jax-traceable) with
    ``joint`` a :class:`~conserve.model.terms.JointState`: the coordinate's ``value`` s_{n+½},
    its ``rate`` Δs/h and part a's :class:`~conserve.model.terms.BodyState` ``a``, at t_{n+½}.
    Its discrete work τ Δs is reported per step. The old forms ``law(t, s, s_dot)`` and
    ``law(t, s, s_dot, a_state)`` still work (deprecated)."""

    def __init__(self, joint, law, *, coordinate=None, name=None):
        name = name or f"motor on {getattr(joint, 'name', joint)}"
        if not callable(law):
            raise ModelError(f"'{name}': law must be a function law(t, joint) -> torque or force.")
        arity = positional_arity(law)
        if arity in (3, 4):  # the old forms law(t, s, s_dot[, a_state])
            old = "law(t, s, s_dot" + (", a_state)" if arity == 4 else ")")
            deprecated_form(name, old, "law(t, joint) with joint.value, joint.rate, joint.a")
            step_law = law if arity == 4 else _ignore_state(law)
            signature, args = old, (SCALAR, SCALAR, SCALAR, BODY)[:arity]
        else:
            step_law = _with_joint_state(law)
            signature, args = "law(t, joint) with joint.value, joint.rate, joint.a (JointState)", (SCALAR, JOINT)
        super().__init__(joint, coordinate, name, 0.0, 0.0, 0.0, as_array(step_law))
        unit = "N m" if self.coordinate == "angle" else "N"
        what = "torque" if unit == "N m" else "force"
        self._law = Law("motor law", law, f"{signature}: the joint's {self.coordinate} at t_{{n+½}}", args, (),
                        f"a scalar: the motor's {what} in {unit}")

    def laws(self):
        return [self._law]


def _real(name, what, value):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ModelError(f"'{name}': {what} must be a number, got {value!r}.") from None


def _ignore_state(law):
    def with_state(t, s, s_dot, state):
        return law(t, s, s_dot)

    return with_state


def _with_joint_state(law):
    def step_law(t, s, s_dot, state):
        return law(t, JointState(s, s_dot, state))

    return step_law
