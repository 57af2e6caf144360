"""The contract of a time-stepping backend: what :func:`conserve.simulate` and :func:`conserve.step`
need from it, and the records it returns.

A **step backend** (the energy-momentum ones: :class:`~conserve.backends.director.Director`,
:class:`~conserve.backends.reduced.Reduced`, and the wrapper
:class:`~conserve.backends.subdivide.Subdividing`) is a hashable value (a frozen dataclass
holding its options, e.g. its Newton options) with a pure step

    carry_{n+1}, record = backend.step(model, carry_n, t_n, h)

on a :class:`Carry` — the :class:`~conserve.model.assembled.State` and the scaled multipliers
λ̃ = (h²/2) λ of the last step, Newton's next initial guess. The step is traced once and run in
a compiled loop (a ``jax.lax.while_loop`` over a chunk of steps, :mod:`conserve.run.simulate`); it
must be a pure jax function of its array arguments (jit, vmap, and — through the
implicit-function rule of the Newton solve — grad). Backends that eliminate multipliers recover
them after the run (:meth:`StepBackend.recover_multipliers`).

A **reference backend** (``"ode"``: scipy's solve_ivp on Thompson's reduced ODE) is not a
discrete scheme: it integrates a whole run at once and is a separate path of
:func:`conserve.simulate`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..discrete.linear import BlockTree, BorderedTree, Dense
from ..discrete.newton import MEMBERS
from ..discrete.scheme import StepRecord
from ..model.assembled import Model, State


class Carry(NamedTuple):
    """What a step carries to the next: the ``state`` at t_n, the scaled ``multipliers``
    λ̃ = (h²/2) λ (n_c,) of the last step (Newton's initial guess; zeros at the start), for a
    backend that reuses Newton matrices across steps its ``memory``
    (:class:`~conserve.discrete.newton.NewtonMemory`; None for one that does not) and, for one
    that extrapolates its initial guess from the last steps, their ``trend``
    (:class:`~conserve.backends.director.Trend`; None: the first-order predictor) and, for a run
    with controllers, their ``control`` (a :class:`~conserve.control.controller.ControlState` per
    controller, :mod:`conserve.backends.sampled`; None without)."""

    state: State
    multipliers: jax.Array
    memory: object = None
    trend: object = None
    control: object = None


class StepOutput(NamedTuple):
    """What the time loop keeps of each step: the ``node`` (State at t_{n+1}) and the step's
    :class:`~conserve.discrete.scheme.StepRecord` without its Newton ``history`` (None: the loop
    keeps the failed step's alone; the nodes' diagnostics are evaluated after each compiled
    stretch of steps, ``conserve.results.solution.diagnostics``) and the controllers' ``control``
    at t_{n+1} (the carry's; None without controllers)."""

    node: State
    record: StepRecord
    control: object = None


class StepBackend(ABC):
    """A discrete scheme advancing a :class:`Carry` by one step (see the module docstring).
    Subclasses are frozen dataclasses; ``name`` is how :func:`conserve.simulate` knows them."""

    name: ClassVar[str] = ""
    #: order of convergence of the scheme
    order: ClassVar[int] = 2

    def prepare(self, model: Model, state: State) -> StepBackend:
        """This backend specialised to a model's structure (e.g. the sparsity of its Newton
        matrix), found outside jit from the concrete model and initial state; the default: itself.
        The result is again a hashable value: equal structures share compiled code."""
        return self

    def init(self, model: Model, state: State) -> Carry:
        """The carry at t0: the state and zero multipliers."""
        return Carry(state, jnp.zeros(model.n_constraints, state.q.dtype))

    @abstractmethod
    def step(self, model: Model, carry: Carry, t, h) -> tuple[Carry, StepRecord]:
        """One step t -> t + h (t, h float64 scalars, s)."""

    @abstractmethod
    def unknowns(self, model: Model) -> int:
        """The number of unknowns solved for per step."""

    def recover_multipliers(self, model: Model, nodes: State, multipliers, t, h):
        """The scaled multipliers (N, n_c) of every kept row of a finished run, from the nodes
        (States stacked, N + 1), the steps' start times t (N,) and sizes h (N, or one for all) in s
        and the multipliers the steps carried (N, n_c); backends that eliminate some (the reduced
        one) fill them in here."""
        return multipliers

    def as_kernels(self) -> StepBackend:
        """This backend with its Newton loop free of library calls — its dense Newton matrix (its
        ``linear`` a :class:`~conserve.discrete.linear.Dense` or Coloured solver), or a tree
        solver's diagonal blocks (:class:`~conserve.discrete.linear.BlockTree`), inverted by
        Gauss–Jordan in XLA operations (``kernel=True``) instead of by LAPACK —, so that XLA
        compiles the loop as one kernel (:mod:`conserve.compilation`); the same steps to round-off.
        Otherwise itself. With a tree solver the director's steps get faster and the reduced
        backend's first call compiles faster (the one kernel takes "quick"'s XLA options);
        measurements: benchmarks/results/defaults.md, section ``KERNEL_SIZE``."""
        linear = getattr(self, "linear", None)
        if isinstance(linear, (Dense, BlockTree, BorderedTree)) and not linear.kernel:
            return replace(self, linear=replace(linear, kernel=True))
        return self

    def for_ensembles(self) -> StepBackend:
        """This backend as an ensemble (:func:`conserve.simulate_batch`, vmapped over the axis
        ``conserve.discrete.newton.MEMBERS``) runs it: its Newton iteration (a ``newton``
        field) forms the members' Jacobians together (``Newton.members``), so that a group carries
        its factors across steps and forms about as few Jacobians per step as a single run
        (measurements: benchmarks/results/defaults.md, section ``StepBackend.for_ensembles``)."""
        newton = getattr(self, "newton", None)
        return self if newton is None else replace(self, newton=replace(newton, members=MEMBERS))


class Wrapper(StepBackend):
    """A step backend built around another, ``inner`` (a dataclass field of the subclass): its
    name, order, Newton linear algebra, structure, carry, unknowns and recovered multipliers are
    the inner backend's unless the wrapper says otherwise
    (:class:`~conserve.backends.compose.Composition`, :class:`~conserve.backends.subdivide.Subdividing`)."""

    inner: StepBackend

    @property
    def name(self):
        return self.inner.name

    @property
    def order(self):
        return self.inner.order

    @property
    def linear(self):
        """The inner backend's Newton linear algebra (None if it has no such option)."""
        return getattr(self.inner, "linear", None)

    def prepare(self, model: Model, state: State) -> StepBackend:
        return replace(self, inner=self.inner.prepare(model, state))

    def init(self, model: Model, state: State) -> Carry:
        return self.inner.init(model, state)

    def unknowns(self, model: Model) -> int:
        return self.inner.unknowns(model)

    def recover_multipliers(self, model: Model, nodes: State, multipliers, t, h):
        return self.inner.recover_multipliers(model, nodes, multipliers, t, h)

    def as_kernels(self) -> StepBackend:
        return replace(self, inner=self.inner.as_kernels())

    def for_ensembles(self) -> StepBackend:
        return replace(self, inner=self.inner.for_ensembles())


class ReferenceBackend(ABC):
    """A reference integrator of a whole run (not a conserving scheme)."""

    name: ClassVar[str] = ""

    @abstractmethod
    def integrate(self, assembly, t0, t_end, dt, progress=None, every=1024):
        """(nodes State (N+1, …), dissipation (N, n_s + n_v + n_r), work (N, n_w), stats dict, failure
        message, the exception that stopped it, or None) with nodes every dt; ``progress(done, N)``
        after every ``every`` nodes (an exception it raises stops the integration)."""

    @abstractmethod
    def unknowns(self, model: Model) -> int:
        """The size of the integrated ODE state."""


def map_steps(fn, *args, block=128):
    """``fn(*args)`` for per-step arrays (pytrees with leading axis N ≥ 1), evaluated in blocks of
    ``block`` steps, the last one padded: a jitted, batched ``fn`` compiles once for any N.
    Returns numpy arrays with leading axis N. (128 rather than 512: a run's first node and a short
    run pad a quarter as much, for 8 calls per 1024 steps instead of 2; measurements:
    benchmarks/results/defaults.md, section ``map_steps``.)"""
    args = jax.tree.map(np.asarray, args)  # (slicing jax arrays here would compile per shape)
    n = len(jax.tree.leaves(args)[0])
    pad = -n % block
    args = jax.tree.map(lambda a: np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]), args)
    out = [fn(*jax.tree.map(lambda a: a[i:i + block], args)) for i in range(0, n, block)]
    return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs])[:n], *out)
