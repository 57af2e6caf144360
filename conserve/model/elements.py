"""The interfaces of the model: what an element is, and what each family of element *kinds* computes.

Two levels, one idea each:

- An **element** is what a user puts into a :class:`~conserve.System`: a part, a joint or other
  constraint, a force (field, load, spring-damper, motor, potential) or a rotor. It knows its
  name, the parts it involves, its user laws (checked at assembly, ``conserve.model.laws``) and the *terms*
  it contributes: a kind and the parameters of one element (``Term``).
- A **kind** is the vectorised, pure jax function behind many elements: assembly stacks the
  parameters of all terms of one kind into arrays with a leading element axis, so a kind is
  evaluated once however many elements use it. A kind belongs to exactly one family below, and
  the model and the discrete scheme dispatch on these types alone.

Kinds are hashable values (frozen dataclasses): two models with equal kinds and array shapes
share one compiled step. Shapes: Q is the extended block array (m, 3) of
``conserve.kinematics.frames`` (a constraint kind sees a
``Configuration`` C, which indexes like Q and also carries the spin
angles θ and the tracked joint coordinates s); ``p`` a dict of parameter arrays with leading
axis n (the elements of the kind), ``p_e`` one element's.

A new joint or force is one element class (with its kind, if no existing kind serves) in one file;
``docs/guide/extending.rst`` shows both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class Element(ABC):
    """Anything a System holds. Subclasses set ``name`` (str, unique in the system)."""

    name: str

    @abstractmethod
    def parts(self) -> tuple:
        """The parts (bodies, point masses) this element involves; ``cs.ground`` is left out."""

    @abstractmethod
    def terms(self, layout) -> list:
        """The ``Term`` s this element contributes, given the coordinate
        layout (``Layout``: block indices of every part's frame)."""

    def laws(self) -> list:
        """The user functions of this element as :class:`~conserve.model.laws.Law` s (checked once
        at assembly); none by default."""
        return []

    def sketch(self):
        """What a picture draws of the element: ``(kind, part a, body point a, part b, body point b)``
        with kind "joint", "rope", "spring" or "beam" (a list of them for an element of several
        lines), or None (:mod:`conserve.results.animation`)."""
        return None


class ConstraintElement(Element):
    """A holonomic constraint element: joints (``conserve.model.joints``), ropes (``conserve.model.rope``), user
    constraints (``conserve.model.custom``). Its terms are of :class:`ConstraintKind` s."""


class ForceElement(Element):
    """A force element: gravity fields, applied loads, spring-dampers and motors
    (``conserve.model.forces``), user potentials (``conserve.model.custom``). Its terms are of :class:`PotentialKind`,
    :class:`LoadKind` or coordinate kinds (``CoordinateElement``)."""


# --- kinds: the vectorised functions -------------------------------------------------------


class ConstraintKind(ABC):
    """Rows g(p, C) = 0 of n elements, (n, len(rows)).

    The built-in kinds are quadratic in the coordinates (and in θ or s where they say so), so the
    midpoint Jacobian G(q_{n+½}) is an exact discrete derivative of g (Gonzalez 1996, Betsch and
    Steinmann 2002): the constraint forces do no work over a step.

    Attributes: ``rows`` (labels of one element's equations); ``reads_spin_angles`` (g reads the
    hybrid rotors' spin angles θ: a rope on a winch); ``reads_coordinates`` (g reads tracked
    joint coordinates s, whose forces act through their exact discrete derivatives ∇̄s).
    """

    rows: tuple = ()
    reads_spin_angles: bool = False
    reads_coordinates: bool = False

    @abstractmethod
    def residual(self, p, C):
        """g (n, len(rows)), in the rows' units (m for points, 1 for directors, m² for distances)."""

    @abstractmethod
    def magnitude(self, p, C):
        """(n, len(rows)) ≥ 0: the size of the terms each row adds up, so that its round-off is
        about ε times it (a joint 1e7 m from the origin holds only to ~1e-9 m)."""

    @property
    def of_coordinates_alone(self) -> bool:
        """True for rows quadratic in q alone (no θ, no s, no invariant form): the reduced backend
        closes loops of such rows by loop coordinates; all others keep multipliers."""
        return not (self.reads_spin_angles or self.reads_coordinates or isinstance(self, InvariantConstraintKind))


class InvariantConstraintKind(ConstraintKind):
    """A constraint g = outer(π(q)) of invariants π: its discrete Jacobian is the discrete
    gradient of λ·outer in π-space (energy exact; momentum too when π is invariant under the
    symmetry). ``residual`` is ``outer`` of ``invariants``."""

    @abstractmethod
    def invariants(self, p, C):
        """π (n, k)."""

    @abstractmethod
    def outer(self, p_e, pi_e):
        """g of one element from its invariants (k,) -> (len(rows),)."""


class PotentialKind(ABC):
    """A potential U(π) of invariants π quadratic (or linear) in the coordinates (Gonzalez 1996;
    Betsch and Steinmann 2001): its discrete force ∇π(q_{n+½})ᵀ ∇̄U(π_n, π_{n+1}) gives an exact
    energy balance, and momentum where π is invariant under the symmetry.

    ``uniform``: True for a kind whose force does not depend on the configuration (U linear in
    the coordinates: a uniform field), so that it leaves the Newton matrix unchanged
    (``conserve.discrete.turning.turns_with_the_bodies``)."""

    uniform: bool = False

    @abstractmethod
    def invariants(self, p, Q):
        """π (n, k) in the kind's units."""

    @abstractmethod
    def energy(self, p_e, pi_e):
        """U of one element, a scalar in J."""

    def discrete_gradient(self, p_e, pi0, pi1):
        """A closed-form ∇̄U (k,) with ∇̄U·(π1 − π0) = U(π1) − U(π0), or None for Gonzalez's
        generic one (:func:`conserve.discrete.gradient.discrete_gradient`)."""
        return None


class LoadKind(ABC):
    """An applied (non-potential) load evaluated at the midpoint of a step."""

    @abstractmethod
    def generalized_force(self, p, Q0, Q1, t, h):
        """(a force on every block, Q-shaped (m, 3); the discrete work of each element (n,) in J) over
        the step from Q0 at time t to Q1 at t + h; in the limit h → 0 (Q0, Q1 = q ∓ q̇/2, h = 1) the
        force and power of the continuous equations."""


class CoordinateGeometry(ABC):
    """A joint coordinate s (an angle, a slide, a length) as a function of quadratic invariants π,
    with an exact discrete increment: ∂̄s/∂π · (π1 − π0) = s1 − s0, so ∇̄s = ∇π(q_{n+½})ᵀ ∂̄s/∂π
    is an exact discrete derivative (``conserve.model.coordinates``)."""

    unit: str = ""

    @abstractmethod
    def invariants(self, p, Q):
        """π (n, k)."""

    @abstractmethod
    def value(self, pi_e):
        """s of one element from its invariants."""

    @abstractmethod
    def increment(self, pi0, pi1):
        """(Δs, ∂̄s/∂π (k,)) of one element between two configurations."""
