"""The director backend: the energy-momentum step (:mod:`conserve.discrete.scheme`) solved for
all its unknowns (Δq, λ̃, Δp̃, Δθ) in director coordinates by Newton's method (Gonzalez 1996;
Betsch and Steinmann 2002; hybrid rotors after Becker, Betsch, Franke and Siebert).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp

from ..discrete.newton import Newton, newton_solve
from ..discrete.scheme import advance, equations, predictor, rotor_weights
from ..model.assembled import Model, State
from .base import Carry, StepBackend


@dataclass(frozen=True)
class Director(StepBackend):
    """The energy-momentum step on all its unknowns, ``newton`` its Newton options."""

    newton: Newton = field(default_factory=Newton)
    name = "director"

    def step(self, model: Model, carry: Carry, t, h):
        state, record = step(model, carry.state, carry.multipliers, t, h, self.newton)
        return Carry(state, record.multipliers), record

    def unknowns(self, model: Model) -> int:
        return unknowns(model)


def unknowns(model: Model) -> int:
    """Newton unknowns per step: coordinates, kept multipliers, 2 per hybrid rotor."""
    return model.n_coordinates + model.n_constraints + 2 * model.n_rotors


def step(model: Model, state: State, lam, t, h, newton):
    """One energy-momentum step t_n -> t_{n+1} = t_n + h (:mod:`conserve.discrete.scheme`), solved
    for x = (Δq, λ̃, Δp̃, Δθ) by Newton's method with each unknown scaled by its own size.

    Parameters
    ----------
    state : State at t_n
    lam : (n_c,) scaled multipliers of the previous step (Newton's initial guess)
    t : float, t_n in s
    h : float, step in s
    newton : :class:`conserve.Newton`

    Returns
    -------
    state : State at t_{n+1}
    record : :class:`~conserve.discrete.scheme.StepRecord` (with the step's scaled multipliers)
    """
    q0 = state.q
    nq, nc, nr = q0.shape[0], lam.shape[0], state.p.shape[0]
    split = lambda x: (x[:nq], x[nq:nq + nc], x[nq + nc:nq + nc + nr], x[nq + nc + nr:])  # noqa: E731
    blocks = (lambda r: jnp.concatenate(r)) if nr else (lambda r: jnp.concatenate(r[:2]))  # noqa: E731

    def residual(x):
        return blocks(equations(model, state, t, h, *split(x)))

    def weights(x):  # increments of each 3-block by their own size, multipliers by the largest
        dq, lam_, dp, dtheta = split(x)
        w_q = jnp.repeat(1.0 + jnp.max(jnp.abs(dq.reshape(-1, 3)), axis=1), 3)
        w_lam = jnp.full_like(lam_, 1.0 + jnp.max(jnp.abs(lam_), initial=0.0))
        return blocks((w_q, w_lam, *rotor_weights(state, dp, dtheta)))

    rates = model.rotor_relative_rates(q0, state.v, state.p)
    x0 = jnp.concatenate([predictor(model, state, h), lam, jnp.zeros(nr), h * rates])
    size = blocks((jnp.zeros(nq), model.constraint_magnitudes(q0, state.theta, state.s), jnp.zeros(nr), jnp.zeros(nr)))
    x, *result = newton_solve(residual, x0, newton, weights, size)
    dq, lam1, dp, dtheta = split(x)
    return advance(model, state, t, h, dq, dp, dtheta, lam1, result)
