"""conserve — energy-momentum conserving simulation of multibody systems.

Importing conserve enables jax float64 (see :mod:`conserve._x64`): at once when jax is already
imported, else through the environment variable ``JAX_ENABLE_X64=1`` that jax reads when it is
imported (and again by ``jax.config`` when conserve's first name is used). The names below are
loaded on first use (PEP 562), so ``import conserve`` — and ``conserve --help`` — do not import jax;
the exceptions are loaded at once (``except cs.ConvergenceError`` needs nothing else).
"""

import importlib as _importlib
import importlib.util as _util
import os as _os
import sys as _sys
import types as _types

from .errors import (CoarseStepWarning, ConstraintWarning, ConvergenceError, FileError, InconsistentInitialState,
                     InvalidInertia, InvalidMass, InvalidOrientation, ModelError, SimulationError)

if "jax" in _sys.modules:
    from . import _x64  # noqa: F401  (before conserve creates any jax array)
else:
    _os.environ["JAX_ENABLE_X64"] = "1"  # read by jax when it is imported, by conserve or by the user

__version__ = "0.1.0"

#: where each public name lives (a module of the package, imported on the name's first use)
_HOMES = {
    "Adaptive": "adaptive", "enable_compilation_cache": "compilation", "Newton": "discrete",
    **{name: "model" for name in (
        "CentralGravity", "Constraint", "Cylindrical", "Distance", "Fixed", "Force", "Gravity", "JointDrive",
        "JointMotor", "JointSpringDamper", "Parallel", "Perpendicular", "Planar", "PointMass", "Potential",
        "Prismatic", "Revolute", "RigidBody", "Rope", "Rotor", "Spherical", "SpringDamper", "System", "Torque",
        "Universal", "ground")},
    "Parameter": "model.parameters", "BodyState": "model.terms", "JointState": "model.terms",
    "RotorState": "model.terms", "Linearization": "linearize", "linearize": "linearize", "set_joints": "posing", "pose": "posing",
    "Reaction": "reactions", "joint_reactions": "reactions", "Ensemble": "ensemble", "simulate_batch": "ensemble",
    "resume": "simulate", "simulate": "simulate", "Solution": "solution", "energy": "stepping",
    "initial_state": "stepping", "step": "stepping", "trajectory": "stepping",
}
#: the package's modules that are public names themselves
_MODULES = ("kinematics", "problems", "studies")

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


def __getattr__(name):
    """The public name ``name``, or the package's module of that name (``cs.backends``), imported
    on first use (jax float64 first)."""
    if name not in _HOMES and (name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None):
        raise AttributeError(f"module 'conserve' has no attribute {name!r}")
    _importlib.import_module(f"{__name__}._x64")
    module = _importlib.import_module(f"{__name__}.{_HOMES.get(name, name)}")
    value = getattr(module, name) if name in _HOMES else module
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_MODULES))


class _Package(_types.ModuleType):
    """The package's module object: importing its modules ``simulate`` and ``linearize`` does not
    bind those names to the modules (as Python's import system would), since they are the functions
    ``simulate`` and ``linearize``."""

    def __setattr__(self, name, value):
        if name in _HOMES and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
