"""Exceptions. Every message names the part (body, joint, force) and says how to fix the input."""

from __future__ import annotations

import numbers


class ModelError(ValueError):
    """The model as given cannot be simulated (bad parameters, inconsistent initial state)."""


class InvalidMass(ModelError):
    """A mass that is not positive and finite."""


class InvalidInertia(ModelError):
    """An inertia tensor that is not symmetric positive definite or violates the triangle inequality."""


class InvalidOrientation(ModelError):
    """An orientation that is not a proper rotation (non-orthonormal, reflection, non-unit quaternion)."""


class InconsistentInitialState(ModelError):
    """An initial position or velocity that violates a joint's constraint."""


class FileError(ModelError):
    """A file given to :meth:`conserve.Solution.load` or :func:`conserve.resume` that is not a
    readable conserve file (corrupt, truncated, foreign or of another format version). Such files
    are never unpickled: nothing in them is executed."""


class SimulationError(RuntimeError):
    """A time step could not be completed.

    Attributes
    ----------
    partial_solution : Solution
        Everything computed up to and including the last converged step.
    step : int
        Index n of the failed step t_n -> t_{n+1}.
    time : float
        Time t_n at the start of the failed step, in s.
    residual_history : numpy.ndarray
        Max-norm of the Newton residual at each iteration of the failed step.
    """

    def __init__(self, message, *, partial_solution=None, step=None, time=None, residual_history=None):
        super().__init__(message)
        self.partial_solution = partial_solution
        self.step = step
        self.time = time
        self.residual_history = residual_history


class ConvergenceError(SimulationError):
    """Newton's method did not converge within the iteration limit (or produced NaN)."""


class CoarseStepWarning(UserWarning):
    """A step too coarse for the motion it has to follow (a part turning more than about a
    radian per step): the run conserves exactly, but its trajectory is far from converged."""


class ConstraintWarning(UserWarning):
    """A constraint the step does not solve was violated during a run: a row dropped at assembly
    as redundant, which was dependent on the others only at the initial configuration."""


class ModelImportWarning(UserWarning):
    """Parts of an imported model (MJCF, URDF) with no conserve counterpart — contacts, joint
    limits, armature, tendons, … —, listed by name: the run goes without them."""


def is_count(x) -> bool:
    """True if x is an integer (a Python or numpy one; not a bool): what a number of steps, a chunk
    length or a number of subdivisions must be (checked, with a message, where it is given)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)
