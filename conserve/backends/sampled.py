"""Controllers in the loop (:mod:`conserve.control.controller`): a step of ``inner`` cut at the sample
instants of the model's controllers, each evaluated there, its commands held until its next
sample (zero-order hold).

A step t -> t + h is taken as sub-steps between the sample instants t_k = k / rate inside it
(usually one: a step size dividing the sample period). At the start of each sub-step every
controller due there is evaluated on the node (:meth:`~conserve.control.controller.Sampler.sample`);
its held commands, entries of ``model.parameters``, are then constants of the sub-step, so each
sub-step is a full energy-momentum step of ``inner`` (any order, with failure recovery or not)
whose work and dissipation are exact. A controller with ``rate=None`` is evaluated inside each
step at its midpoint, as element laws are (:func:`conserve.discrete.scheme.commanded`); the
carry records its commands there. Instants closer than ``TOL`` sample periods to a step's start are taken there,
closer than that to its end at the next step's start (no sliver sub-steps of round-off size).

The returned :class:`~conserve.discrete.scheme.StepRecord` sums iterations, work and dissipation
over the sub-steps and keeps the last sub-step's multipliers rescaled to the full step
(λ̃ = (h²/2) λ), as :class:`~conserve.backends.subdivide.Subdividing` does. The carry's
``control`` holds each controller's :class:`~conserve.control.controller.ControlState`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from ..control.controller import ControlState
from ..model.assembled import Model, State
from ..discrete.forces import constraint_force, part_wrench
from ..errors import ModelError
from ..model.parameters import bound
from .base import Carry, StepBackend, Wrapper

#: sample instants this many sample periods from a step's start or end are taken there
TOL = 1e-9


def with_controllers(backend: StepBackend, model: Model) -> StepBackend:
    """``backend`` wrapped in :class:`Sampled` if the model has controllers, else itself (a
    ModelError for reaction sensors on a backend that eliminates multipliers)."""
    if not model.controllers or isinstance(backend, Sampled):
        return backend
    reactions = [f"'{s.name}': '{name}'" for s in model.controllers for name, r in s.readings if r.kind == "reaction"]
    if reactions and backend.name != "director":
        raise ModelError(f"simulate: the reaction sensors ({', '.join(reactions)}) read the step's multipliers, which "
                         f"the {backend.name} backend eliminates; run them with backend='director'.")
    return Sampled(backend)


def reaction(model: Model, reading, start: State, end: State, multipliers, h):
    """(6,) the force (N) and the torque (N m, about the reading's attachment point) that the
    constraint rows of the reading's joint exert on its part in the step start → end of size h,
    inertial axes: −Ḡᵀλ of those rows (λ = 2 λ̃ / h², the step's scaled ``multipliers``), the
    resultant on the part's φ block and Σ d_k × f_k on its directors (at the midpoint), as
    :func:`conserve.joint_reactions` computes them after a run."""
    keep = list(model.constraint_keep)
    rows = np.array([keep.index(r) for r in reading.rows if r in keep], dtype=np.int64)
    lam = jnp.zeros_like(multipliers).at[rows].set(multipliers[rows]) * (2.0 / h**2)
    gq = constraint_force(model, start.q, end.q, start.theta, end.theta, start.s, end.s, lam)[0]
    f = jnp.concatenate([-gq.reshape(-1, 3), jnp.zeros((4, 3), gq.dtype)])  # the ground's blocks take none
    force, moment = part_wrench(f, model.blocks(0.5 * (start.q + end.q)), np.asarray(reading.frames[0]),
                                jnp.asarray(reading.vectors[0]))
    return jnp.concatenate([force, moment])


def held(model: Model, control) -> Model:
    """The model with the controllers' held commands as its parameters' values."""
    values = dict(model.parameters)
    for sampler, c in zip(model.controllers, control):
        values.update(zip(sampler.commands, c.commands))
    return replace(model, parameters=values)


@dataclass(frozen=True)
class Sampled(Wrapper):
    """``inner`` with the model's controllers sampled at their instants (the module docstring);
    the contract of :class:`~conserve.backends.base.StepBackend`."""

    inner: StepBackend
    #: False: no cuts — each step samples the controllers due at its start and is taken whole
    #: (one sub-step, no while loop, so reverse-mode derivatives pass; :func:`conserve.trajectory`)
    cuts: bool = True

    def init(self, model: Model, state: State) -> Carry:
        carry = self.inner.init(model, state)
        control = tuple(s.start(model, state.q, state.v, state.p) for s in model.controllers)
        return carry._replace(control=control)

    def step(self, model: Model, carry: Carry, t, h):
        t_end = t + h
        control = tuple(c._replace(k=jnp.where(c.k < 0, _first(s, t), c.k)) for s, c in
                        zip(model.controllers, carry.control))

        def next_instant(control, t_cur):  # the end of the sub-step starting at t_cur
            t_next = t_end
            for s, c in zip(model.controllers, control):
                if s.rate is not None and self.cuts:
                    due = c.k.astype(t.dtype) / s.rate
                    t_next = jnp.where(due < t_end - TOL / s.rate, jnp.minimum(t_next, due), t_next)
            return t_next

        def sub_step(loop):
            t_cur, inner, control, total = loop
            state = inner.state
            sampled = []
            for s, c in zip(model.controllers, control):
                if s.rate is None:  # evaluated inside the step (conserve.discrete.scheme.commanded)
                    sampled.append(c)
                    continue
                due = c.k.astype(t.dtype) / s.rate <= t_cur + TOL / s.rate
                sampled.append(jax.lax.cond(due, lambda c, s=s: s.sample(model, state.q, state.v, state.p, t_cur, c),
                                            lambda c: c, c))
            control = tuple(sampled)
            t_next = next_instant(control, t_cur)
            hs = t_next - t_cur
            commanded = held(model, control)
            guess = inner._replace(multipliers=inner.multipliers * (hs / h) ** 2)
            with bound(commanded.parameters):
                new, record = self.inner.step(commanded, guess, t_cur, hs)
            control = tuple(c._replace(reactions={name: jnp.stack([
                reaction(model, dict(s.readings)[name], inner.state, new.state, record.multipliers, hs), r[0]])
                for name, r in c.reactions.items()}) for s, c in zip(model.controllers, control))
            new = new._replace(multipliers=new.multipliers * (h / hs) ** 2)
            total = total._replace(iterations=total.iterations + record.iterations, converged=record.converged,
                                   history=record.history, work=total.work + record.work,
                                   dissipation=total.dissipation + record.dissipation,
                                   multipliers=record.multipliers * (h / hs) ** 2,
                                   substeps=jnp.maximum(total.substeps, record.substeps))
            return t_next, new, control, total

        inner = carry._replace(control=None)
        shapes = jax.eval_shape(self.inner.step, model, inner, t, h)[1]
        total = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)._replace(converged=jnp.bool_(True))
        if self.cuts:
            _, new, control, record = jax.lax.while_loop(
                lambda loop: (loop[0] < t_end) & loop[3].converged, sub_step, (t, inner, control, total))
        else:
            _, new, control, record = sub_step((t, inner, control, total))
        control = tuple(_midpoint_record(s, c, held(model, control), carry.state, new.state, t, h) if s.rate is None
                        else c for s, c in zip(model.controllers, control))
        return new._replace(control=control), record


def _midpoint_record(sampler, control, model, start, end, t, h):
    """What a controller without a rate did in the step t -> t + h, for the Solution: its commands
    and readings at the step's midpoint, the time t + h/2."""
    commands, readings = sampler.midpoint(model, 0.5 * (start.q + end.q), (end.q - start.q) / h,
                                          0.5 * (start.p + end.p), t + 0.5 * h)
    return ControlState(commands, control.state, control.k + 1, t + 0.5 * h, readings, readings, control.reactions)


def _first(sampler, t):
    """The index of the first sample at or after t (0 for a controller sampled every step)."""
    if sampler.rate is None:
        return jnp.int32(0)
    return jnp.ceil(t * sampler.rate - TOL).astype(jnp.int32)
