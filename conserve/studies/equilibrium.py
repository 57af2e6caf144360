"""Static equilibrium: the configuration where the constrained system's forces balance.

Stationarity of the potential energy under the loads and the constraints,

    ∇V_int(q) + λ_L (∇V_ext(q) − F(q)) + G(q)ᵀ μ = 0,    g(q) = 0,

with V_int the system's internal potentials (beams, springs, joint springs, central gravity),
V_ext the uniform fields (gravity), F the applied loads (:class:`~conserve.Force`, in inertial or
body axes: a body-axes load follows its part, a *follower* load) at the configuration, and λ_L
the load factor. It is solved by Newton's method in the minimal coordinates u of the kinematic
tree (the chart q = F(q*, u) of :func:`conserve.backends.null_space.configure`, centred anew at
each iterate, so that every iterate keeps the tree's joints and the directors' orthonormality
exactly: Newton's method on the configuration manifold), the balance projected on the chart
(∂F/∂uᵀ times it), multipliers μ only for the rows that close loops, the Jacobian by automatic
differentiation (dense). Load stepping raises λ_L in equal steps to 1, each started from the last:
the large-deflection path of a beam is followed instead of jumped at.
Rotors are locked (their spin plays no part in statics).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from ..backends.null_space import configure
from ..compilation.modes import jit_quick
from ..errors import ConvergenceError, ModelError
from ..model.assembled import State
from ..model.parameters import bound
from ..model.system import Assembly, as_assembly


@dataclass(frozen=True)
class Equilibrium:
    """A static equilibrium.

    Attributes
    ----------
    assembly : the Assembly whose initial state is the equilibrium at rest (``cs.simulate`` of it
        starts there)
    multipliers : the multipliers μ of the rows that close loops (cut joints' reactions, in the rows'
        units; none for a tree)
    load_factors : the load factors reached, each converged
    iterations : Newton iterations at each load factor
    residual : the largest force imbalance before the last Newton step, relative to the largest
        force term (the stiff terms' round-off, ε·EA for a beam, can make it ~1e-9)
    """

    assembly: Assembly
    multipliers: np.ndarray
    load_factors: tuple
    iterations: tuple
    residual: float

    @property
    def q(self):
        """(n_q,) the equilibrium's coordinates."""
        return np.asarray(self.assembly.initial_state.q)


def _balance(model, Q, u, mu, factor):
    """(the generalized force imbalance (n_u,) along the minimal coordinates u of the chart about
    the blocks Q, the cut constraints g_c (n_cut,), the size of the force terms (n_u,))."""
    tree = model.tree
    theta = jnp.zeros(model.n_rotors, Q.dtype)

    def energies(x):
        X = model.blocks(x)
        uniform = [jnp.sum(jax.vmap(k.energy)(p, k.invariants(p, X)))
                   for k, p in zip(model.potential_kinds, model.potential_params) if k.uniform]
        external = sum(uniform, jnp.zeros((), x.dtype))
        return model.potential_energy(x, model.coordinate_values(x)) - external, external

    def load(x):
        X, f = model.blocks(x), jnp.zeros_like(x)
        for k, p in zip(model.load_kinds, model.load_params):
            f = f + k.generalized_force(p, X, X, 0.0, 1.0)[0][:-4].ravel()
        return f

    def forces(u):
        x, pull = jax.vjp(lambda w: configure(tree, Q, w), u)
        f_int, f_ext = jax.jacrev(energies)(x)
        return pull(f_int)[0], pull(f_ext)[0], pull(load(x))[0]

    def cut(u):
        x = configure(tree, Q, u)
        return model.constraints(x, theta, model.coordinate_values(x))[np.asarray(tree.closure_rows, np.int64)]

    f_int, f_ext, f_load = forces(u)
    g, pull = jax.vjp(cut, u)
    reaction = pull(mu)[0]
    balance = f_int + factor * (f_ext - f_load) + reaction
    size = jnp.abs(f_int) + factor * (jnp.abs(f_ext) + jnp.abs(f_load)) + jnp.abs(reaction)
    return balance, g, size


@jit_quick(mode="unoptimized")
def _newton_system(model, Q, mu, factor):
    """(residual (n,), Jacobian (n, n), force sizes (n_u,)) of the unknowns (u, μ) at u = 0, μ;
    the laws' Parameters read the model's values (``model.parameters``)."""
    with bound(model.parameters):
        return _newton_system_bound(model, Q, mu, factor)


def _newton_system_bound(model, Q, mu, factor):
    n_u = model.tree.n_dof

    def stacked(x):
        balance, g, _ = _balance(model, Q, x[:n_u], x[n_u:], factor)
        return jnp.concatenate([balance, g])

    x = jnp.concatenate([jnp.zeros(n_u, Q.dtype), mu])
    return stacked(x), jax.jacfwd(stacked)(x), _balance(model, Q, x[:n_u], mu, factor)[2]


@jit_quick(mode="unoptimized")
def _moved(model, Q, u):
    """The coordinates (n_q,) of the chart about Q at the minimal coordinates u."""
    return configure(model.tree, Q, u)


def equilibrium(system, *, load_steps=1, tol=1e-10, max_iterations=30) -> Equilibrium:
    """The static equilibrium of ``system`` (a System or Assembly) near its initial configuration,
    under its gravity and applied loads raised in ``load_steps`` equal steps (module docstring).

    Newton stops at each load factor when its increment is below ``tol`` times the configuration's
    size (m for points, 1 for directors): it converges quadratically, so the step after that one,
    which is taken, leaves the force imbalance at its round-off (``residual``, measured before it).
    Returns an :class:`Equilibrium` whose ``assembly`` starts a run at rest there.

    Raises ModelError for a system that can move without any force changing (a free body, a
    mechanism without springs: its Newton matrix is singular; fix it, or add springs), and
    ConvergenceError naming the load factor at which Newton failed (take more ``load_steps``); the
    error's ``partial`` holds the Equilibrium at the last load factor reached.
    """
    assembly = as_assembly(system, "equilibrium")
    model, state = assembly.model, assembly.initial_state
    if int(load_steps) != load_steps or load_steps < 1:
        raise ModelError(f"equilibrium: load_steps must be a positive integer, got {load_steps!r}.")
    if model.time_dependent:
        raise ModelError("equilibrium: the model has prescribed motions (JointDrive), whose equations depend on "
                         "time; leave the drives out.")
    n_u = model.tree.n_dof
    q, mu = jnp.asarray(state.q), jnp.zeros(len(model.tree.closure_rows), state.q.dtype)
    factors, iterations, reached = [], [], None
    for factor in np.arange(1, load_steps + 1) / load_steps:
        for k in range(max_iterations + 1):
            Q = model.blocks(q)
            r, J, size = (np.asarray(a) for a in _newton_system(model, Q, mu, factor))
            if k == 0 and mu.size:  # the loop rows' reactions that balance the forces best: their
                # curvature (a rope's tension) is stiffness the first Newton matrix needs
                mu = mu - np.linalg.lstsq(J[:n_u, n_u:], r[:n_u], rcond=None)[0]
                r, J, size = (np.asarray(a) for a in _newton_system(model, Q, mu, factor))
            imbalance = np.max(np.abs(r[:n_u])) / max(np.max(size), np.finfo(float).tiny)
            if k == 0:
                _check_stiffness(J, assembly)
            dx = -np.linalg.solve(J, r)
            q_new = _moved(model, Q, jnp.asarray(dx[:n_u]))
            step = np.max(np.abs(np.asarray(q_new - q)))
            q, mu = q_new, mu + dx[n_u:]
            if step <= tol * (1 + np.max(np.abs(np.asarray(q)))):
                break
            if not np.all(np.isfinite(dx)):
                k = max_iterations
                break
        if k >= max_iterations:
            error = ConvergenceError(
                f"equilibrium: Newton did not converge at load factor {factor:.6g} in {max_iterations} iterations "
                f"(force imbalance {imbalance:.3g} of the largest force); take more load_steps (now {load_steps}) "
                "so that each starts nearer its solution. err.partial holds the last equilibrium reached "
                "(None before the first).")
            error.partial = reached
            raise error
        factors.append(float(factor))
        iterations.append(k + 1)
        reached = _equilibrium(assembly, q, mu, factors, iterations, imbalance)
    return reached


def _equilibrium(assembly, q, mu, factors, iterations, imbalance):
    model = assembly.model
    s = model.coordinate_values(q)
    state = State(q, jnp.zeros_like(q), s, assembly.initial_state.p, assembly.initial_state.theta, jnp.zeros_like(q))
    return Equilibrium(replace(assembly, initial_state=state), np.asarray(mu), tuple(factors), tuple(iterations),
                       float(imbalance))


def _check_stiffness(J, assembly):
    """Refuse a singular Newton matrix: the system moves (rigidly or as a mechanism) without any
    force changing, so it has no isolated equilibrium."""
    rows = 1 / np.maximum(np.max(np.abs(J), axis=1), np.finfo(float).tiny)  # equilibrated: stiff and soft alike
    columns = 1 / np.maximum(np.max(np.abs(J * rows[:, None]), axis=0), np.finfo(float).tiny)
    sv = np.linalg.svd(J * rows[:, None] * columns, compute_uv=False)
    free = int(np.sum(sv <= 1e-12 * sv[0]))
    if free:
        raise ModelError(f"equilibrium: the system can move in {free} direction{'s' if free > 1 else ''} without any "
                         "force changing (a free body or beam, a mechanism without springs), so it has no isolated "
                         "equilibrium; fix it to the ground (cs.Fixed, joints) or add springs "
                         f"({assembly.layout.degrees_of_freedom} degrees of freedom).")
