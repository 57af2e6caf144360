"""Time-stepping backends behind one contract (:mod:`.base`): the energy-momentum step backends
:class:`~.director.Director` and :class:`~.reduced.Reduced` (and the wrappers
:class:`~.compose.Composition`, higher order, and :class:`~.subdivide.Subdividing`, recovery),
and the reference integrator :class:`~.ode.ODE`."""

from .base import Carry, ReferenceBackend, StepBackend, StepOutput
from .compose import Composition
from .director import Director
from .ode import ODE
from .reduced import Reduced
from .subdivide import Subdividing

#: backend name -> class, for ``simulate(..., backend="director")``
BACKENDS = {"director": Director, "reduced": Reduced, "ode": ODE}

__all__ = ["BACKENDS", "Carry", "Composition", "Director", "ODE", "ReferenceBackend", "Reduced", "StepBackend",
           "StepOutput", "Subdividing"]
