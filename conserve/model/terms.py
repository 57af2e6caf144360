"""The plumbing between elements and kinds (:mod:`.elements`): terms, what kinds and laws see, and
the stacking of terms into one vectorised call per kind.

A user element contributes *terms*: a kind and the parameters of one element. Assembly stacks
the parameters of all terms of one kind into arrays with a leading element axis, so each kind
is evaluated by one vectorised call however many elements use it: the traced program does not
grow with the number of elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .lawtable import with_tables, without_laws

#: A residual row is at its round-off floor when ``|r_i| ≤ ROUNDOFF · m_i``, with m_i the size of the
#: terms the row adds up (the sum of their absolute values; constraint kinds give theirs as
#: ``magnitude``): a componentwise backward error, after Oettli and Prager. 2¹⁰ ε leaves room for
#: rows that add up tens of terms. Used by Newton's round-off floor (:class:`conserve.Newton`)
#: and by the check of the initial state at assembly.
ROUNDOFF = 1024 * float(np.finfo(np.float64).eps)


@dataclass
class Term:
    """One element's share of a kind: parameters (numpy arrays), owner name, row labels."""

    kind: object
    params: dict = field(default_factory=dict)
    owner: str = ""
    rows: tuple = ()
    #: coordinate terms whose indices in the state's s fill ``params["coordinates"]`` at assembly
    links: tuple = ()



@partial(jax.tree_util.register_dataclass, data_fields=["Q", "theta", "s", "t"], meta_fields=[])
@dataclass(frozen=True)
class Configuration:
    """What constraint kinds see: the extended block array Q (indexing ``C[idx]`` reads Q), the
    spin angles θ (n_r,) of the hybrid rotors, which winch ropes couple to positions, the
    tracked joint coordinates s (n_s,), which coordinate relations couple, and the time t in s,
    which prescribed motions read (:mod:`conserve.model.drives`)."""

    Q: jax.Array
    theta: jax.Array
    s: jax.Array
    t: jax.Array = 0.0

    def __getitem__(self, index):
        return self.Q[index]


class BodyState(NamedTuple):
    """Midpoint state of a part handed to user load and motor laws: position (3,) m,
    velocity (3,) m/s, rotation (3, 3), angular_velocity (3,) rad/s (inertial)."""

    position: jax.Array
    velocity: jax.Array
    rotation: jax.Array
    angular_velocity: jax.Array


class RotorState(NamedTuple):
    """What a rotor's motor law sees at t_{n+½}: spin ``angle`` (rad) and ``rate`` (rad/s)
    relative to the master, and the master's :class:`BodyState`."""

    angle: jax.Array
    rate: jax.Array
    master: BodyState


class JointState(NamedTuple):
    """What a joint motor's law sees at t_{n+½}: the joint coordinate's ``value`` s_{n+½} (rad
    for an angle, m for a slide), its ``rate`` Δs/h (rad/s or m/s) and the :class:`BodyState`
    of the joint's part ``a`` (the motor acts on b, its reaction on a)."""

    value: jax.Array
    rate: jax.Array
    a: BodyState


def midpoint_state(Q0, Q1, frame, h):
    """BodyStates (leading axis n) of the frames (n, 4) at t_{n+½}: q_{n+½}, v̄ = Δq/h and
    ω̄ = ½ Σ d_i × Δd_i / h."""
    Qm, dQ = 0.5 * (Q0 + Q1), Q1 - Q0
    d, dd = Qm[frame[:, 1:]], dQ[frame[:, 1:]]
    return BodyState(position=Qm[frame[:, 0]], velocity=dQ[frame[:, 0]] / h, rotation=jnp.swapaxes(d, 1, 2),
                     angular_velocity=0.5 * jnp.sum(jnp.cross(d, dd), axis=1) / h)


def stack_terms(terms):
    """Group terms by kind (order of first appearance) and stack their parameters; terms whose
    kinds differ only in their user laws are one group, whose kind holds them in law tables
    (:mod:`.lawtable`).

    Returns a list of (kind, params with a leading element axis, terms).
    """
    groups: dict = {}
    for t in terms:
        groups.setdefault(without_laws(t.kind), []).append(t)
    out = []
    for lawless, ts in groups.items():
        params = {k: np.stack([np.asarray(t.params[k]) for t in ts]) for k in ts[0].params}
        out.append((with_tables(lawless, [t.kind for t in ts]), params, ts))
    return out
