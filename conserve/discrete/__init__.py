"""Discrete gradients in invariant space and the Newton solver shared by the backends."""

from .gradient import discrete_gradient
from .newton import Newton, newton_solve

__all__ = ["discrete_gradient", "Newton", "newton_solve"]
