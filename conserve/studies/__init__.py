"""Studies that consume Solutions: convergence and work-precision, parameter sweeps."""

from .convergence import ConvergenceTable, convergence, energy_error, marker_error, momentum_error, relative_error
from .sweep import sweep

__all__ = ["ConvergenceTable", "convergence", "energy_error", "marker_error", "momentum_error", "relative_error",
           "sweep"]
