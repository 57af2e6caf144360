"""Time-stepping backends. The energy-momentum ones (director, reduced) provide
``step(model, state, lam, t, h, newton)`` (see :func:`conserve.backends.director.step` for the
contract) and ``unknowns(model)``, the Newton unknowns per step; "ode" integrates Thompson's
reduced ODE with scipy instead (``integrate``)."""

from . import director, ode, reduced

#: backend name -> module
BACKENDS = {"director": director, "reduced": reduced, "ode": ode}

__all__ = ["BACKENDS", "director", "ode", "reduced"]
