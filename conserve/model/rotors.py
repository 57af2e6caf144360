"""Balanced rotors on a master body: hybrid spin coordinates (after Becker, Betsch, Franke and
Siebert, "Hybrid coordinate approach for the modelling and simulation of multibody systems",
Secs. 1–2; see also docs/guide/modelling.rst) and the same rotor as a full body for comparison
(the winch rope that couples a spin angle to a rope length is :mod:`.rope`).

A hybrid rotor adds one spin angle θ (and its axial momentum p) to the state and nothing to
the constraints: its mass and *transverse* inertia join the master's constant mass matrix, its
axial momentum p = J_a (ω·a + θ') is carried exactly (p' = motor torque), and the gyroscopic
term and a corrected reaction couple make energy and angular momentum exact. ``model="body"``
builds the same rotor as a director body on a revolute joint with a joint motor and bearing
damper, so the two models are swapped with one argument.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInertia, InvalidMass, ModelError
from ..kinematics.frames import named_direction
from .bodies import RigidBody, _check_mass, _check_name, _vector
from .coordinates import SLIP_RATE
from .elements import Element
from .forces import JointMotor, JointSpringDamper
from .joints import Revolute
from .laws import ROTOR, SCALAR, Law, as_array
from .terms import RotorState

#: Relative tolerance of the axisymmetry and balance checks.
ROTOR_TOL = 1e-9


def _scalar(name, what, value):
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if not np.isfinite(x):
        raise ModelError(f"rotor '{name}': {what} must be a finite number, got {value!r}.")
    return x


def _unit(name, what, value):
    """A unit direction from 3 numbers, not all zero, or an axis name ('z', '-x', …)."""
    try:
        v = np.asarray(named_direction(value), float)
    except (TypeError, ValueError):  # words, complex numbers, ragged lists
        v = np.full(1, np.nan)
    if v.shape != (3,) or not np.all(np.isfinite(v)) or np.linalg.norm(v) < 1e-12:
        raise ModelError(f"rotor '{name}': {what} must be a non-zero 3-vector or one axis name ('x', 'y', 'z', "
                         f"'-x', '-y', '-z'), got {value!r}.")
    return v / np.linalg.norm(v)


def rotor_mass_blocks(mass, transverse, axis, offset):
    """μ(m, J_t (I − a aᵀ), c) (4, 4): the rotor's mass and transverse inertia as seen by its
    master's directors, for a rotor centre at body point c: μ = [[m, m cᵀ], [m c, E(J) + m c cᵀ]],
    J = J_t (I − a aᵀ), E the Euler tensor."""
    J = transverse * (np.eye(3) - np.outer(axis, axis))
    E = 0.5 * np.trace(J) * np.eye(3) - J
    mu = np.zeros((4, 4))
    mu[0, 0] = mass
    mu[0, 1:] = mu[1:, 0] = mass * offset
    mu[1:, 1:] = E + mass * np.outer(offset, offset)
    return mu


class Rotor(Element):
    """A balanced, axisymmetric rotor spinning on a master body.

    Parameters
    ----------
    name : str
    on : RigidBody, the master
    axis : (3,) spin axis in the master's body axes
    offset : (3,) rotor centre (its centre of mass, on the axis) in the master's body axes, m
    mass : kg
    axial_inertia, transverse_inertia : kg m² about the rotor centre; or ``inertia`` (3, 3) in
        the master's axes, which must be axisymmetric about ``axis``
    center_of_mass : (3,) optional check: the rotor's centre of mass in master axes must lie on
        the spin axis (the hybrid model requires a balanced rotor)
    spin_rate : rad/s relative to the master at t0, or ``axial_momentum`` p0 = J_a(ω·a + θ') in kg m²/s
    motor : ``law(t, rotor) -> τ`` (N m, on the rotor about ``axis``; reaction on the master), where
        ``rotor`` is a :class:`RotorState`; jax-traceable
    friction : viscous bearing friction c in N m s/rad (torque −c θ')
    dry_friction, slip_rate : dry (Coulomb) bearing friction τ_c in N m, torque −τ_c tanh(θ'/ω_s),
        regularised below the slip rate ω_s in rad/s (:func:`~conserve.model.coordinates.dry_friction`)
    model : "hybrid" (one spin coordinate) or "body" (director body + revolute + motor + damper)
    """

    def __init__(self, name, on, axis, offset=(0.0, 0.0, 0.0), mass=0.0, axial_inertia=None,
                 transverse_inertia=None, *, inertia=None, center_of_mass=None, spin_rate=0.0,
                 axial_momentum=None, motor=None, friction=0.0, dry_friction=0.0, slip_rate=SLIP_RATE,
                 model="hybrid"):
        self.name = _check_name(name)
        if not isinstance(on, RigidBody):
            raise ModelError(f"rotor '{name}': its master must be a RigidBody, got {on!r}.")
        if model not in ("hybrid", "body"):
            raise ModelError(f"rotor '{name}': model must be 'hybrid' or 'body', got {model!r}.")
        self.master, self.model = on, model
        self.axis = _unit(name, "axis", axis)
        self.offset = _vector(name, "offset", offset, "rotor")
        self.mass = _check_mass(name, mass, allow_zero=True)
        if model == "body" and self.mass == 0:
            raise InvalidMass(f"rotor '{name}': model='body' builds a rigid body, which needs a positive mass; give "
                              "mass= (a massless balanced rotor is modelled with model='hybrid').")
        a = self.axis
        if inertia is not None:
            J = np.asarray(inertia, float)
            if J.shape != (3, 3) or not np.all(np.isfinite(J)):
                raise InvalidInertia(f"rotor '{name}': inertia must be a finite 3x3 tensor in kg m², got {inertia!r}.")
            axial = a @ J @ a
            transverse = 0.5 * (np.trace(J) - axial)
            symmetric = transverse * (np.eye(3) - np.outer(a, a)) + axial * np.outer(a, a)
            if model == "hybrid" and np.max(np.abs(J - symmetric)) > ROTOR_TOL * np.max(np.abs(J)):
                raise InvalidInertia(
                    f"rotor '{name}': the hybrid model requires an axisymmetric rotor, but its inertia is not "
                    f"symmetric about the spin axis {a.tolist()} (max deviation "
                    f"{np.max(np.abs(J - symmetric)):.3g} kg m²); use model='body' for a non-axisymmetric rotor.")
            axial_inertia, transverse_inertia = axial, transverse
        else:
            J = None
        if axial_inertia is None or transverse_inertia is None:
            raise InvalidInertia(f"rotor '{name}': give axial_inertia= and transverse_inertia= (or inertia=).")
        self.axial_inertia, self.transverse_inertia = float(axial_inertia), float(transverse_inertia)
        if not all(0 < J < np.inf for J in (self.axial_inertia, self.transverse_inertia)):
            raise InvalidInertia(f"rotor '{name}': inertias must be positive and finite, got axial "
                                 f"{self.axial_inertia}, transverse {self.transverse_inertia} kg m².")
        if self.axial_inertia > 2 * self.transverse_inertia * (1 + ROTOR_TOL):
            raise InvalidInertia(
                f"rotor '{name}': axial inertia {self.axial_inertia:g} > 2 × transverse {self.transverse_inertia:g} "
                "violates the triangle inequality (a thin disc has exactly 2×); check the values.")
        self.inertia = J if J is not None else (self.transverse_inertia * (np.eye(3) - np.outer(a, a))
                                                + self.axial_inertia * np.outer(a, a))
        if center_of_mass is not None:
            r = _vector(name, "center_of_mass", center_of_mass, "rotor") - self.offset
            off_axis = np.linalg.norm(r - (r @ a) * a)
            if model == "hybrid" and off_axis > ROTOR_TOL * (1 + np.linalg.norm(self.offset)):
                raise ModelError(
                    f"rotor '{name}': its centre of mass is {off_axis:.3g} m off the spin axis; the hybrid model "
                    "requires a balanced rotor (use model='body' for an unbalanced one).")
        omega_a = self.master.angular_velocity @ self.master.world_vector(a)
        if axial_momentum is not None:
            self.spin_rate = _scalar(name, "axial_momentum", axial_momentum) / self.axial_inertia - omega_a
        else:
            self.spin_rate = _scalar(name, "spin_rate", spin_rate)
        self.axial_momentum = self.axial_inertia * (omega_a + self.spin_rate)
        self.motor = self._law = None
        if motor is not None:
            self.set_motor(motor)
        self.friction = float(friction)
        self.dry_friction, self.slip_rate = float(dry_friction), float(slip_rate)
        if not (self.friction >= 0 and np.isfinite(self.friction)):
            raise ModelError(f"rotor '{name}': friction must be ≥ 0, got {friction!r}.")
        if not (self.dry_friction >= 0 and np.isfinite(self.dry_friction)):
            raise ModelError(f"rotor '{name}': dry_friction must be ≥ 0 (N m), got {dry_friction!r}.")
        if not (self.slip_rate > 0 and np.isfinite(self.slip_rate)):
            raise ModelError(f"rotor '{name}': slip_rate must be > 0 (rad/s), got {slip_rate!r}.")

    def __repr__(self):
        return f"Rotor({self.name!r}, model={self.model!r})"

    def set_motor(self, motor):
        """Drive the rotor by ``motor(t, rotor) -> τ`` (the constructor's ``motor``; a
        :class:`conserve.Controller` sets its held command this way). A rotor has one motor, and a
        full-body rotor's is fixed once its elements are built."""
        if not callable(motor):
            raise ModelError(f"rotor '{self.name}': motor must be a function law(t, rotor) -> torque.")
        if self.motor is not None or getattr(self, "_expanded", None) is not None:
            raise ModelError(f"rotor '{self.name}' has a motor already (its own law, or a controller's); a rotor has "
                             "one motor: give the torque to one law or one controller.")
        self.motor = as_array(motor)
        self._law = Law("motor law", motor, "motor(t, rotor) with rotor.angle, rotor.rate (relative to the master) "
                        "and rotor.master (position, velocity, rotation, angular_velocity) at t_{n+½}",
                        (SCALAR, ROTOR), (), "a scalar: the motor torque in N m on the rotor about its axis")

    def laws(self):
        return [] if self._law is None else [self._law]

    # --- hybrid model: consumed by assembly --------------------------------------------
    def parts(self):
        return (self.master,)

    def terms(self, layout):
        return []

    def mass_blocks(self):
        return rotor_mass_blocks(self.mass, self.transverse_inertia, self.axis, self.offset)

    # --- full-body model ----------------------------------------------------------------
    def expand(self):
        """The elements of the full-body model: body, revolute bearing (``self.joint``), bearing
        damper, motor. Built once, so every system and rope sees the same parts."""
        if getattr(self, "_expanded", None) is None:
            self._expanded = self._build_body()
            self.joint = self._expanded[1]
        return self._expanded

    def _build_body(self):
        m = self.master
        centre = m.world_point(self.offset)
        axis_world = m.world_vector(self.axis)
        omega = m.angular_velocity + self.spin_rate * axis_world
        body = RigidBody(self.name, self.mass, self.inertia, position=centre, orientation=m.rotation,
                         velocity=m.velocity + np.cross(m.angular_velocity, centre - m.position),
                         angular_velocity=omega)
        joint = Revolute(m, body, at=centre, axis=axis_world, name=f"{self.name} joint")
        elements = [body, joint]
        if self.friction > 0 or self.dry_friction > 0:
            elements.append(JointSpringDamper(joint, 0.0, self.friction, dry_friction=self.dry_friction,
                                              slip_rate=self.slip_rate, name=f"{self.name} bearing"))
        if self.motor is not None:
            law = self.motor
            elements.append(JointMotor(joint, lambda t, spin: law(t, RotorState(spin.value, spin.rate, spin.a)),
                                       name=f"{self.name} motor"))
        return elements
