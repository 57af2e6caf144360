"""Kinematics of director frames: rotations in and out, angular velocity, material points."""

from .frames import GROUND_BLOCKS, Frame, material_point, material_vector
from .rotations import (
    angular_velocity,
    as_rotation_matrix,
    cayley,
    rotation_to_quaternion,
)

__all__ = [
    "GROUND_BLOCKS",
    "Frame",
    "material_point",
    "material_vector",
    "angular_velocity",
    "as_rotation_matrix",
    "cayley",
    "rotation_to_quaternion",
]
