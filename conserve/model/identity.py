"""Laws compared by what they compute, not by identity: what lets models share compiled code
and a resumed run recognise its laws (:mod:`conserve.run.fingerprint`).

A model's *laws* are the user's motor, force, constraint and potential functions, held by its
element kinds and rotor laws (:data:`LAW_FIELDS`): static parts of the compiled step, which jax
compares by identity, so a system built anew (its laws new function objects) would trace and
compile everything again. :class:`LawHasher` hashes what a law computes: a function's bytecode
and constants, its default arguments, the values it closes over and the globals it reads
(numbers, arrays, functions, recursively; of a user's module the attributes it may read, of a
user's class its methods and data), so editing a gain in a closure, a module constant, another
module's attribute (``cfg.GAIN``) or a class attribute changes the hash, while re-creating the
same lambda, even in a new process, does not. Library callables (jax, numpy, scipy, conserve,
the standard library) are identified by name, a :class:`~conserve.Parameter` by its name (its
value is the model's). An object whose state cannot be read (no ``__dict__``, not a number, array,
container or function) makes the law *opaque*.
:func:`shared_laws` replaces a model's laws by the first equal ones seen.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import types
from collections import OrderedDict

import jax
import numpy as np

from .parameters import Parameter

#: Packages whose callables and classes are hashed by qualified name (their code is versioned).
LIBRARIES = ("jax", "jaxlib", "numpy", "scipy", "conserve", "math", "builtins", "functools", "operator",
             "typing", "collections")


#: The fields of a Model that hold its laws: the element kinds and rotor motor laws, static parts
#: of the compiled step (compared by identity there), whose functions the step calls.
LAW_FIELDS = ("constraint_kinds", "potential_kinds", "coordinate_kinds", "load_kinds", "rotor_laws", "controllers")

#: Laws seen by :func:`shared_laws`: (the model's structure without its laws, its laws or their
#: digest) -> the laws of the first model seen with them; at most ``MAX_SHARED`` entries.
_shared: OrderedDict = OrderedDict()
MAX_SHARED = 128


def shared_laws(model):
    """The model with its laws replaced by those of an earlier model of the same structure whose
    laws compute the same (see the module docstring), so that the code compiled for the first
    serves: a system built anew by the same function — its laws new function objects, which
    compiled code tells apart by identity — traces and compiles nothing again, neither its
    assembly's checks nor its runs (without it, a second ``simulate`` of ``RotaryCrane().system()``
    compiles both again, seconds; measurements: benchmarks/results/defaults.md, section
    ``shared_laws``). Laws that cannot be compared (opaque) are kept, as is a model seen
    first. Called by :meth:`conserve.System.assemble`."""
    laws = tuple(getattr(model, f) for f in LAW_FIELDS)
    lawless = jax.tree.structure(dataclasses.replace(model, **dict.fromkeys(LAW_FIELDS, ())))
    try:
        known = _shared.get((lawless, laws))  # these very law objects seen before: nothing to hash
    except TypeError:  # a law kind that cannot be hashed: compared by identity, as in the compiled step
        return model
    if known is None:
        hasher = LawHasher()
        hasher.add(laws)
        if hasher.opaque:
            return model
        known = _shared.setdefault((lawless, hasher.hexdigest()), laws)
        _shared[(lawless, laws)] = known
        while len(_shared) > MAX_SHARED:
            _shared.popitem(last=False)
    if known is laws or known == laws:  # the first, or kinds equal as they are (no functions in them)
        return model
    return dataclasses.replace(model, **dict(zip(LAW_FIELDS, known)))


class LawHasher:
    """Feeds a value's meaning into a sha256 (see the module docstring)."""

    def __init__(self):
        self._h = hashlib.sha256()
        self._seen = {}  # id -> object: holding it keeps its id from being reused by a temporary
        self._names = frozenset()  # the names the function being hashed reads (globals, attributes)
        self.opaque = []

    def hexdigest(self):
        return self._h.hexdigest()

    def _put(self, *tokens):
        for t in tokens:
            self._h.update(t if isinstance(t, bytes) else str(t).encode())
            self._h.update(b"\x00")

    def add(self, x):
        if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
            return self._put(type(x).__name__, repr(x))
        if isinstance(x, (np.ndarray, np.generic, jax.Array)):
            a = np.asarray(x)
            return self._put("array", a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes())
        if isinstance(x, Parameter):  # its value is the model's, not the law's: only its name counts
            return self._put("parameter", x.name)
        if isinstance(x, jax.tree_util.PyTreeDef):  # a structure (a controller's state)
            return self._put("treedef", str(x))
        # seen before (recursion: a function reading itself through its globals); a module per
        # set of names read from it
        key = (id(x), self._names) if isinstance(x, types.ModuleType) else id(x)
        if key in self._seen:
            return self._put("seen", type(x).__name__)
        self._seen[key] = x
        if isinstance(x, (tuple, list)):
            self._put(type(x).__name__, len(x))
            for item in x:
                self.add(item)
        elif isinstance(x, dict):
            self._put("dict", len(x))
            for k in sorted(x, key=repr):
                self.add(k)
                self.add(x[k])
        elif isinstance(x, types.ModuleType):  # a user's module: the attributes the law may read
            self._put("module", x.__name__)
            if not _library(x.__name__):
                self.add({n: getattr(x, n) for n in sorted(self._names) if hasattr(x, n)})
        elif _by_name(x):
            self._put("named", x.__module__, x.__qualname__)
        elif isinstance(x, type):  # a user's class: its name, the code of its methods, its data
            self._put("class", x.__module__, x.__qualname__)
            self.add({k: getattr(v, "__func__", v) for k, v in vars(x).items()
                      if isinstance(getattr(v, "__func__", v), types.FunctionType)
                      or (isinstance(v, _DATA) and not k.startswith("__"))})
        elif isinstance(x, functools.partial):
            self._put("partial")
            self.add((x.func, x.args, x.keywords))
        elif isinstance(x, types.MethodType):
            self._put("method")
            self.add((x.__func__, x.__self__))
        elif isinstance(x, types.FunctionType):
            self._function(x)
        elif isinstance(x, types.CodeType):
            self._code(x)
        elif dataclasses.is_dataclass(x):
            self._put("dataclass", type(x).__module__, type(x).__qualname__)
            self.add({f.name: getattr(x, f.name) for f in dataclasses.fields(x)})
        elif hasattr(x, "__dict__") or hasattr(type(x), "__slots__"):
            state = dict(getattr(x, "__dict__", {}))
            state.update({s: getattr(x, s) for s in getattr(type(x), "__slots__", ()) if hasattr(x, s)})
            self._put("object", type(x).__module__, type(x).__qualname__)
            self.add(state)
        else:
            self.opaque.append(f"a {type(x).__qualname__} object")
            self._put("opaque", type(x).__qualname__)

    def _function(self, fn):
        self._put("function")
        self._code(fn.__code__)
        names = frozenset(_global_names(fn.__code__))  # globals and attribute names: a module's attributes it reads
        outer, self._names = self._names, names
        self.add((fn.__defaults__, fn.__kwdefaults__))
        self.add(tuple(_cell(c) for c in fn.__closure__ or ()))
        self.add({n: fn.__globals__[n] for n in sorted(names) if n in fn.__globals__})
        self._names = outer

    def _code(self, code):
        self._put("code", code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_argcount)
        for c in code.co_consts:
            self.add(c)


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a closure variable not yet bound)
        return None


def _global_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names


#: Class attributes hashed with a user's class besides its methods (a gain kept on the class).
_DATA = (bool, int, float, complex, str, bytes, np.ndarray, np.generic, tuple, list, dict)


def _library(module):
    return module.split(".")[0] in LIBRARIES and not module.startswith("conserve.problems")


def _by_name(x):
    """Library classes, callables and top-level functions are identified by their name; a library
    function defined inside another (a wrapper carrying a user's law) is hashed by content, as is
    a library callable without a name of its own (an instance holding a user's law)."""
    module = getattr(x, "__module__", None)
    if not isinstance(module, str) or not _library(module):
        return False
    if isinstance(x, types.FunctionType):
        return "<" not in x.__qualname__
    return isinstance(x, type) or (callable(x) and isinstance(getattr(x, "__qualname__", None), str)
                                   and not isinstance(x, (functools.partial, types.MethodType)))
