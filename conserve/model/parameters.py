"""Parameters: numbers a user's law reads that the model holds, so that ensembles vary them and
``jax.grad`` differentiates them.

A law is code (static in the compiled step); a number it closes over is a constant of that
code: changing it means another structure (recompilation, no ensemble over it, no derivative).
A :class:`Parameter` is a named number whose ``.value`` the law reads instead::

    gain = cs.Parameter("gain", 0.05)                       # N m
    wheel = cs.Rotor(..., motor=lambda t, rotor: gain.value * jnp.sin(t))

Assembly finds the parameters a system's laws read (while it checks them, :mod:`.laws`) and
stores their values in ``model.parameters`` ({name: float64 scalar}); inside a step, ``.value``
is the model's entry (:func:`bound`), a traced array that ``cs.simulate_batch`` batches and
``jax.grad`` differentiates; outside one, the Parameter's own value. Laws that read parameters
are compared by the parameters' names, not values (:mod:`conserve.run.fingerprint`): members of an
ensemble built by one function with other values share their laws.
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import jax.numpy as jnp

from ..errors import ModelError

_bound = contextvars.ContextVar("conserve_parameters", default=None)  # {name: array} inside a step
_read = contextvars.ContextVar("conserve_parameters_read", default=None)  # {name: Parameter} at assembly


class Parameter:
    """A named number a law reads by ``.value`` (see the module docstring).

    name : str, unique within a system (it keys ``model.parameters``)
    value : float, its value in this system (the units the law gives it)
    """

    __slots__ = ("name", "_value")

    def __init__(self, name, value):
        if not (isinstance(name, str) and name):
            raise ModelError(f"Parameter: name must be a non-empty string, got {name!r}.")
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ModelError(f"Parameter '{name}': value must be a number, got {value!r}.") from None
        if not math.isfinite(value):
            raise ModelError(f"Parameter '{name}': value must be finite, got {value}.")
        self.name, self._value = name, value

    @property
    def value(self):
        """The model's value inside a step (a traced float64 scalar), else this Parameter's own."""
        read = _read.get()
        if read is not None:
            other = read.setdefault(self.name, self)
            if other is not self and other._value != self._value:
                raise ModelError(f"two Parameters are named '{self.name}' ({other._value:g} and {self._value:g}); "
                                 "give each parameter of a system its own name.")
        values = _bound.get()
        if values is not None and self.name in values:
            return values[self.name]
        return jnp.asarray(self._value)

    def __repr__(self):
        return f"Parameter({self.name!r}, {self._value!r})"


@contextlib.contextmanager
def bound(parameters):
    """Inside the block, a Parameter's ``.value`` is ``parameters[name]`` (the model's, possibly
    traced): the step, its diagnostics and its derivatives see the model's values."""
    token = _bound.set(parameters)
    try:
        yield
    finally:
        _bound.reset(token)


@contextlib.contextmanager
def recording():
    """Collect the Parameters read inside the block (by the law checks at assembly): yields the
    {name: Parameter} dict it fills."""
    read = {}
    token = _read.set(read)
    try:
        yield read
    finally:
        _read.reset(token)
