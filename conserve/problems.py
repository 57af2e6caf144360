"""The benchmark problems of ``shared/problems.md``, built with the public API.

Examples, reproductions, tests and benchmarks all use these builders so that results are
comparable across backends and with other software. SI units throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from .model import Gravity, RigidBody, Spherical, System, ground

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
        R0 = Rotation.from_rotvec([self.alpha0, 0.0, 0.0]).as_matrix()
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
