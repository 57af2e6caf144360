"""What the user builds: parts, joints, forces, the system, and its assembled form."""

from .assembled import Energy, Model, State
from .bodies import Ground, PointMass, RigidBody, ground
from .forces import Gravity
from .joints import Spherical
from .system import Assembly, Layout, System

__all__ = ["Energy", "Model", "State", "Ground", "PointMass", "RigidBody", "ground", "Gravity",
           "Spherical", "Assembly", "Layout", "System"]
