"""Dense output: a run's motion between its nodes, by piecewise Hermite interpolation
(:meth:`conserve.Solution.evaluate`, which builds a Solution at any times from these functions).

A run keeps at its nodes t_0 < … < t_N the coordinates q and their rates v (and, per hybrid
rotor, the spin angle θ and its rate, the diagnostics' ``rotor_rate``). Between two nodes
t_n ≤ t ≤ t_{n+1} the interpolant of q is the polynomial P of degree 2m − 1 that takes the
values q_k and the slopes v_k at the m nodes k of a stencil around the interval (Hermite
interpolation; Hairer, Nørsett and Wanner, Solving ODEs I, §II.6), and the interpolated
velocity is its derivative P'. In the interval's own variable x = (t − t_n)/h_n, h_n = t_{n+1} − t_n,

    P(t) = Σ_k A_k(x) q_k + h_n Σ_k B_k(x) v_k,     P'(t) = Σ_k A_k'(x) q_k / h_n + Σ_k B_k'(x) v_k,
    A_k = (1 − 2 ℓ_k'(x_k)(x − x_k)) ℓ_k(x)²,       B_k = (x − x_k) ℓ_k(x)²,

ℓ_k the Lagrange polynomials of the stencil's nodes x_k. Two stencils (``degree``):

* ``3`` — cubic Hermite on the interval's two nodes: local error O(h⁴) in q and O(h³) in v
  (h the local node spacing). On the nodes of the order-2 midpoint step, whose
  (v_n + v_{n+1})/2 = (q_{n+1} − q_n)/h_n exactly, the cubic term vanishes: P is the
  constant-acceleration parabola of the step, and P' the straight line between v_n and v_{n+1}.
* ``7`` — Hermite of degree 7 on four nodes, the interval's two and one more on each side (at the
  first and last interval the four nearest): local error O(h⁸) in q and O(h⁷) in v, beyond the
  orders 4 and 6 of the composed steps (:mod:`conserve.backends.compose`), whose node velocities
  have the composition's order too. It spans three intervals, so it smooths less locally than the
  cubic across a kink of the motion (a load that switches, dry friction sticking).

The default (:func:`auto_degree`) is the cubic for a run of order 2 and degree 7 otherwise (orders
4 and 6, a reference integrator, an order not recorded). With node values of the run's order p
(errors O(h^p), smooth along the run), the interpolated q and v then differ from the exact motion
by O(h^p) — interpolation does not lower the run's order (``tests/test_dense.py`` measures it) —
and at the nodes themselves the values are the run's, to round-off.

The interpolant is not a step of the scheme: between nodes the constraints, the orthonormality of
the directors and the conservation laws hold only to the interpolant's accuracy, not to round-off
as at the nodes. A constraint g(q) (a director product d_i·d_j − δ_ij, a joint's gap) vanishes at
the nodes and the node velocities satisfy its rate to O(h^p), so along the interpolant it is
O(h^(p+1)); the energy balance is off by O(h^p) (measured in ``tests/test_dense.py``: constraint
residual O(h³) and energy O(h²) for the cubic on order 2, O(h⁵) and O(h⁴) for degree 7 on order
4). The diagnostics that :meth:`~conserve.Solution.evaluate` recomputes at its times show it.

Quantities kept without their rates are interpolated by the Lagrange polynomial through the
``degree + 1`` nearest nodes centred on the interval (cubic through four nodes for ``degree=3``,
degree 7 through eight for ``degree=7``): the same degree and local order, O(h^{degree+1}). These
are the joint coordinates s (their rates are functions of q and v the Solution does not keep),
the rotors' axial momenta p (constant unless a motor or bearing acts) and the cumulative work and
dissipation. A spin angle θ is interpolated with its rate (Hermite, like q) when the Solution has
the nodes' ``rotor_rate`` (every run's), else by Lagrange. The wide stencils assume neighbouring
intervals of comparable size and enough nodes (eight for s and p at degree 7): on a handful of
nodes, or on nodes whose spacing jumps by large factors (sparse ``saveat`` times), ``degree=3``
is the robust choice.

Node times must be strictly increasing; the interval of a time t is the one with
t_n ≤ t < t_{n+1} (the last interval for t = t_N), and a time equal to a node time returns the
node's values exactly. The spacing h in the error bounds is the spacing of the kept nodes: a run
with ``saveat`` keeps fewer nodes than it took steps, and its interpolant is only as accurate as
the kept nodes' spacing allows.
"""

from __future__ import annotations

import numpy as np

#: the interpolants' degrees: cubic Hermite on the interval's two nodes, degree 7 on four nodes
DEGREES = (3, 7)

