"""conserve — energy-momentum conserving simulation of multibody systems.

The public names, by layer (``docs/guide/architecture.rst``): the model one builds
(:mod:`conserve.model`), the step's options (:mod:`conserve.discrete`), the run
(:mod:`conserve.run`), its results (:mod:`conserve.results`) and studies
(:mod:`conserve.studies`). They are loaded on first use (PEP 562), so ``import conserve`` — and
``conserve --help`` — import no jax; the exceptions are loaded at once. Importing conserve
switches jax to float64 (:mod:`conserve._x64`).
"""

import importlib as _importlib

from . import _x64, compilation  # noqa: F401  (jax's settings, before jax computes: float64, XLA's loop kernels)
from .errors import (
    CoarseStepWarning,
    ConstraintWarning,
    ConvergenceError,
    FileError,
    InconsistentInitialState,
    InvalidInertia,
    InvalidMass,
    InvalidOrientation,
    ModelError,
    ModelImportWarning,
    SimulationError,
)

_x64.enable()

__version__ = "0.1.0"

#: the module each public name lives in, imported on the name's first use
_HOMES = {
    **dict.fromkeys(("Beam", "DistributedLoad", "Section", "CentralGravity", "Constraint", "Cylindrical",
                     "Distance", "Fixed", "Force", "Gravity", "JointDrive", "JointMotor", "JointSpringDamper",
                     "Parallel", "Perpendicular", "Planar",
                     "PointMass", "Potential", "Prismatic", "Revolute", "RigidBody", "Rope", "Rotor", "Spherical",
                     "SpringDamper", "System", "Torque", "Translational", "Universal", "ground"), "model"),
    "Parameter": "model.parameters",
    **dict.fromkeys(("from_mjcf", "from_urdf"), "importers.mjcf"),
    **dict.fromkeys(("Controller", "sensors"), "control"),
    **dict.fromkeys(("BodyState", "JointState", "RotorState"), "model.terms"),
    "Newton": "discrete",
    **dict.fromkeys(("simulate", "resume"), "run.simulate"),
    "Adaptive": "run.adaptive",
    **dict.fromkeys(("simulate_batch", "Ensemble"), "run.ensemble"),
    **dict.fromkeys(("step", "trajectory", "initial_state", "energy"), "run.stepping"),
    **dict.fromkeys(("set_joints", "pose"), "run.posing"),
    **dict.fromkeys(("enable_compilation_cache", "disable_compilation_cache", "clear_compilation_cache"),
                    "compilation.cache"),
    "Solution": "results.solution",
    **dict.fromkeys(("joint_reactions", "Reaction"), "results.reactions"),
    **dict.fromkeys(("linearize", "Linearization"), "studies.linearize"),
    **dict.fromkeys(("equilibrium", "Equilibrium"), "studies.equilibrium"),
}

#: the package's modules that are public names themselves (``cs.problems``, ``cs.studies``, …)
_MODULES = ("kinematics", "model", "control", "importers", "discrete", "backends", "results", "run", "studies",
            "problems", "compilation")

__all__ = ["CoarseStepWarning", "ConstraintWarning", "ConvergenceError", "FileError", "InconsistentInitialState",
           "InvalidInertia", "InvalidMass", "InvalidOrientation", "ModelError", "ModelImportWarning", "SimulationError",
           *_HOMES]


def __getattr__(name):
    """The public name ``name`` or the package's module ``name``, imported on first use."""
    if name not in _HOMES and name not in _MODULES:
        raise AttributeError(f"module 'conserve' has no attribute {name!r}")
    _x64.enable()
    module = _importlib.import_module(f"{__name__}.{_HOMES.get(name, name)}")
    value = getattr(module, name) if name in _HOMES else module
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *__all__, *_MODULES})
