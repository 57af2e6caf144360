"""What a controller measures: sensors of parts, joints and rotors, read at the sample instants from
the node's coordinates q, velocities v = q̇ and the rotors' axial momenta p, with optional
models of a real sensor (bias, white noise, quantisation, one sample of delay).

A :class:`Sensor` names what it reads and of which element; assembly resolves it to a
:class:`Reading` (block indices and body vectors: plain, hashable data), whose :meth:`Reading.read`
is a pure jax function of the node. The ideal value (3-vectors, 3 × 3 matrices or scalars):

==================  ==========================================================  =============
sensor              reading                                                     shape, units
==================  ==========================================================  =============
attitude(part)      R = [d1 d2 d3]: body components to inertial ones            (3, 3)
angular_velocity    ω in the part's body axes, Rᵀ ω, ω = ½ Σ d_i × ḋ_i           (3,) rad/s
position(part, X)   x = φ + X_i d_i of the body point X (inertial)              (3,) m
velocity(part, X)   ẋ = φ̇ + X_i ḋ_i (inertial)                                  (3,) m/s
joint_angle(joint)  θ = atan2(b·e2, b·e1) in (−π, π] (Revolute, Cylindrical)    () rad
joint_rate(joint)   θ̇ = (π1 π̇2 − π2 π̇1)/(π·π)                                   () rad/s
slide(joint)        s = u·(x_B − x_A) (Prismatic, Cylindrical)                  () m
slide_rate(joint)   ṡ                                                           () m/s
rotor_rate(rotor)   θ' = p/J_a − ω·a, the spin rate relative to the master      () rad/s
rotor_momentum      p = J_a (ω·a + θ'), the axial angular momentum              () N m s
reaction(joint)     the joint's force on part b and torque about ``at_b``       (6,) N, N m
==================  ==========================================================  =============

A reaction (inertial axes; on part a, about ``at_a``, when b is the ground) is −Ḡᵀλ of the joint's
rows (as :func:`conserve.joint_reactions`), averaged over the last two steps before the sample:
the multipliers of one step alternate about the continuous force by O(h) (the index-3 midpoint
rule's parasitic mode), their mean is the reaction at the node one step before the sample to
O(h²). Director backend only (the reduced one eliminates the tree joints' multipliers).

A real sensor's reading is ``quantum · round((ideal + bias + noise · n_k) / quantum)`` with n_k
standard normal numbers drawn from the controller's key folded with the sample index k (so a
run, a resumed run and every member of an ensemble with the same seed draw the same numbers,
and another seed others), delayed by ``delay`` ∈ {0, 1} samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..kinematics.rotations import angular_velocity as _omega

#: the sensor kinds and the shape of their readings
SHAPES = {"attitude": (3, 3), "angular_velocity": (3,), "position": (3,), "velocity": (3,), "joint_angle": (),
          "joint_rate": (), "slide": (), "slide_rate": (), "rotor_rate": (), "rotor_momentum": (), "reaction": (6,)}


@dataclass(frozen=True)
class Reading:
    """A resolved sensor (static, hashable): its ``kind``, block indices ``frames`` ((4,) per part
    it reads: the part's, or part a's then b's of a joint), body vectors ``vectors`` (a body point;
    a joint's e1, e2, b or u), a hybrid rotor's index ``rotor``, a joint's constraint ``rows``
    (indices into all rows, for a reaction), and the real sensor's ``bias``,
    ``noise`` (standard deviation), ``quantum`` (0: none) and ``delay`` (samples)."""

    kind: str
    frames: tuple = ()
    vectors: tuple = ()
    rotor: int = -1
    rows: tuple = ()
    bias: float = 0.0
    noise: float = 0.0
    quantum: float = 0.0
    delay: int = 0

    @property
    def shape(self):
        return SHAPES[self.kind]

    def read(self, model, q, v, p):
        """The ideal reading of the node (q (n_q,), v (n_q,), p (n_r,)) as a float64 array of
        ``self.shape``."""
        Q, V = model.blocks(q), model.blocks(v) - model.blocks(jnp.zeros_like(v))  # the ground does not move
        f = [np.asarray(f) for f in self.frames]
        U = [jnp.asarray(u) for u in self.vectors]
        if self.kind in ("attitude", "angular_velocity", "position", "velocity"):
            D, Dv = Q[f[0][1:]], V[f[0][1:]]
            if self.kind == "attitude":
                return D.T
            if self.kind == "angular_velocity":
                return D @ _omega(D, Dv)
            X = U[0]
            return Q[f[0][0]] + X @ D if self.kind == "position" else V[f[0][0]] + X @ Dv
        if self.kind in ("joint_angle", "joint_rate"):
            e1, e2, b = U
            pi = jnp.stack([(b @ Q[f[1][1:]]) @ (e1 @ Q[f[0][1:]]), (b @ Q[f[1][1:]]) @ (e2 @ Q[f[0][1:]])])
            if self.kind == "joint_angle":
                return jnp.arctan2(pi[1], pi[0])
            rate = jnp.stack([(b @ V[f[1][1:]]) @ (e1 @ Q[f[0][1:]]) + (b @ Q[f[1][1:]]) @ (e1 @ V[f[0][1:]]),
                              (b @ V[f[1][1:]]) @ (e2 @ Q[f[0][1:]]) + (b @ Q[f[1][1:]]) @ (e2 @ V[f[0][1:]])])
            return (pi[0] * rate[1] - pi[1] * rate[0]) / (pi @ pi)
        if self.kind in ("slide", "slide_rate"):
            u, at_a, at_b = U
            S = Q if self.kind == "slide" else V
            axis, axis_rate = u @ Q[f[0][1:]], u @ V[f[0][1:]]
            xa, xb = S[f[0][0]] + at_a @ S[f[0][1:]], S[f[1][0]] + at_b @ S[f[1][1:]]
            if self.kind == "slide":
                return axis @ (xb - xa)
            xa0, xb0 = Q[f[0][0]] + at_a @ Q[f[0][1:]], Q[f[1][0]] + at_b @ Q[f[1][1:]]
            return axis @ (xb - xa) + axis_rate @ (xb0 - xa0)
        if self.kind == "rotor_rate":
            return model.rotor_relative_rates(q, v, p)[self.rotor]
        return p[self.rotor]  # rotor_momentum

    def measure(self, ideal, key):
        """The real sensor's reading of ``ideal`` with the normal numbers of ``key``."""
        y = ideal + self.bias
        if self.noise:
            y = y + self.noise * jax.random.normal(key, self.shape, ideal.dtype)
        if self.quantum:
            y = self.quantum * jnp.round(y / self.quantum)
        return y


class Sensor:
    """What a controller reads (see the module docstring); made by the functions of this module,
    e.g. ``attitude(bus)``, ``joint_angle(slew, noise=1e-3)``.

    bias : added to the reading (its units; scalar or of the reading's shape)
    noise : standard deviation of the white noise added at each sample (its units)
    quantum : the resolution: readings rounded to multiples of it (0: none)
    delay : 0 or 1: the reading of the sample before (a measurement still on its way)
    """

    def __init__(self, kind, target, point=None, *, bias=0.0, noise=0.0, quantum=0.0, delay=0):
        self.kind, self.target, self.point = kind, target, point
        name = f"{kind} sensor of '{getattr(target, 'name', target)}'"
        for what, x in (("noise", noise), ("quantum", quantum)):
            if not (isinstance(x, (int, float)) and np.isfinite(x) and x >= 0):
                raise ModelError(f"{name}: {what} must be a number ≥ 0, got {x!r}.")
        bias = np.asarray(bias, float)
        if bias.shape not in ((), SHAPES[kind]) or not np.all(np.isfinite(bias)):
            raise ModelError(f"{name}: bias must be a finite number or of the reading's shape {SHAPES[kind]}, got "
                             f"{bias!r}.")
        if delay not in (0, 1):
            raise ModelError(f"{name}: delay must be 0 or 1 (samples), got {delay!r}.")
        self.bias, self.noise, self.quantum, self.delay = bias, float(noise), float(quantum), int(delay)

    def __repr__(self):
        return f"Sensor({self.kind!r}, {getattr(self.target, 'name', self.target)!r})"

    def resolve(self, layout) -> Reading:
        """The :class:`Reading` of this sensor in an assembled layout (a ModelError if its element is
        not in the system or has no such coordinate)."""
        from ..model.joints import Joint  # noqa: PLC0415 — the sensors' targets, named in messages only
        from ..model.rotors import Rotor

        kind, target = self.kind, self.target
        real = {"bias": _hashable(self.bias), "noise": self.noise, "quantum": self.quantum, "delay": self.delay}
        if kind.startswith("rotor"):
            if not isinstance(target, Rotor) or target.model != "hybrid":
                raise ModelError(f"{kind} sensor: {target!r} is not a hybrid rotor (a Rotor(..., model='hybrid'); for "
                                 "a rotor modelled as a body, read joint_rate(rotor.joint)).")
            return Reading(kind, rotor=layout.rotor_index(target), **real)
        if kind == "reaction":
            if not isinstance(target, Joint):
                raise ModelError(f"reaction sensor: {target!r} is not a joint.")
            record = target.record(layout)
            on_b = record["b"] != "ground"
            at = record["at_b" if on_b else "at_a"]
            rows = tuple(i for i, (owner, _) in enumerate(layout.constraint_rows) if owner == target.name)
            frame = _t(record["frame_b" if on_b else "frame_a"])
            return Reading(kind, (frame,), (_t(np.zeros(3) if at is None else at),), rows=rows, **real)
        if kind.startswith(("joint", "slide")):
            if not isinstance(target, Joint):
                raise ModelError(f"{kind} sensor: {target!r} is not a joint.")
            which = "angle" if kind.startswith("joint") else "slide"
            if which not in target.coordinates:
                raise ModelError(f"{kind} sensor: joint '{target.name}' is a {type(target).__name__} joint, which has "
                                 f"no {which}.")
            record = target.record(layout)
            frames = (_t(record["frame_a"]), _t(record["frame_b"]))
            if which == "angle":
                c = record["angle"]
                return Reading(kind, frames, (_t(c["e1"]), _t(c["e2"]), _t(c["b"])), **real)
            at = lambda x: _t(np.zeros(3) if x is None else x)  # noqa: E731
            return Reading(kind, frames, (_t(record["slide"]["u"]), at(record["at_a"]), at(record["at_b"])), **real)
        frame = _t(layout.frame(target))
        point = () if self.point is None else (_t(np.asarray(self.point, float)),)
        if kind in ("attitude", "angular_velocity") and getattr(target, "n_blocks", 4) != 4:
            raise ModelError(f"{kind} sensor: '{target.name}' is a point mass, which has no attitude.")
        return Reading(kind, (frame,), point, **real)


def _t(a):
    return tuple(np.asarray(a).ravel().tolist())


def _hashable(bias):
    return float(bias) if bias.shape == () else _t(bias)


def _point(point):
    p = np.zeros(3) if point is None else np.asarray(point, float)
    if p.shape != (3,) or not np.all(np.isfinite(p)):
        raise ModelError(f"a sensor's body point must be 3 finite numbers (m), got {point!r}.")
    return p


def attitude(part, **real) -> Sensor:
    """The part's rotation R (3, 3), body to inertial components."""
    return Sensor("attitude", part, **real)


def angular_velocity(part, **real) -> Sensor:
    """The part's angular velocity in its body axes (3,), rad/s: a gyro."""
    return Sensor("angular_velocity", part, **real)


def position(part, point=None, **real) -> Sensor:
    """The inertial position (3,) m of the body point ``point`` (default: the centre of mass)."""
    return Sensor("position", part, _point(point), **real)


def velocity(part, point=None, **real) -> Sensor:
    """The inertial velocity (3,) m/s of the body point ``point`` (default: the centre of mass)."""
    return Sensor("velocity", part, _point(point), **real)


def joint_angle(joint, **real) -> Sensor:
    """A Revolute or Cylindrical joint's angle in (−π, π], rad (an encoder)."""
    return Sensor("joint_angle", joint, **real)


def joint_rate(joint, **real) -> Sensor:
    """A Revolute or Cylindrical joint's angle rate, rad/s."""
    return Sensor("joint_rate", joint, **real)


def slide(joint, **real) -> Sensor:
    """A Prismatic or Cylindrical joint's slide, m."""
    return Sensor("slide", joint, **real)


def slide_rate(joint, **real) -> Sensor:
    """A Prismatic or Cylindrical joint's slide rate, m/s."""
    return Sensor("slide_rate", joint, **real)


def rotor_rate(rotor, **real) -> Sensor:
    """A hybrid rotor's spin rate relative to its master, rad/s (a wheel's tachometer)."""
    return Sensor("rotor_rate", rotor, **real)


def reaction(joint, **real) -> Sensor:
    """A joint's reaction (6,): its force on part b (N) and torque about b's attachment point
    (N m), inertial axes, the mean of the last two steps' (see the module docstring)."""
    return Sensor("reaction", joint, **real)


def rotor_momentum(rotor, **real) -> Sensor:
    """A hybrid rotor's axial angular momentum J_a (ω·a + θ'), N m s."""
    return Sensor("rotor_momentum", rotor, **real)
