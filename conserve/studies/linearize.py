"""Linearised dynamics in minimal coordinates (Thompson §III "Linear dynamics", eq. (22)).

The kinematic tree's finite update q = F(q*, u) (:func:`conserve.backends.null_space.configure`) is a
chart of the configuration manifold about q* with minimal coordinates u (n_dof,): rotation
increments of free bodies, relative angles and slides of the tree joints. In a frame turning
at the constant rate Ω (rad/s, about the origin; every 3-vector block of q is a point or an
axis, so inertial velocities are q̇ + Ω × q block by block) the Routhian of the hybrid rotors'
conserved axial momenta p is

    L(u, u̇) = ½ ẋᵀ M ẋ − p·θ'(q, ẋ, p) − V(q, s(q)),   q = F(q*, u),  ẋ = ∂F/∂u u̇ + Ω × q

(θ' the rotors' relative rates, so −p·θ' = p·(ω·a) + const: the gyroscopic coupling of
spinning rotors), and with Rayleigh's function R(u, u̇) = ½ Σ c_k ṡ_k² of the joint dampers
(:meth:`~conserve.model.assembled.Model.rayleigh`), the equations d/dt L_u̇ − L_u + R_u̇ = 0
linearise about u = 0, u̇ = 0 to

    M ü + D u̇ + K u = 0,   M = L_u̇u̇,   D = (L_u̇u − L_u̇uᵀ) + R_u̇u̇,   K = −L_uu + R_u̇u,

(D: the skew gyroscopic part plus the symmetric damping), all by automatic differentiation; the
state-space form is ż = A z with z = (u, u̇). A relative equilibrium (a spinning spacecraft, a
steadily precessing top, wheels spinning in a resting body) is an equilibrium of the turning
frame: pass its rate Ω; ``imbalance`` = L_u − R_u̇ at the point says how far from an
equilibrium it is (0 there). Motors, applied loads and rotor bearing friction (which changes
the rotor momenta p, held fixed here) are not included.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from ..backends import loops
from ..backends.null_space import configure
from ..compilation.modes import jit_quick
from ..errors import ModelError
from ..model.parameters import bound
from ..model.system import as_assembly, initial_gaps


@dataclass(frozen=True)
class Linearization:
    """M ü + D u̇ + K u = 0 in the minimal coordinates u of the kinematic tree.

    Attributes
    ----------
    M, D, K : (n, n) mass (kg, kg m, kg m²), damping (gyroscopic + dampers) and stiffness matrices
    A : (2n, 2n) state-space matrix of z = (u, u̇), ż = A z
    coordinates : (n,) names "link[k]": the k-th freedom of the tree link (a joint's rotations,
        then slides; a free body's rotations 0–2, translations 3–5); with loops the independent ones
    imbalance : (n,) generalised force L_u at the point (0 at an equilibrium of the frame)
    """

    M: np.ndarray
    D: np.ndarray
    K: np.ndarray
    A: np.ndarray
    coordinates: tuple
    imbalance: np.ndarray

    @property
    def eigenvalues(self):
        """(2n,) eigenvalues of A, 1/s (complex; ±iω for an undamped oscillation)."""
        return scipy.linalg.eigvals(self.A)

    def modes(self):
        """(eigenvalues (2n,), mode shapes (2n, 2n) as columns over z = (u, u̇))."""
        return scipy.linalg.eig(self.A)

    @property
    def frequencies(self):
        """Angular frequencies ω > 0 (rad/s) of the oscillatory modes, ascending (one per pair; zero
        modes, which round-off splits by ~√ε, and overdamped ones are left out; each eigenvalue is
        judged against the fastest oscillation, not against overdamped modes, which would hide
        the slow ones in a stiff, damped model)."""
        lam = self.eigenvalues
        return np.sort(lam.imag[lam.imag > 1e-6 * max(1.0, np.max(lam.imag, initial=0.0))])


@jit_quick(mode="unoptimized")
def _derivatives(model, state, q, p, omega):
    """(L_u̇u̇, L_u̇u, −L_uu, L_u − R_u̇, R_u̇u̇, R_u̇u) at u = 0, u̇ = 0 (see the module docstring),
    and of the cut constraints g_c(u) their Jacobian G_c (m, n) and Hessians (m, n, n); the laws'
    Parameters read the model's values."""
    with bound(model.parameters):
        return _derivatives_bound(model, state, q, p, omega)


def _derivatives_bound(model, state, q, p, omega):
    tree, Q = model.tree, model.blocks(q)
    s0 = model.coordinate_values(q)

    def motion(u, u_dot):
        x, x_dot = jax.jvp(lambda w: configure(tree, Q, w), (u,), (u_dot,))
        return x, x_dot + jnp.cross(omega, x.reshape(-1, 3)).ravel()

    def lagrangian(u, u_dot):
        x, x_dot = motion(u, u_dot)
        return model.routhian(x, x_dot, p, model.coordinate_values(x))

    def rayleigh(u, u_dot):
        return model.rayleigh(*motion(u, u_dot))[0]

    def cut_constraints(u):
        x = configure(tree, Q, u)
        s = state.s + model.coordinate_values(x) - s0  # tracked joint coordinates follow q
        return model.constraints(x, state.theta, s)[np.asarray(tree.closure_rows, np.int64)]

    zero = jnp.zeros(tree.n_dof, q.dtype)
    R_udot = jax.grad(rayleigh, argnums=1)
    return (jax.hessian(lagrangian, argnums=1)(zero, zero),
            jax.jacfwd(jax.grad(lagrangian, argnums=1), argnums=0)(zero, zero),  # ∂²L/∂u̇_i∂u_j
            -jax.hessian(lagrangian, argnums=0)(zero, zero),
            jax.grad(lagrangian, argnums=0)(zero, zero) - R_udot(zero, zero),
            jax.jacfwd(R_udot, argnums=1)(zero, zero), jax.jacfwd(R_udot, argnums=0)(zero, zero),
            jax.jacfwd(cut_constraints)(zero), jax.hessian(cut_constraints)(zero))


def linearize(system, q=None, p=None, *, frame_rate=(0.0, 0.0, 0.0)) -> Linearization:
    """M, D, K and A about the configuration ``q`` (n_q,) at rest in the frame turning at
    ``frame_rate`` (3,), rad/s, with hybrid rotor momenta ``p`` (n_r,), kg m²/s (default: the
    system's initial configuration and rotor momenta).

    system : System or Assembly. Loops and other cut constraints g_c(u) = 0 (see
        :mod:`conserve.model.tree`) are eliminated to first order: u = N u_i with N the basis of
        ker G_c on the independent loop coordinates u_i chosen by pivoted QR
        (:mod:`conserve.backends.loops`; ``coordinates`` names them), their multipliers λ from the
        equilibrium L_u = G_cᵀλ, and K gains the constraints' curvature,
        K = Nᵀ(−L_uu + Σ λ_i ∇²g_i)N.
    """
    assembly = as_assembly(system, "linearize")
    model, tree, state = assembly.model, assembly.model.tree, assembly.initial_state
    if model.time_dependent:
        raise ModelError("linearize: the model has prescribed motions (JointDrive): its equations depend on time "
                         "and have no equilibrium to linearise about; leave the drives out.")
    q = state.q if q is None else jnp.asarray(q, float)
    p = state.p if p is None else jnp.asarray(p, float)
    if q.shape != state.q.shape or p.shape != state.p.shape:
        raise ModelError(f"linearize: q must have shape {state.q.shape} and p {state.p.shape}, "
                         f"got {q.shape} and {p.shape}.")
    _refuse_off_constraints(assembly, q)
    if any(model.row_kinds[i].reads_spin_angles for i in tree.closure_rows):
        raise ModelError("linearize: a cut constraint (a rope on a hybrid winch) involves a rotor's spin "
                         "angle; linearisation treats spin angles as cyclic and cannot keep it.")
    M, C, K, imbalance, R_vv, R_vu, Gc, Hc = (np.asarray(a) for a in
                                              _derivatives(model, state, q, p, jnp.asarray(frame_rate, float)))
    # dampers: d/dt L_u̇ − L_u + R_u̇ = 0 with R_u̇ ≈ R_u̇u̇ u̇ + R_u̇u u
    D, K = C - C.T + R_vv, K + R_vu
    names = tuple(f"{link.name}[{k}]" for link in tree.links for k in range(link.n_dof))
    if Gc.shape[0]:
        lam = np.linalg.lstsq(Gc.T, imbalance, rcond=None)[0]
        imbalance = imbalance - Gc.T @ lam
        K = K + np.einsum("i,ijk->jk", lam, Hc)
        dependent, independent = loops.partition(Gc)
        N = np.asarray(loops.null_basis(Gc, dependent, independent))
        M, D, K, imbalance = N.T @ M @ N, N.T @ D @ N, N.T @ K @ N, N.T @ imbalance
        names = tuple(names[i] for i in np.asarray(independent))
    n = M.shape[0]
    A = np.block([[np.zeros((n, n)), np.eye(n)], [-np.linalg.solve(M, K), -np.linalg.solve(M, D)]])
    return Linearization(M, D, K, A, names, np.asarray(imbalance))


def _refuse_off_constraints(assembly, q):
    """A ModelError naming the elements whose constraints q (n_q,) violates beyond the tolerance of
    the assembly's check: minimal coordinates about such a q describe no configuration."""
    model, state = assembly.model, assembly.initial_state
    spin = jnp.zeros_like(state.theta)  # (the velocity check is not used)
    g, tol = (np.asarray(a) for a in initial_gaps(model, state._replace(q=q), spin)[:2])
    off = [i for i in range(g.shape[0]) if not abs(g[i]) <= tol[i]]
    if off:
        owners = ", ".join(dict.fromkeys(f"'{assembly.layout.constraint_rows[i][0]}'" for i in off))
        raise ModelError(f"linearize: q violates the constraints of {owners} by up to {np.max(np.abs(g[off])):.3g}; "
                         "give a configuration the joints admit (a Solution's q at a node, or "
                         "cs.set_joints(system, angles).initial_state.q).")