#: times outside [t0, t_end] by less than this fraction of the span (or 64 units in the last place)
#: are the end they are near: the round-off of t0 + n·dt (the adaptive runs' time tolerance)
SAME_TIME = 1e-9


def auto_degree(order):
    """The default degree for a run of ``order`` (the Solution's ``stats["order"]``; None when not
    recorded): 3 for the order-2 step, 7 for anything else (orders 4 and 6, reference integrators)."""
    return 3 if order == 2 else 7


def check_degree(degree, order=None, who="Solution.evaluate"):
    """``degree`` as one of :data:`DEGREES` ("auto": :func:`auto_degree` of ``order``), or a
    ValueError saying which exist."""
    if isinstance(degree, str) and degree == "auto":
        return auto_degree(order)
    if isinstance(degree, (bool, np.bool_)) or degree not in DEGREES:
        raise ValueError(f"{who}: degree must be 'auto', 3 (cubic Hermite on each interval's two nodes) or 7 (Hermite "
                         f"on four nodes), got {degree!r}.")
    return int(degree)


def check_node_times(nodes, who="Solution.evaluate"):
    """The nodes' times (N+1,) in s as float64, checked finite and strictly increasing."""
    nodes = np.asarray(nodes, np.float64)
    if nodes.ndim != 1 or not len(nodes):
        raise ValueError(f"{who}: the Solution has no nodes to interpolate (t of shape {nodes.shape}).")
    if not (np.all(np.isfinite(nodes)) and np.all(np.diff(nodes) > 0)):
        raise ValueError(f"{who}: the Solution's node times must be finite and strictly increasing to interpolate "
                         "between them.")
    return nodes


