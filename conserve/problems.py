"""The benchmark problems of ``shared/problems.md``, built with the public API.

Examples, reproductions, tests and benchmarks all use these builders so that results are
comparable across backends and with other software. SI units throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .kinematics.rotations import rotation_vector_to_rotation
from .model import (
    CentralGravity,
    Fixed,
    Gravity,
    JointMotor,
    JointSpringDamper,
    PointMass,
    Prismatic,
    Revolute,
    RigidBody,
    Rope,
    Rotor,
    Spherical,
    System,
    Universal,
    ground,
)

G = 9.81


@dataclass(frozen=True)
class HeavyTop:
    """P1: a cone (ρ = 2700 kg/m³, height a = 0.1, radius a/2) on a fixed tip, in steady precession.

    The tip is at the origin, the centre of mass at distance l = 3a/4 on the symmetry axis d3,
    tilted by alpha0 about e1; Ω0 = ω_p e3 + ω_s d3 with ω_s chosen so that the centre of mass
    stays at height l cos α0 and its azimuth turns at exactly ω_p (the analytic reference).
    """

    a: float = 0.1
    density: float = 2700.0
    alpha0: float = np.pi / 3
    omega_p: float = 10.0
    g: float = G

    @property
    def mass(self):
        r = self.a / 2
        return self.density * np.pi * r**2 * self.a / 3

    @property
    def l(self):  # noqa: E743  (the paper's name)
        return 0.75 * self.a

    @property
    def inertia(self):
        m, r, a = self.mass, self.a / 2, self.a
        J1 = 3.0 / 80.0 * m * (4 * r**2 + a**2)
        return np.array([J1, J1, 0.3 * m * r**2])

    @property
    def omega_s(self):
        J1, _, J3 = self.inertia
        m, l, wp = self.mass, self.l, self.omega_p
        return m * self.g * l / (J3 * wp) + (J1 + m * l**2 - J3) / J3 * wp * np.cos(self.alpha0)

    def system(self) -> System:
        R0 = rotation_vector_to_rotation([self.alpha0, 0.0, 0.0])
        d3 = R0[:, 2]
        omega = self.omega_p * np.array([0.0, 0.0, 1.0]) + self.omega_s * d3
        x_c = self.l * d3
        top = RigidBody("top", mass=self.mass, inertia=self.inertia, position=x_c, orientation=R0,
                        velocity=np.cross(omega, x_c), angular_velocity=omega)
        return System([top, Spherical(top, ground, at=[0.0, 0.0, 0.0], name="tip"),
                       Gravity([0.0, 0.0, -self.g])])

    def height(self):
        """Exact centre-of-mass height l cos α0 in m."""
        return self.l * np.cos(self.alpha0)


def heavy_top(**kw) -> System:
    """P1 system (see :class:`HeavyTop`)."""
    return HeavyTop(**kw).system()


def free_body(inertia=(6.0, 8.0, 3.0), angular_velocity=(10.0, 20.0, 20.0), mass=1.0,
              velocity=(0.0, 0.0, 0.0), position=(0.0, 0.0, 0.0)) -> System:
    """P2: torque-free rigid body; Ω0 in body axes (initial attitude = inertial axes).

    Use inertia (1, 2, 3), Ω0 = (1e-3, 5, 1e-3) for the intermediate-axis flip.
    """
    body = RigidBody("body", mass=mass, inertia=inertia, position=position, velocity=velocity,
                     angular_velocity=angular_velocity, frame="body")
    return System([body])


@dataclass(frozen=True)
class TorqueFreeBody:
    """A torque-free rigid body (Euler–Poinsot) with the exact angular velocity by Jacobi's
    elliptic functions: principal inertia I1 < I2 < I3 (kg m²) about the centre of mass, started
    at rest translationally with body-axis angular velocity ω0 = (ω1, 0, ω3) (rad/s; the
    intermediate component zero, which fixes the elliptic functions' phase at t = 0).

    With 2T = Σ I_i ω_i² and L² = Σ I_i² ω_i² (Landau & Lifshitz, Mechanics, §37): for
    L² < 2T I2 (the body turns about its axis of least inertia)
    ω = (A dn(λt, k), B sn(λt, k), C cn(λt, k)), λ² = (I2 − I1)(2T I3 − L²)/(I1 I2 I3),
    k² = (I3 − I2)(L² − 2T I1)/((I2 − I1)(2T I3 − L²)); for L² > 2T I2 the same with the roles of
    axes 1 and 3 exchanged. A and C are the initial ω1 and ω3 (the dn factor's sign fixed by ω0,
    since dn > 0) and B follows from Euler's equation for ω2 at t = 0."""

    inertia: tuple = (1.0, 2.0, 3.0)
    omega0: tuple = (1.0, 0.0, 0.5)
    mass: float = 1.0

    def __post_init__(self):
        I, w = np.asarray(self.inertia, float), np.asarray(self.omega0, float)
        if not (I.shape == (3,) and 0 < I[0] < I[1] < I[2] and w.shape == (3,) and w[1] == 0 and w[0] * w[2] != 0):
            raise ValueError("TorqueFreeBody: inertia must be I1 < I2 < I3 and omega0 = (ω1, 0, ω3) with ω1, ω3 ≠ 0, "
                             f"got {self.inertia}, {self.omega0}.")

    def system(self) -> System:
        body = RigidBody("body", mass=self.mass, inertia=self.inertia, angular_velocity=self.omega0, frame="body")
        return System([body])

    def angular_velocity_body(self, t):
        """(len(t), 3) the exact angular velocity in body axes (rad/s) at times t (s)."""
        from scipy.special import ellipj

        (I1, I2, I3), w = np.asarray(self.inertia, float), np.asarray(self.omega0, float)
        T2, L2 = np.dot([I1, I2, I3], w**2), np.dot(np.square([I1, I2, I3]), w**2)
        about_least = L2 < T2 * I2
        if about_least:  # dn on axis 1, cn on axis 3
            lam = np.sqrt((I2 - I1) * (T2 * I3 - L2) / (I1 * I2 * I3))
            m = (I3 - I2) * (L2 - T2 * I1) / ((I2 - I1) * (T2 * I3 - L2))
        else:  # dn on axis 3, cn on axis 1
            lam = np.sqrt((I3 - I2) * (L2 - T2 * I1) / (I1 * I2 * I3))
            m = (I2 - I1) * (T2 * I3 - L2) / ((I3 - I2) * (L2 - T2 * I1))
        sn, cn, dn, _ = ellipj(lam * np.asarray(t, float), m)
        B = (I3 - I1) * w[0] * w[2] / (I2 * lam)  # I2 ω2'(0) = (I3 − I1) ω3 ω1, sn'(0) = λ
        if about_least:
            return np.stack([w[0] * dn, B * sn, w[2] * cn], axis=1)
        return np.stack([w[0] * cn, B * sn, w[2] * dn], axis=1)


@dataclass(frozen=True)
class KeplerOrbit:
    """An eccentric orbit: a rigid satellite (a box 1 × 0.5 × 0.2, spinning about its d3) in
    central gravity μ about the origin, started at pericentre; semi-major axis ``a`` and
    eccentricity ``e`` (units: μ = 1, a = 1, so the period is 2π). Its speed varies by
    (1 + e)/(1 − e) between pericentre and apocentre (19 for e = 0.9), so the step a tolerance
    needs varies as much: the test of adaptive steps (:mod:`conserve.run.adaptive`). The exact
    centre of mass (:meth:`position`) is the Kepler ellipse, by Kepler's equation."""

    a: float = 1.0
    e: float = 0.9
    mu: float = 1.0
    spin: float = 1.0

    @property
    def period(self):
        return 2 * np.pi * np.sqrt(self.a**3 / self.mu)

    def system(self) -> System:
        r_p = self.a * (1 - self.e)
        v_p = np.sqrt(self.mu * (1 + self.e) / r_p)
        box = RigidBody("satellite", mass=1.0, inertia=np.array([0.5**2 + 0.2**2, 1 + 0.2**2, 1 + 0.5**2]) / 12,
                        position=(r_p, 0.0, 0.0), velocity=(0.0, v_p, 0.0), angular_velocity=(0.0, 0.0, self.spin))
        return System([box, CentralGravity(self.mu)])

    def position(self, t):
        """(len(t), 3) the exact centre of mass at times t (s) by Kepler's equation M = E − e sin E
        (Newton's method to round-off)."""
        t = np.asarray(t, float)
        M = np.sqrt(self.mu / self.a**3) * t
        E = M + self.e * np.sin(M)
        for _ in range(50):
            E = E - (E - self.e * np.sin(E) - M) / (1 - self.e * np.cos(E))
        x = self.a * (np.cos(E) - self.e)
        y = self.a * np.sqrt(1 - self.e**2) * np.sin(E)
        return np.stack([x, y, np.zeros_like(x)], axis=1)


def kepler_orbit(**kw) -> System:
    """The eccentric orbit (see :class:`KeplerOrbit`)."""
    return KeplerOrbit(**kw).system()


@dataclass(frozen=True)
class ThompsonPendulum:
    """P6: a body on a revolute pivot at the origin about e2, centre of mass ℓ below the pivot,
    with an optional rotary spring-damper (k, b) about e2 (Thompson 2011, "Pendulum").

    Reduced equation (the reference): (J_yy + mℓ²) β'' + b β' + k β + m g ℓ sin β = 0.
    """

    m: float = 1.0
    l: float = 0.5  # noqa: E741
    inertia: tuple = (0.02, 0.03, 0.01)
    beta0: float = 1.0
    k: float = 2.0
    b: float = 0.1
    spring: bool = True
    g: float = G

    def system(self) -> System:
        R0 = rotation_vector_to_rotation([0.0, self.beta0, 0.0])
        body = RigidBody("pendulum", mass=self.m, inertia=self.inertia, position=R0 @ [0.0, 0.0, -self.l],
                         orientation=R0)
        pivot = Revolute(ground, body, at=[0.0, 0.0, 0.0], axis=[0.0, 1.0, 0.0], name="pivot")
        elements = [body, pivot, Gravity([0.0, 0.0, -self.g])]
        if self.spring:  # the joint angle is β − β0, so the spring's rest angle is −β0
            elements.append(JointSpringDamper(pivot, self.k, self.b, rest=-self.beta0, name="spring"))
        return System(elements)

    @staticmethod
    def beta(sol):
        """β(t) from the centre of mass x_c = (−ℓ sin β, 0, −ℓ cos β)."""
        x = sol["pendulum"].position
        return np.unwrap(np.arctan2(-x[:, 0], -x[:, 2]))

    def reference(self, t):
        """β(t) of the reduced equation by scipy's DOP853 at rtol 1e-12."""
        from scipy.integrate import solve_ivp

        k, b = (self.k, self.b) if self.spring else (0.0, 0.0)
        inertia = self.inertia[1] + self.m * self.l**2

        def rhs(_, y):
            return [y[1], -(b * y[1] + k * y[0] + self.m * self.g * self.l * np.sin(y[0])) / inertia]

        res = solve_ivp(rhs, (t[0], t[-1]), [self.beta0, 0.0], method="DOP853", t_eval=t, rtol=1e-12, atol=1e-14)
        return res.y[0]


def _bar(name, start, end, mass=1.0, radius=0.01, omega=(0.0, 0.0, 0.0), pivot=None, v_pivot=(0.0, 0.0, 0.0)):
    """A slender bar from ``start`` to ``end`` (d1 along it), moving rigidly with angular velocity
    ω about the point ``pivot`` that moves at ``v_pivot``."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    axis = end - start
    length = np.linalg.norm(axis)
    d1 = axis / length
    helper = np.eye(3)[np.argmin(np.abs(d1))]
    d2 = np.cross(helper, d1)
    d2 /= np.linalg.norm(d2)
    R = np.column_stack([d1, d2, np.cross(d1, d2)])
    centre = 0.5 * (start + end)
    transverse = mass * (length**2 / 12 + radius**2 / 4)
    omega = np.asarray(omega, float)
    pivot = start if pivot is None else np.asarray(pivot, float)
    return RigidBody(name, mass=mass, inertia=(0.5 * mass * radius**2, transverse, transverse), position=centre,
                     orientation=R, angular_velocity=omega, velocity=np.asarray(v_pivot) + np.cross(omega, centre - pivot))


def four_bars(loops=2, crank_speed=1.0, g=(0.0, -G, 0.0)) -> System:
    """The N-four-bar linkage: ``loops`` + 1 parallel cranks (mass 1, length 1) on ground pivots at
    x = 0, 1, …, N and N couplers joining their tips, all revolute about e3, in the x–y plane
    (the IFToMM benchmark's N four-bar mechanism: 2N + 1 bars, 3N + 1 revolute joints, one degree
    of freedom). In 3-D each planar loop makes 3 of its constraint equations redundant (3N in all,
    dropped at assembly). Initial state: cranks hanging down (−y), turning at ``crank_speed``
    rad/s. (Raised to the horizontal the parallelograms would be collinear: a change point where
    the Jacobian is singular; speed 1 cannot get there against gravity.)"""
    w = np.array([0.0, 0.0, crank_speed])
    tip_velocity = np.cross(w, [0.0, -1.0, 0.0])
    cranks = [_bar(f"crank{i}", [i, 0.0, 0.0], [i, -1.0, 0.0], omega=w) for i in range(loops + 1)]
    couplers = [_bar(f"coupler{i}", [i, -1.0, 0.0], [i + 1, -1.0, 0.0], v_pivot=tip_velocity) for i in range(loops)]
    ez = [0.0, 0.0, 1.0]
    joints = [Revolute(ground, c, at=[i, 0.0, 0.0], axis=ez, name=f"ground-crank{i}") for i, c in enumerate(cranks)]
    for i, c in enumerate(couplers):
        joints += [Revolute(cranks[i], c, at=[i, -1.0, 0.0], axis=ez, name=f"crank{i}-coupler{i}"),
                   Revolute(cranks[i + 1], c, at=[i + 1, -1.0, 0.0], axis=ez, name=f"crank{i + 1}-coupler{i}")]
    return System([*cranks, *couplers, *joints, Gravity(g)])


def double_four_bar(crank_speed=1.0, g=(0.0, -G, 0.0)) -> System:
    """P7: the N-four-bar linkage of two loops (:func:`four_bars`): five bars, three parallel cranks
    and two couplers; in 3-D 6 of the 65 constraint equations are redundant."""
    return four_bars(2, crank_speed, g)


def double_pendulum(spin=2.0) -> System:
    """Two bars: the upper hangs from the ground by a spherical joint at the origin, the lower is
    hinged to its end by a revolute joint (axis ⟂ both bars). Starts tilted and spinning about e3
    at ``spin`` rad/s, so the motion is fully spatial."""
    w = np.array([0.0, 0.0, spin])
    top, elbow, foot = np.zeros(3), np.array([0.6, 0.0, -0.8]), np.array([0.6, 0.8, -0.8])
    upper = _bar("upper", top, elbow, omega=w)
    lower = _bar("lower", elbow, foot, omega=w, pivot=top)
    hinge_axis = np.cross(elbow - top, foot - elbow)
    return System([upper, lower, Spherical(ground, upper, at=top, name="shoulder"),
                   Revolute(upper, lower, at=elbow, axis=hinge_axis, name="elbow"), Gravity()])


def slider_crank(crank_speed=5.0, motor=None) -> System:
    """Spatial slider-crank (a closed loop, 1 degree of freedom): crank (revolute to ground about
    e3, length 0.2), connecting rod (spherical joint at the crank pin, universal joint at the slider,
    length 0.6), slider (prismatic along e1 on the line y = 0.1, z = 0.3). ``motor(t, joint)``
    (``joint.value`` θ, ``joint.rate`` θ') drives the crank. Initial velocities follow from the
    crank speed through the loop's kinematics."""
    w = np.array([0.0, 0.0, crank_speed])
    pin = np.array([0.2, 0.0, 0.0])
    slider_x0 = np.array([0.2 + np.sqrt(0.36 - 0.1), 0.1, 0.3])
    rod_dir = (slider_x0 - pin) / 0.6
    u_rod = np.cross(rod_dir, [0.0, 0.0, 1.0])
    u_rod /= np.linalg.norm(u_rod)
    # velocities: v_pin = v_s e1 + (a u + b e3) × (pin − slider), solved for (v_s, a, b)
    v_pin = np.cross(w, pin)
    r = pin - slider_x0
    A = np.column_stack([[1.0, 0.0, 0.0], np.cross(u_rod, r), np.cross([0.0, 0.0, 1.0], r)])
    v_s, a, b = np.linalg.solve(A, v_pin)
    crank = _bar("crank", [0.0, 0.0, 0.0], pin, omega=w)
    rod = _bar("rod", slider_x0, pin, omega=a * u_rod + b * np.array([0.0, 0.0, 1.0]), v_pivot=[v_s, 0.0, 0.0])
    slider = RigidBody("slider", mass=0.5, inertia=(1e-3, 1e-3, 1e-3), position=slider_x0, velocity=[v_s, 0.0, 0.0])
    crank_joint = Revolute(ground, crank, at=[0.0, 0.0, 0.0], axis=[0.0, 0.0, 1.0], name="crank bearing")
    elements = [crank, rod, slider, crank_joint,
                Spherical(crank, rod, at=pin, name="crank pin"),
                Universal(rod, slider, at=slider_x0, axes=(u_rod, [0.0, 0.0, 1.0]), name="slider pin"),
                Prismatic(ground, slider, at=slider_x0, axis=[1.0, 0.0, 0.0], name="guide"), Gravity()]
    if motor is not None:
        elements.append(JointMotor(crank_joint, motor, name="crank motor"))
    return System(elements)


def spacecraft(model="hybrid", motors=True, spin_rates=(200.0, -150.0, 100.0), wheel_axial=0.02,
               wheel_transverse=0.012, wheel_mass=2.0, core_mass=100.0, core_inertia=(10.0, 15.0, 20.0),
               core_rate=(0.1, -0.05, 0.2), torque=0.05, laws=None, core_velocity=(0.0, 0.0, 0.0)) -> System:
    """P3: a core body with three balanced reaction wheels on its principal axes d1, d2, d3, centres
    at 0.5 d_i; wheel spin rates relative to the core in rad/s; no gravity. With ``motors`` (P3a)
    wheel i gets τ_i(t) = torque · sin(2πt/5 + i) (reaction on the core); without (P3b) it is a
    torque-free gyrostat. ``laws``: three functions τ_i(t) replacing those torques.
    ``model``: "hybrid" (one spin angle per wheel) or "body" (12 coordinates and a revolute joint
    per wheel). P4 (:func:`p4_spacecraft`) uses the same layout with other data."""
    core = RigidBody("core", mass=core_mass, inertia=core_inertia, angular_velocity=core_rate, frame="body",
                     velocity=core_velocity)
    wheels = []
    for i, (axis, rate) in enumerate(zip(np.eye(3), spin_rates)):
        if laws is not None:
            law = (lambda t, rotor, f=laws[i]: f(t))
        else:
            law = (lambda t, rotor, i=i: torque * jnp.sin(2 * jnp.pi * t / 5 + i)) if motors else None
        wheels.append(Rotor(f"wheel{i}", on=core, axis=axis, offset=0.5 * axis, mass=wheel_mass,
                            axial_inertia=wheel_axial, transverse_inertia=wheel_transverse, spin_rate=rate,
                            motor=law, model=model))
    return System([core, *wheels])


def p4_spacecraft(model="hybrid", u_hat=(0.2, 0.1, -0.2), t_motor=10.0) -> System:
    """P4a (hybrid-coordinate paper, spacecraft example; paper values not available, problems.md):
    core 750 kg, inertia diag(900, 800, 600); wheels 12 kg, axial 0.1591549, transverse 0.0795775,
    centres at 0.5 d_i; wheel rates (500, 200, −150) rpm relative to the core; core rate
    (0.08, 0.01, 0) rad/s; torques u_i(t) = û_i sin²(πt/10) for t ≤ 10 s, then 0; no gravity.
    The core starts at the origin with the velocity that makes the total linear momentum zero, so
    the system's centre of mass (:data:`P4_CENTRE`) stays fixed and the core circles about it."""
    laws = [lambda t, u=u: jnp.where(t <= t_motor, u * jnp.sin(jnp.pi * t / t_motor) ** 2, 0.0) for u in u_hat]
    omega = np.array([0.08, 0.01, 0.0])
    wheel_mass, core_mass = 12.0, 750.0
    velocity = -wheel_mass * np.cross(omega, 0.5 * np.ones(3)) / (core_mass + 3 * wheel_mass)
    return spacecraft(model, spin_rates=tuple(np.array([500.0, 200.0, -150.0]) * 2 * np.pi / 60), wheel_axial=0.1591549,
                      wheel_transverse=0.0795775, wheel_mass=wheel_mass, core_mass=core_mass,
                      core_inertia=(900.0, 800.0, 600.0), core_rate=tuple(omega), laws=laws, core_velocity=velocity)


#: P4's fixed system centre of mass (core at the origin, wheels at 0.5 e_i), m.
P4_CENTRE = 12.0 * 0.5 * np.ones(3) / (750.0 + 36.0)


@dataclass(frozen=True)
class RotaryCrane:
    """P5: rotary crane with a winch (hybrid-coordinate paper; paper values not available).

    Tower on a revolute joint to the ground about e3 (mass 50, height 2, inertia
    diag(16.7, 16.7, 0.5)); boom fixed to the tower top at 45° elevation in the x–z plane (mass 20,
    length 2, transverse 6.7, axial 0.05); a winch drum as a hybrid rotor on the boom, axis along
    the luffing axis e2, centre 0.3 from the boom root (mass 5, radius 0.1, axial 0.025, transverse
    0.0167); a rope from the boom tip to a 10 kg load, free length L = 1.5 + r (α − α0); at rest,
    rope vertical. Slew motor τ_s = 50 sin²(πt/2) (t ≤ 2), winch motor
    τ_w = −m g r − 2 sin²(πt/2) (t ≤ 2), then −m g r (holds the load). ``stress=True``: both
    motors off, the load falls with a = g m/(m + J_a/r²)."""

    stress: bool = False
    m_load: float = 10.0
    radius: float = 0.1
    drum_axial: float = 0.025
    g: float = G

    @property
    def boom_axis(self):
        return np.array([1.0, 0.0, 1.0]) / np.sqrt(2.0)

    @property
    def tip(self):
        return np.array([0.0, 0.0, 2.0]) + 2.0 * self.boom_axis

    def drop_acceleration(self):
        """a = g m / (m + J_a / r²) of the stress variant, m/s²."""
        return self.g * self.m_load / (self.m_load + self.drum_axial / self.radius**2)

    def system(self, model="hybrid") -> System:
        """The crane with the winch drum as a hybrid rotor or (``model="body"``) a full body."""
        u = self.boom_axis
        R_boom = np.column_stack([u, [0.0, 1.0, 0.0], np.cross(u, [0.0, 1.0, 0.0])])
        tower = RigidBody("tower", mass=50.0, inertia=(16.7, 16.7, 0.5), position=(0.0, 0.0, 1.0))
        boom = RigidBody("boom", mass=20.0, inertia=(0.05, 6.7, 6.7), position=np.array([0.0, 0.0, 2.0]) + u,
                         orientation=R_boom)
        m, r, g = self.m_load, self.radius, self.g
        if self.stress:
            slew = winch_law = None
        else:
            pulse = lambda t: jnp.where(t <= 2.0, jnp.sin(jnp.pi * t / 2.0) ** 2, 0.0)  # noqa: E731
            slew = lambda t, joint: 50.0 * pulse(t)  # noqa: E731
            winch_law = lambda t, rotor: -m * g * r - 2.0 * pulse(t)  # noqa: E731
        drum = Rotor("drum", on=boom, axis=(0.0, 1.0, 0.0), offset=(-0.7, 0.0, 0.0), mass=5.0,
                     axial_inertia=self.drum_axial, transverse_inertia=0.0167, motor=winch_law, model=model)
        load = PointMass("load", mass=m, position=self.tip - [0.0, 0.0, 1.5])
        base = Revolute(ground, tower, at=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0), name="slew bearing")
        elements = [tower, boom, drum, load, base, Fixed(tower, boom, at=(0.0, 0.0, 2.0), name="boom mount"),
                    Rope(boom, load, winch=drum, radius=r, points=(self.tip, load.position), name="rope"),
                    Gravity((0.0, 0.0, -g))]
        if slew is not None:
            elements.append(JointMotor(base, slew, name="slew motor"))
        return System(elements)


def _box(name, mass, size, position, orientation=None, **motion):
    """A uniform box (size (3,) in m along its axes) at ``position``."""
    a, b, c = size
    inertia = mass / 12.0 * np.array([b**2 + c**2, a**2 + c**2, a**2 + b**2])
    return RigidBody(name, mass, inertia, position=position, orientation=orientation, **motion)


def thompson_examples(blades=4, flap_lag=False):
    """P8: Thompson's example systems (2011, §VI), built with the catalogue's joints.

    Returns {name: (System, degrees of freedom in the paper)}. Masses and sizes are plausible
    choices (the paper gives none): boxes of uniform density, SI units, no gravity except for
    the pendulum and the wind turbine, a little initial motion so that simulations move.

    - aircraft: one free body (P = 6)
    - pendulum: P6 without the spring (P = 1)
    - satellite: a core with three appendages on two-axis (universal) joints (P = 6 + 3·2 = 12)
    - connected joints: body b — spherical — h — revolute — k, b free (P = 6 + 3 + 1 = 10)
    - rotorcraft: fuselage (free), hub (revolute), ``blades`` blades on flap hinges, or flap-lag
      (universal) hinges with ``flap_lag`` (P = 7 + n L)
    - wind turbine: tower on the ground by a two-axis joint, nacelle yaw, hub spin, three blades
      with flap (P = 2 + 1 + 1 + 3 = 7)
    """
    e1, e2, e3 = np.eye(3)
    out = {}
    out["aircraft"] = (System([_box("aircraft", 1000.0, (10.0, 9.0, 2.0), (0.0, 0.0, 0.0),
                                    velocity=(50.0, 0.0, 0.0), angular_velocity=(0.1, 0.05, 0.02))]), 6)
    out["pendulum"] = (ThompsonPendulum(spring=False).system(), 1)

    core = _box("core", 500.0, (2.0, 2.0, 2.0), (0.0, 0.0, 0.0), angular_velocity=(0.0, 0.0, 0.2))
    parts = [core]
    for k in range(3):
        ang = 2 * np.pi * k / 3
        out_dir = np.array([np.cos(ang), np.sin(ang), 0.0])
        R = np.column_stack([out_dir, np.cross(e3, out_dir), e3])
        panel = _box(f"panel{k}", 20.0, (3.0, 1.0, 0.05), 2.5 * out_dir, R,
                     velocity=np.cross([0.0, 0.0, 0.2], 2.5 * out_dir), angular_velocity=(0.0, 0.0, 0.2))
        parts += [panel, Universal(core, panel, at=out_dir, axes=(np.cross(e3, out_dir), e3), name=f"hinge{k}")]
    out["satellite"] = (System(parts), 12)

    w = np.array([0.3, 0.5, 0.2])  # a rigid tumble to start from
    b = _box("b", 10.0, (0.4, 0.3, 0.6), (0.0, 0.0, 0.0), angular_velocity=w)
    h = _box("h", 3.0, (0.1, 0.1, 0.6), (0.0, 0.0, -0.6), velocity=np.cross(w, [0.0, 0.0, -0.6]), angular_velocity=w)
    k = _box("k", 1.0, (0.08, 0.08, 0.4), (0.0, 0.0, -1.1), velocity=np.cross(w, [0.0, 0.0, -1.1]), angular_velocity=w)
    out["connected joints"] = (System([b, h, k, Spherical(b, h, at=(0.0, 0.0, -0.3), name="shoulder"),
                                       Revolute(h, k, at=(0.0, 0.0, -0.9), axis=e2, name="elbow")]), 10)

    spin = 20.0  # rad/s
    fuselage = _box("fuselage", 2000.0, (8.0, 2.0, 2.5), (0.0, 0.0, 0.0))
    hub = _box("hub", 50.0, (0.5, 0.5, 0.3), (0.0, 0.0, 2.0), angular_velocity=(0.0, 0.0, spin))
    parts = [fuselage, hub, Revolute(fuselage, hub, at=(0.0, 0.0, 2.0), axis=e3, name="mast")]
    for i in range(blades):
        ang = 2 * np.pi * i / blades
        r = np.array([np.cos(ang), np.sin(ang), 0.0])
        tangent = np.cross(e3, r)
        R = np.column_stack([r, tangent, e3])
        centre = np.array([0.0, 0.0, 2.0]) + 3.0 * r
        blade = _box(f"blade{i}", 30.0, (5.0, 0.3, 0.05), centre, R, velocity=np.cross([0.0, 0.0, spin], centre),
                     angular_velocity=(0.0, 0.0, spin))
        root = np.array([0.0, 0.0, 2.0]) + 0.5 * r
        hinge = (Universal(hub, blade, at=root, axes=(tangent, e3), name=f"flap-lag{i}") if flap_lag
                 else Revolute(hub, blade, at=root, axis=tangent, name=f"flap{i}"))
        parts += [blade, hinge]
    out["rotorcraft"] = (System(parts), 7 + blades * (2 if flap_lag else 1))

    tower = _box("tower", 5000.0, (3.0, 3.0, 60.0), (0.0, 0.0, 30.0))
    nacelle = _box("nacelle", 2000.0, (6.0, 2.5, 2.5), (1.0, 0.0, 61.25))
    rotor_spin = 2.0
    hub_t = _box("rotor hub", 500.0, (1.0, 2.0, 2.0), (-2.5, 0.0, 61.25), angular_velocity=(rotor_spin, 0.0, 0.0))
    parts = [tower, nacelle, hub_t, Universal(ground, tower, at=(0.0, 0.0, 0.0), axes=(e1, e2), name="tower base"),
             Revolute(tower, nacelle, at=(0.0, 0.0, 60.0), axis=e3, name="yaw"),
             Revolute(nacelle, hub_t, at=(-2.0, 0.0, 61.25), axis=e1, name="shaft"),
             Gravity((0.0, 0.0, -G))]
    for i in range(3):
        ang = 2 * np.pi * i / 3
        r = np.array([0.0, np.cos(ang), np.sin(ang)])
        R = np.column_stack([r, np.cross(e1, r), e1])
        centre = np.array([-2.5, 0.0, 61.25]) + 10.0 * r
        blade = _box(f"turbine blade{i}", 300.0, (18.0, 1.5, 0.3), centre, R,
                     velocity=np.cross([rotor_spin, 0.0, 0.0], centre - [-2.5, 0.0, 61.25]),
                     angular_velocity=(rotor_spin, 0.0, 0.0))
        parts += [blade, Revolute(hub_t, blade, at=np.array([-2.5, 0.0, 61.25]) + r, axis=np.cross(e1, r),
                                  name=f"blade flap{i}")]
    out["wind turbine"] = (System(parts), 7)
    return out
