"""Time-stepping backends. Each provides ``step(model, state, lam, t, h, newton)``; see
:mod:`conserve.backends.director` for the contract."""

from . import director

#: backend name -> step function
BACKENDS = {"director": director.step}

__all__ = ["BACKENDS", "director"]