def evaluation_times(t, nodes, who="Solution.evaluate"):
    """The times ``t`` (a number or a 1-D array, s) as a float64 array (M,), checked: finite (NaN
    is refused), strictly increasing, and within [t0, t_end] of the ``nodes`` (N+1,) — times
    beyond the ends by less than :data:`SAME_TIME` of the span (the round-off of t0 + n·dt) are
    moved onto the end. Anything else is a ValueError that names the range."""
    nodes = check_node_times(nodes, who)
    try:
        x = np.asarray(t, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{who}: t must be a time in s or a 1-D array of times, got {t!r}.") from err
    if x.ndim > 1:
        raise ValueError(f"{who}: t must be a time in s or a 1-D array of times, got an array of shape {x.shape}.")
    x = x.reshape(-1)
    t0, t_end = float(nodes[0]), float(nodes[-1])
    span = f"[t0, t_end] = [{t0!r}, {t_end!r}] s"
    if not len(x):
        raise ValueError(f"{who}: t is empty; give at least one time in the run's span {span}.")
    if np.any(np.isnan(x)):
        raise ValueError(f"{who}: t holds NaN (at {np.flatnonzero(np.isnan(x))[:5].tolist()}); give times in the "
                         f"run's span {span}.")
    tol = max(SAME_TIME * (t_end - t0), 64 * np.spacing(max(abs(t0), abs(t_end))))
    outside = (x < t0 - tol) | (x > t_end + tol)
    if np.any(outside):
        shown = ", ".join(f"{v:.17g}" for v in x[outside][:5]) + (", …" if np.sum(outside) > 5 else "")
        raise ValueError(f"{who}: times must lie in the run's span {span} (its first and last node; there is no "
                         f"extrapolation), got {shown}.")
    x = np.clip(x, t0, t_end)
    if np.any(np.diff(x) <= 0):
        raise ValueError(f"{who}: times must be strictly increasing (they become the nodes of a Solution); sort them "
                         "and drop repeats (np.unique(t)).")
    return x


def stencils(nodes, x, size):
    """(interval n (M,), node indices (M, size)) for times x (M,): n with t_n ≤ x < t_{n+1} (the
    last interval for x = t_N; 0 for a single node), and the ``size`` consecutive nodes centred on
    it (``size`` // 2 on each side; shifted inside at the ends; all nodes when there are fewer)."""
    count = len(nodes)
    size = min(size, count)
    n = np.clip(np.searchsorted(nodes, x, side="right") - 1, 0, max(count - 2, 0))
    start = np.clip(n - (size // 2 - 1), 0, count - size)
    return n, start[:, None] + np.arange(size)


def local_variables(nodes, x, n, index):
    """(x (M,), z (M, k), h (M,)): the times and the stencils' node times in each interval's variable
    (t − t_n)/h_n, and h_n (s; 1 for a single node). Node times map to the same numbers in every
    stencil, the interval's ends to 0 and 1 exactly."""
    h = nodes[np.minimum(n + 1, len(nodes) - 1)] - nodes[n]
    h = np.where(h > 0, h, 1.0)
    return (x - nodes[n]) / h, (nodes[index] - nodes[n][:, None]) / h[:, None], h


def lagrange_basis(z, x):
    """(ℓ (M, k), ℓ' (M, k)): the Lagrange polynomials of the nodes z (M, k) and their derivatives at
    x (M,) (product rule, so exact 0 and 1 at the nodes), and c (M, k) = ℓ_k'(z_k) = Σ_{j≠k} 1/(z_k − z_j)."""
    k = z.shape[1]
    L, dL, c = np.ones_like(z), np.zeros_like(z), np.zeros_like(z)
    for i in range(k):
        for j in range(k):
            if j != i:
                w = 1.0 / (z[:, i] - z[:, j])
                dL[:, i] = dL[:, i] * (x - z[:, j]) * w + L[:, i] * w
                L[:, i] = L[:, i] * (x - z[:, j]) * w
                c[:, i] += w
    return L, dL, c


def hermite_basis(z, x):
    """The Hermite basis of the nodes z (M, m) at x (M,): (A, B, A', B'), each (M, m), with
    P(x) = Σ A_k y_k + Σ B_k y'_k the polynomial of degree 2m − 1 that takes the values y_k and
    the slopes y'_k (per unit of x) at the nodes; A_k = (1 − 2 ℓ_k'(z_k)(x − z_k)) ℓ_k², B_k = (x − z_k) ℓ_k²."""
    L, dL, c = lagrange_basis(z, x)
    d = x[:, None] - z
    A = (1.0 - 2.0 * c * d) * L**2
    B = d * L**2
    dA = -2.0 * c * L**2 + 2.0 * (1.0 - 2.0 * c * d) * L * dL
    dB = L**2 + 2.0 * d * L * dL
    return A, B, dA, dB


def combine(weights, values, index):
    """Σ_k weights[:, k] values[index[:, k]]: (M, …) from weights (M, k), values (N+1, …), index (M, k)
    (one stencil column at a time, so memory stays M × the values' row)."""
    out = np.zeros((len(index), *values.shape[1:]), np.result_type(values, np.float64))
    expand = (slice(None),) + (None,) * (values.ndim - 1)
    for k in range(index.shape[1]):
        out += weights[:, k][expand] * values[index[:, k]]
    return out


class Interpolant:
    """The piecewise interpolants of one Solution's nodes at given times (see the module
    docstring): :meth:`hermite` for a quantity with its rate, :meth:`lagrange` for one without.

    nodes : (N+1,) the node times, s, strictly increasing;  times : (M,) s, within [t0, t_end]
    degree : 3 or 7 (:data:`DEGREES`)
    """

    def __init__(self, nodes, times, degree):
        self.nodes, self.times = check_node_times(nodes), np.asarray(times, np.float64)
        self.degree = check_degree(degree)
        m = (self.degree + 1) // 2  # Hermite nodes of the stencil
        n, index = stencils(self.nodes, self.times, m)
        x, z, self.h = local_variables(self.nodes, self.times, n, index)
        self._hermite = index, hermite_basis(z, x)
        n, index = stencils(self.nodes, self.times, self.degree + 1)
        x, z, _ = local_variables(self.nodes, self.times, n, index)
        self._lagrange = index, lagrange_basis(z, x)[0]
        # the times that are node times: their values are copied, not evaluated
        k = np.clip(np.searchsorted(self.nodes, self.times), 0, len(self.nodes) - 1)
        self.at_node = self.nodes[k] == self.times
        self.node_of = k

    def hermite(self, y, rate):
        """(values (M, …), rates (M, …)) of the Hermite interpolant of y (N+1, …) with its time
        derivative ``rate`` (N+1, …) (units of y per s): the interpolated value and its derivative."""
        y, rate = np.asarray(y, np.float64), np.asarray(rate, np.float64)
        index, (A, B, dA, dB) = self._hermite
        h = self.h.reshape((-1,) + (1,) * (y.ndim - 1))
        value = combine(A, y, index) + h * combine(B, rate, index)
        derivative = combine(dA, y, index) / h + combine(dB, rate, index)
        return self._nodes_exact(value, y), self._nodes_exact(derivative, rate)

    def lagrange(self, y):
        """(M, …) the Lagrange interpolant of y (N+1, …) through the ``degree + 1`` nearest nodes."""
        y = np.asarray(y, np.float64)
        index, L = self._lagrange
        return self._nodes_exact(combine(L, y, index), y)

    def hold(self, y):
        """(M, …) y (N+1, …) of the last node at or before each time (a sample-and-hold quantity)."""
        return np.asarray(y)[np.clip(np.searchsorted(self.nodes, self.times, side="right") - 1, 0, None)]

    def _nodes_exact(self, value, y):
        value[self.at_node] = y[self.node_of[self.at_node]]
        return value
