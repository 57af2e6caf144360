"""Studies that consume Solutions: convergence and work-precision."""

from .convergence import (ConvergenceTable, convergence, energy_error, marker_error, momentum_error,
                          relative_error)

__all__ = ["ConvergenceTable", "convergence", "energy_error", "marker_error", "momentum_error", "relative_error"]
