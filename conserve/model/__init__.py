"""What the user builds: parts, joints, forces, the system, and its assembled form."""

from .assembled import Energy, Model, State
from .beams import Beam, DistributedLoad, Section
from .bodies import Ground, PointMass, RigidBody, ground
from .custom import Constraint, Potential
from .drives import JointDrive
from .forces import CentralGravity, Force, Gravity, JointMotor, JointSpringDamper, SpringDamper, Torque
from .rope import Rope
from .rotors import Rotor
from .terms import RotorState
from .joints import (Cylindrical, Distance, Fixed, Parallel, Perpendicular, Planar, Prismatic, Revolute,
                     Spherical, Translational, Universal)
from .system import Assembly, Layout, System

__all__ = ["Energy", "Model", "State", "Beam", "DistributedLoad", "Section",
           "Ground", "PointMass", "RigidBody", "ground", "Constraint",
           "Potential", "CentralGravity", "Force", "Gravity", "JointDrive", "JointMotor", "JointSpringDamper",
           "SpringDamper", "Torque", "Cylindrical", "Distance", "Fixed", "Parallel", "Perpendicular",
           "Planar", "Prismatic", "Revolute", "Spherical", "Translational", "Universal", "Rope", "Rotor", "RotorState",
           "Assembly", "Layout", "System"]
