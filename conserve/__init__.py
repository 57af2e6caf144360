"""conserve — energy-momentum conserving simulation of multibody systems.

Importing conserve enables jax float64 (see :mod:`conserve._x64`).
"""

from . import _x64  # noqa: F401  (must run before any jax array is created)
from . import kinematics, problems, studies  # noqa: F401
from .adaptive import Adaptive
from .compilation import enable_compilation_cache
from .discrete import Newton
from .errors import (CoarseStepWarning, ConstraintWarning, ConvergenceError, FileError, InconsistentInitialState,
                     InvalidInertia, InvalidMass, InvalidOrientation, ModelError, SimulationError)
from .model import (CentralGravity, Constraint, Cylindrical, Distance, Fixed, Force, Gravity, JointDrive, JointMotor,
                    JointSpringDamper, Parallel, Perpendicular, Planar, PointMass, Potential, Prismatic,
                    Revolute, RigidBody, Rope, Rotor, Spherical, SpringDamper, System, Torque,
                    Universal, ground)
from .model.parameters import Parameter
from .model.terms import BodyState, JointState, RotorState
from .linearize import Linearization, linearize
from .posing import pose, set_joints
from .reactions import Reaction, joint_reactions
from .ensemble import Ensemble, simulate_batch
from .simulate import resume, simulate
from .solution import Solution
from .stepping import energy, initial_state, step, trajectory

__version__ = "0.1.0"

__all__ = [
    "Newton", "CoarseStepWarning", "ConstraintWarning", "ConvergenceError", "FileError", "InconsistentInitialState",
    "InvalidInertia", "InvalidMass",
    "InvalidOrientation", "ModelError", "SimulationError", "CentralGravity", "Constraint", "Cylindrical",
    "Distance", "Fixed", "Force", "Gravity", "JointDrive", "JointMotor", "JointSpringDamper", "Parallel",
    "Perpendicular", "Planar", "PointMass", "Potential", "Prismatic", "Revolute", "RigidBody", "Rope", "Rotor",
    "RotorState", "BodyState", "JointState",
    "Spherical", "SpringDamper",
    "System", "Torque", "Universal", "ground", "resume", "simulate", "Solution", "linearize", "Linearization",
    "joint_reactions", "Reaction", "step", "initial_state", "energy",
    "enable_compilation_cache", "Adaptive", "simulate_batch", "Ensemble", "Parameter", "trajectory", "set_joints",
    "pose",
]
