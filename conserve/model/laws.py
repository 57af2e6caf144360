"""User laws — motor, force and torque, constraint and potential functions — checked once at
assembly by an abstract evaluation (``jax.eval_shape``: no numbers are computed).

A law runs inside the compiled step, on traced values, so the usual Python mistakes surface
there as jax internals: numpy called on a tracer, a Python ``if`` on a traced value, a wrong
number of arguments, a missing ``return``, a (1,)-array where a scalar is meant (which jax
would silently broadcast). :func:`check` turns each into a :class:`~conserve.errors.ModelError`
that names the element, the law's expected signature and return shape, and the fix.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..kinematics.frames import Frame
from .terms import BodyState, JointState, RotorState

#: Abstract arguments of the laws (float64 scalars, vectors, matrices).
SCALAR = jax.ShapeDtypeStruct((), jnp.float64)
VECTOR = jax.ShapeDtypeStruct((3,), jnp.float64)
MATRIX = jax.ShapeDtypeStruct((3, 3), jnp.float64)
BODY = BodyState(VECTOR, VECTOR, MATRIX, VECTOR)
ROTOR = RotorState(SCALAR, SCALAR, BODY)
JOINT = JointState(SCALAR, SCALAR, BODY)
FRAME = Frame(VECTOR, MATRIX)


@dataclass(frozen=True)
class Law:
    """A user function and what it must be: ``what`` it is (``"motor law"``), its ``signature``
    and the meaning of its result for messages, abstract ``args`` to call it with, and the
    required result ``shape`` (None: any shape of at most one axis)."""

    what: str
    fn: object
    signature: str
    args: tuple
    shape: tuple | None
    returns: str


def check_all(owner: str, laws):
    """:func:`check` each law of the element ``owner`` in turn; a law whose ``args`` are None is
    a function of the previous law's result (an energy of invariants)."""
    shape = None
    for law in laws:
        if law.args is None:
            law = replace(law, args=(jax.ShapeDtypeStruct(shape or (1,), jnp.float64),))
        shape = check(owner, law)


def check(owner: str, law: Law):
    """Evaluate ``law`` abstractly; raise a ModelError naming ``owner`` if it cannot run in the
    step or returns the wrong shape or type. Returns the shape of its result."""
    where = f"'{owner}': its {law.what} {law_name(law.fn)}"
    expected = f"Expected: {law.signature}, returning {law.returns}"
    try:
        inspect.signature(law.fn).bind(*law.args)
    except TypeError as err:
        raise ModelError(f"{where} has the wrong signature ({err}). {expected}.") from None
    except ValueError:  # no signature to inspect (a builtin): let the call decide
        pass
    try:
        # a new function object each time: jax caches abstract evaluations by function, and a law
        # must run again for assembly to record the Parameters it reads (a System assembled twice)
        out = jax.eval_shape(lambda *args: law.fn(*args), *law.args)
    except jax.errors.TracerArrayConversionError:
        raise ModelError(f"{where} converts a traced value to a numpy array (a numpy function such as np.sin, or "
                         "np.array, applied to its arguments); laws run inside the compiled step: use jax.numpy "
                         f"(import jax.numpy as jnp; jnp.sin, jnp.array). {expected}.") from None
    except (jax.errors.TracerBoolConversionError, jax.errors.ConcretizationTypeError,
            jax.errors.TracerIntegerConversionError):
        raise ModelError(f"{where} branches on a traced value (a Python if/while/and/or, bool(), int() or float() "
                         "of its arguments); its inputs are only known inside the compiled step: use "
                         f"jnp.where(condition, a, b) (or jax.lax.cond). {expected}.") from None
    except Exception as err:  # noqa: BLE001 — any error of the user's code, named and kept as the cause
        raise ModelError(f"{where} fails: {type(err).__name__}: {err}. {expected}.") from err
    if out is None:
        raise ModelError(f"{where} returns None (a missing return statement?). {expected}.")
    leaves = jax.tree.leaves(out)
    if isinstance(out, (list, tuple)) and all(np.shape(x) == () for x in leaves):
        shape, dtypes = (len(leaves),), [x.dtype for x in leaves]  # [fx, fy, fz]: read as an array
    elif len(leaves) == 1 and hasattr(leaves[0], "shape"):
        shape, dtypes = tuple(leaves[0].shape), [leaves[0].dtype]
    else:
        raise ModelError(f"{where} returns {type(out).__name__}, not an array. {expected}.")
    if law.shape == (1,) and shape == ():  # one equation returned as a scalar: read as (1,)
        shape = (1,)
    if law.shape is not None and shape != law.shape or law.shape is None and len(shape) > 1:
        raise ModelError(f"{where} returns shape {shape}, expected {law.shape if law.shape is not None else '(k,)'}"
                         f" ({law.returns}); jax would broadcast it silently. {expected}.")
    for dtype in dtypes:
        kind = np.dtype(dtype).kind
        if kind not in "iuf" or (kind == "f" and np.dtype(dtype).itemsize < 8):
            raise ModelError(f"{where} returns {np.dtype(dtype).name} values; conserve computes in float64: return "
                             f"real float64 (or integer) numbers, e.g. drop a dtype=jnp.float32. {expected}.")
    return shape


def positional_arity(fn):
    """The number of positional parameters ``fn`` requires, or None if it cannot be read (a builtin,
    ``*args``): how a law's form is recognised."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)


def deprecated_form(owner: str, old: str, new: str):
    """Warn that the element ``owner``'s law uses the old form ``old``; ``new`` is the one to write."""
    warnings.warn(f"'{owner}': a law {old} is deprecated and will be removed; write {new} (every law is "
                  "law(t, state) with a typed state, see the Force, JointMotor and Rotor docs).",
                  DeprecationWarning, stacklevel=4)


def as_array(fn):
    """fn with its result as a float64 array (a law may return a list such as [0.0, 0.0, f])."""
    def law(*args):
        return jnp.asarray(fn(*args), dtype=jnp.float64)

    law.__wrapped__ = fn
    return law


def law_name(fn):
    fn = inspect.unwrap(fn)
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    code = getattr(fn, "__code__", None)
    return f"'{name}'" + (f" ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})" if code else "")
