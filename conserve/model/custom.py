"""Extension points: a user's own holonomic constraint or potential, written in jax.

Both receive the parts' :class:`~conserve.kinematics.frames.Frame` s (``position``,
``directors``, ``point(X)``, ``vector(U)``), which are linear in the coordinates.

Energy and momentum stay exact when the functions are built from *invariants* that are
quadratic in the coordinates (dot products of material points and vectors): give
``invariants=`` and a function of them. Without ``invariants`` a constraint's discrete
Jacobian is Gonzalez's discrete gradient in the parts' coordinates: energy stays exact, angular
momentum only when the residual is itself quadratic.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation.modes import jit_quick
from ..errors import ModelError
from ..kinematics.frames import Frame, frames_of
from .bodies import Ground, Part
from .elements import ConstraintElement, ForceElement, InvariantConstraintKind, PotentialKind
from .laws import FRAME, Law, law_name
from .terms import Term


@dataclass(frozen=True)
class UserConstraint(InvariantConstraintKind):
    """A user's holonomic constraint g = outer(π(frames)) with a discrete gradient in π-space.

    ``invariants(*frames) -> (k,)`` (default: the parts' coordinates themselves, which makes
    the discrete gradient Gonzalez's and conserves energy but not necessarily momentum) and
    ``outer(pi) -> (rows,)``; ``rows``: equation labels. params: ``frames`` (n, n_parts, 4).
    Kinds are equal when their functions are the same objects and their parts as many, so the
    elements of one pair of functions are one kind (one copy of code in the compiled step).
    """

    invariant_fn: object
    outer_fn: object
    rows: tuple = ("g",)
    n_parts: int = 0

    def invariants(self, p, Q):
        return jax.vmap(lambda f: jnp.atleast_1d(self.invariant_fn(*frames_of(Q, f))))(p["frames"])

    def outer(self, p_e, pi):
        return jnp.atleast_1d(self.outer_fn(pi))

    def residual(self, p, Q):
        return jax.vmap(lambda pe, pi: self.outer(pe, pi))(p, self.invariants(p, Q))

    def magnitude(self, p, Q):
        """The user's function is opaque: 1 + the largest coordinate of its parts, per row."""
        size = jax.vmap(lambda f: 1.0 + jnp.max(jnp.abs(Q[f])))(p["frames"])
        return jnp.broadcast_to(size[:, None], (size.shape[0], len(self.rows)))


@dataclass(frozen=True)
class UserPotential(PotentialKind):
    """A user's potential U(π) of quadratic invariants π = invariants(*frames) (k,).

    params: ``frames`` (n, n_parts, 4). Equal kinds as :class:`UserConstraint`'s.
    """

    invariant_fn: object
    energy_fn: object
    n_parts: int = 0

    def invariants(self, p, Q):
        return jax.vmap(lambda f: jnp.atleast_1d(self.invariant_fn(*frames_of(Q, f))))(p["frames"])

    def energy(self, p_e, pi):
        return self.energy_fn(pi)


def _check_parts(name, parts):
    parts = tuple(parts)
    if not parts or not all(isinstance(p, Part) for p in parts):
        raise ModelError(f"'{name}': parts must be a non-empty sequence of bodies, point masses or cs.ground.")
    return parts


def _coordinates_of(*frames):
    return jnp.concatenate([jnp.concatenate([f.position[None], f.directors]).ravel() for f in frames])


@dataclass(frozen=True)
class _OfCoordinates:
    """``residual(*frames)`` as a function of the parts' coordinates π (n·12,) (the invariants of a
    constraint given without any), equal for the same residual and number of parts."""

    residual: object
    n: int

    def __call__(self, pi):
        blocks = pi.reshape(self.n, 4, 3)
        return self.residual(*[Frame(b[0], b[1:]) for b in blocks])


class Constraint(ConstraintElement):
    """A holonomic constraint g(frames) = 0 with ``rows`` equations.

    Parameters
    ----------
    parts : sequence of parts whose frames the functions receive, in this order
    residual : callable ``(*frames) -> (rows,)``, or with ``invariants`` given: ``(π) -> (rows,)``
    invariants : callable ``(*frames) -> (k,)``, quadratic in the coordinates (optional)
    rows : number of equations
    name : str
    """

    def __init__(self, parts, residual, rows, *, invariants=None, name="constraint"):
        self.name = name
        self._parts = _check_parts(name, parts)
        if not (isinstance(rows, (int, np.integer)) and rows >= 1):
            raise ModelError(f"'{name}': rows must be the number of equations, an integer ≥ 1, got {rows!r}.")
        self.rows = int(rows)
        for what, fn in (("residual", residual), ("invariants", invariants)):
            if fn is not None and not callable(fn):
                raise ModelError(f"'{name}': {what} must be a function, got {fn!r}.")
        frames = (FRAME,) * len(self._parts)
        returns = f"({self.rows},) residuals"
        if invariants is None:
            self._laws = [Law("residual", residual, "residual(*frames), one Frame (position, directors) per part",
                              frames, (self.rows,), returns)]
        else:
            self._laws = [Law("invariants", invariants, "invariants(*frames), one Frame per part", frames, None,
                              "(k,) invariants quadratic in the coordinates"),
                          Law("residual", residual, "residual(pi), pi the invariants", None, (self.rows,), returns)]
        labels, n = tuple(f"g{i}" for i in range(self.rows)), len(self._parts)
        if invariants is None:
            self.kind = UserConstraint(_coordinates_of, _OfCoordinates(residual, n), labels, n)
        else:
            self.kind = UserConstraint(invariants, residual, labels, n)

    def parts(self):
        return tuple(p for p in self._parts if not isinstance(p, Ground))

    def laws(self):
        return self._laws

    def terms(self, layout):
        return [Term(self.kind, {"frames": [layout.frame(p) for p in self._parts]}, self.name)]


class Potential(ForceElement):
    """A potential U(π) of invariants π = ``invariants(*frames)`` (k,), quadratic in the coordinates.

    Its discrete force is ∇π(q_{n+½})ᵀ ∇̄U(π_n, π_{n+1}) (Gonzalez 1996; Betsch and Steinmann
    2001): exact energy balance, and momentum conserved where the invariants are invariant under
    the symmetry.
    """

    def __init__(self, parts, invariants, energy, *, name="potential"):
        self.name = name
        self._parts = _check_parts(name, parts)
        for what, fn in (("invariants", invariants), ("energy", energy)):
            if not callable(fn):
                raise ModelError(f"'{name}': {what} must be a function, got {fn!r}.")
        self._laws = [Law("invariants", invariants, "invariants(*frames), one Frame per part",
                          (FRAME,) * len(self._parts), None, "(k,) invariants quadratic in the coordinates"),
                      Law("energy", energy, "energy(pi), pi the invariants", None, (), "a scalar energy in J")]
        self.kind = UserPotential(invariants, energy, len(self._parts))

    def parts(self):
        return tuple(p for p in self._parts if not isinstance(p, Ground))

    def laws(self):
        return self._laws

    def terms(self, layout):
        return [Term(self.kind, {"frames": [layout.frame(p) for p in self._parts]}, self.name)]


#: Largest accepted defect of the midpoint identity π(a) − π(b) = ∇π((a+b)/2)·(a − b), relative to
#: the size of its terms (round-off leaves ~1e-16; |x| instead of |x|² leaves ~1e-5 at the sampled
#: distances)
QUADRATIC_TOL = 1e-9


@jit_quick(mode="unoptimized", static_argnums=0)
def _midpoint_defect(invariant_fn, frames, Qa, Qb):
    """(defect, size) of the midpoint identity of ``invariant_fn`` between the configurations Qa, Qb."""
    def pi(Q):
        return jnp.atleast_1d(invariant_fn(*frames_of(Q, frames)))

    fa, fb = pi(Qa), pi(Qb)
    slope = jax.jvp(pi, (0.5 * (Qa + Qb),), (Qa - Qb,))[1]
    return jnp.abs(fa - fb - slope), jnp.abs(fa) + jnp.abs(fb) + jnp.abs(slope)


def check_quadratic_invariants(elements, layout, Q0):
    """Refuse a user Potential's or Constraint's ``invariants`` that are not quadratic in the
    coordinates: the discrete gradient ∇π(q_{n+½})ᵀ ∇̄U, on which the exact energy balance rests,
    needs π(q_{n+1}) − π(q_n) = ∇π(q_{n+½})·Δq, which holds for every step only for quadratic π
    (a norm |x| drifted the energy by 1e-7 where quadratic invariants keep 1e-15). Checked between
    two random configurations near the initial one, Q0 (extended blocks)."""
    rng = np.random.default_rng(0)
    Q0 = np.asarray(Q0)
    n = Q0.shape[0] - 4  # the ground's 4 blocks stay
    step = 1e-2 * (1.0 + np.max(np.abs(Q0[:n]), initial=0.0))
    Qa, Qb = (Q0 + np.vstack([step * rng.standard_normal((n, 3)), np.zeros((4, 3))]) for _ in range(2))
    for e in elements:
        fn = getattr(getattr(e, "kind", None), "invariant_fn", None)
        if not isinstance(e, (Potential, Constraint)) or fn is _coordinates_of:
            continue
        frames = np.asarray([layout.frame(p) for p in e._parts])
        defect, size = (np.asarray(x) for x in _midpoint_defect(fn, frames, Qa, Qb))
        bad = np.isfinite(defect) & (defect > QUADRATIC_TOL * size)
        if np.any(bad):
            worst = float(np.max(defect[bad] / size[bad]))
            raise ModelError(
                f"'{e.name}': its invariants {law_name(fn)} are not quadratic in the coordinates: "
                f"π(a) − π(b) differs from ∇π((a+b)/2)·(a − b) by {worst:.1e} of its terms at configurations near the "
                "initial one, so the step's discrete gradient would not be exact and the energy balance would fail. "
                "Make the invariants quadratic in positions and directors (products such as x·y, |x − y|², d_i·e) "
                "and put the rest into the function of them (|x| as the root of the invariant |x|²).")
