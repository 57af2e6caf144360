"""conserve — energy-momentum conserving simulation of multibody systems.

Importing conserve enables jax float64 (see :mod:`conserve._x64`).
"""

from . import _x64  # noqa: F401  (must run before any jax array is created)
from . import kinematics, problems  # noqa: F401
from .discrete import Newton
from .errors import (ConvergenceError, InconsistentInitialState, InvalidInertia, InvalidMass,
                     InvalidOrientation, ModelError, SimulationError)
from .model import Gravity, PointMass, RigidBody, Spherical, System, ground
from .simulate import simulate
from .solution import Solution

__version__ = "0.1.0"

__all__ = [
    "Newton", "ConvergenceError", "InconsistentInitialState", "InvalidInertia", "InvalidMass",
    "InvalidOrientation", "ModelError", "SimulationError", "Gravity", "PointMass", "RigidBody",
    "Spherical", "System", "ground", "simulate", "Solution",
]
