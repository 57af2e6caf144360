"""Control in the loop: :class:`Controller` (one sampled law for many actuators, with its own
state), the sensors it reads (:mod:`.sensors`) and helpers for attitude control (:mod:`.attitude`)."""

from . import attitude, sensors
from .controller import Actuator, Controller, force, motor, torque

__all__ = ["Actuator", "Controller", "attitude", "force", "motor", "sensors", "torque"]
