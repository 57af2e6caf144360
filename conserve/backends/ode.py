"""Thompson's reduced ODE integrated by ``scipy.integrate.solve_ivp`` (``backend="ode"``):
a non-conserving reference for studies (Thompson §III, eq. (15)).

With the kinematic tree's null-space map q̇ = H2(q) ν (:func:`conserve.backends.null_space.velocities`)
and the Routhian of the hybrid rotors' axial momenta p,

    L(q, q̇) = ½ q̇ᵀ M q̇ − p·θ'(q, q̇, p) − V(q, s),      D(q̇) = ½ Σ c_k ṡ_k²

(θ' the rotors' relative rates, s the tracked joint coordinates, D Rayleigh's function of the
joint dampers), the equations of motion in the minimal velocities ν are

    H2ᵀ M H2 ν' = H2ᵀ (∂L/∂q − ∂²L/∂q̇∂q q̇ − ∂²L/∂q̇∂p p' − ∂D/∂q̇ + Q_a − G̃ᵀλ − M Ḣ2 ν),
    p' = τ_r − c_r θ' − G_θᵀλ,   q' = H2 ν,   s' = ∂s/∂q q',   θ' = θ'(q, q', p),

all derivatives by jax. Q_a and τ_r are the motors' and applied loads' forces at (t, q, q')
(``Model.applied_forces``), c_r the rotor bearings. The
constraints the tree does not satisfy by construction (loop-closing joints, ropes, coordinate
relations, user constraints: g(q, θ, s) = 0, with G̃ = G_q + G_s ∂s/∂q) keep multipliers λ,
fixed at every evaluation by the acceleration-level condition d/dt (G_q q' + G_θ θ' + G_s s') = 0
(an index-1 formulation: ẏ is affine in λ, so λ solves one small linear system). The state
(q, ν, s, p, θ, dissipated energy per damper, work per motor and load) is integrated with any
solve_ivp method; nothing is projected, so constraints and invariants drift at the
integrator's tolerance (the Solution's diagnostics show by how much).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation.modes import jit_quick
from ..errors import ModelError
from ..model.assembled import State
from ..model.coordinates import dry_friction
from ..model.parameters import bound
from .base import ReferenceBackend
from .null_space import null_space, velocities


@dataclass(frozen=True)
class ODE(ReferenceBackend):
    """Thompson's reduced ODE by ``scipy.integrate.solve_ivp`` with ``method`` (any solve_ivp method),
    ``rtol``, ``atol``: a non-conserving reference (see the module docstring)."""

    method: str = "DOP853"
    rtol: float = 1e-10
    atol: float = 1e-12
    name = "ode"

    def integrate(self, assembly, t0, t_end, dt, progress=None, every=1024):
        return integrate(assembly, t0, t_end, dt, self.method, self.rtol, self.atol, progress, every)

    def unknowns(self, model) -> int:
        return unknowns(model)


def _sizes(model):
    """(n_q, n_dof, n_s, n_r): coordinates, minimal velocities, joint coordinates, rotors."""
    n_s = sum(sl.stop - sl.start for *_, sl in model.coordinate_groups())
    return model.n_coordinates, model.tree.n_dof, n_s, model.n_rotors


def _n_work(model):
    """Number of motors and loads: the length of the power from
    ``Model.applied_forces``."""
    n_q, _, n_s, n_r = _sizes(model)
    x = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float64)  # noqa: E731
    return jax.eval_shape(model.applied_forces, x(), x(n_q), x(n_q), x(n_s), x(n_r), x(n_r))[2].shape[0]


def _n_viscous(model):
    """Number of viscous potential elements (their dissipation follows the joint dampers')."""
    return sum(int(p["damping"].shape[0]) for _, p in model.viscous_groups())


def unknowns(model) -> int:
    """Size of the ODE state: q, ν, s, p, θ, one dissipation per damper, viscous element and
    rotor, one work per motor and load."""
    n_q, n_d, n_s, n_r = _sizes(model)
    return n_q + n_d + 2 * n_s + _n_viscous(model) + 3 * n_r + _n_work(model)


def _split(model, y, xp=jnp):
    """(q, ν, s, p, θ, E_d, W) of the ODE state y (``xp``: jax.numpy, or numpy outside jit)."""
    n_q, n_d, n_s, n_r = _sizes(model)
    return xp.split(y, np.cumsum([n_q, n_d, n_s, n_r, n_r, n_s + _n_viscous(model) + n_r]))


def _closure_constraints(model, q, theta, s):
    """g(q, θ, s) of the rows the tree does not satisfy by construction (they keep multipliers)."""
    return model.constraints(q, theta, s)[np.asarray(model.tree.closure_rows, np.int64)]


def _rates(model, t, y, lam):
    """ẏ of the ODE state y = (q, ν, s, p, θ, E_d, W) for the multipliers λ of the non-tree rows
    (see the module docstring); affine in λ."""
    q, nu, s, p, theta, _, _ = _split(model, y)
    tree = model.tree
    c_r = model.rotor_params["friction"]

    def lagrangian(q, v, p):  # s is integrated (it counts turns); its q-derivative is ∂s/∂q
        s_q = s + model.coordinate_values(q) - jax.lax.stop_gradient(model.coordinate_values(q))
        return model.routhian(q, v, p, s_q)

    H2 = null_space(tree, model.blocks(q))
    v = H2 @ nu
    H2_dot_nu = jax.jvp(lambda x: velocities(tree, model.blocks(x), nu), (q,), (v,))[1]
    dD, s_dot = jax.grad(lambda w: model.rayleigh(q, w), has_aux=True)(v)  # the bearings act on θ only
    rates = model.rotor_relative_rates(q, v, p)
    applied, tau_r, power = model.applied_forces(t, q, v, s, theta, p)
    if lam.size:  # constraint forces G̃ᵀλ on q and G_θᵀλ on the rotors
        g_q, g_theta, g_s = jax.vjp(partial(_closure_constraints, model), q, theta, s)[1](lam)
        applied = applied - g_q - (jax.vjp(model.coordinate_values, q)[1](g_s)[0] if s.size else 0.0)
        tau_r = tau_r - g_theta
    bearing = c_r * rates + dry_friction(model.rotor_params, rates)
    p_dot = tau_r - bearing
    dLdv = lambda q, p: jax.grad(lagrangian, argnums=1)(q, v, p)  # noqa: E731
    force = (jax.grad(lagrangian)(q, v, p) - jax.jvp(lambda x: dLdv(x, p), (q,), (v,))[1]
             - jax.jvp(lambda x: dLdv(q, x), (p,), (p_dot,))[1] - dD + applied - model.mass_times(H2_dot_nu))
    nu_dot = jnp.linalg.solve(H2.T @ jax.vmap(model.mass_times, 1, 1)(H2), H2.T @ force)
    dampers = (jnp.concatenate([g["damping"] * s_dot[sl] ** 2 + dry_friction(g, s_dot[sl]) * s_dot[sl]
                                for _, g, sl in model.coordinate_groups()]) if s.size else s)
    return jnp.concatenate([v, nu_dot, s_dot, p_dot, rates, dampers, model.viscous_powers(q, v),
                            bearing * rates, power])


def _velocity_constraints(model, y):
    """G_q q' + G_θ θ' + G_s s' of the non-tree rows at the state y."""
    q, nu, s, p, theta, _, _ = _split(model, y)
    v = velocities(model.tree, model.blocks(q), nu).ravel()
    rates, s_dot = model.rotor_relative_rates(q, v, p), jax.jvp(model.coordinate_values, (q,), (v,))[1]
    return jax.jvp(partial(_closure_constraints, model), (q, theta, s), (v, rates, s_dot))[1]


@jit_quick
def rhs(model, t, y):
    """dy/dt of the ODE state y = (q, ν, s, p, θ, E_d, W), the multipliers of the non-tree rows
    eliminated (see the module docstring)."""
    with bound(model.parameters):  # the laws' Parameters read the model's values
        return _rhs(model, t, y)


def _rhs(model, t, y):
    zero = jnp.zeros(len(model.tree.closure_rows), y.dtype)
    rates = partial(_rates, model, t, y)
    if not zero.size:
        return rates(zero)
    y_dot, F = rates(zero), jax.jacfwd(rates)(zero)
    constraint_rate = lambda w: jax.jvp(partial(_velocity_constraints, model), (y,), (w,))[1]  # noqa: E731
    lam = jnp.linalg.solve(jax.vmap(constraint_rate, 1, 1)(F), -constraint_rate(y_dot))
    return y_dot + F @ lam


def integrate(assembly, t0, t_end, dt, method="DOP853", rtol=1e-10, atol=1e-12, progress=None, every=1024):
    """Integrate from the assembly's initial state; returns (nodes State (N+1, ...), dissipation
    per step (N, n_s + n_v + n_r) and work per step (N, n_w) in J, stats, failure). Nodes at t0 + k dt,
    k = 0 … N, from the solver's dense output as in ``solve_ivp`` (whose loop this is); if the
    solver fails, the nodes it reached and its message as ``failure`` (else None).
    ``progress(nodes_done − 1, N)`` is called whenever ``every`` more nodes are done and at the end;
    an exception it raises (a request to stop, Ctrl-C) ends the integration and is returned as
    ``failure`` with the nodes reached."""
    model, state = assembly.model, assembly.initial_state
    if model.time_dependent:
        raise ModelError("backend 'ode': prescribed motions (JointDrive) are not supported by the reference "
                         "ODE (its constraints are differentiated to the acceleration level without time "
                         "derivatives of the laws); use 'director' or 'reduced'.")
    H0 = np.asarray(_null_space(model, state.q))
    nu0 = np.linalg.lstsq(H0, np.asarray(state.v), rcond=None)[0]
    # dissipation per damper and viscous element, work per motor and load
    n_energies = state.s.shape[0] + _n_viscous(model) + state.p.shape[0] + _n_work(model)
    import scipy.integrate  # imported here: 0.2 s that other backends' runs need not pay

    y0 = np.concatenate([state.q, nu0, state.s, state.p, state.theta, np.zeros(n_energies)])
    n = max(1, int(np.ceil((t_end - t0) / dt - 1e-9)))
    t_eval = t0 + dt * np.arange(n + 1)
    tic = time.perf_counter()
    f = lambda t, y: np.asarray(rhs(model, np.float64(t), y))  # noqa: E731
    f(t0, y0)
    compile_time = time.perf_counter() - tic
    tic = time.perf_counter()
    solver = (getattr(scipy.integrate, method) if isinstance(method, str) else method)(
        f, t0, y0, t_eval[-1], rtol=rtol, atol=atol)
    ys, failure, reported = [y0], None, 0
    while solver.status == "running" and failure is None:
        message = solver.step()
        if solver.status == "failed":
            failure = f"{type(solver).__name__}: {message}"
            break
        later = t_eval[len(ys):]
        reached = later[:np.searchsorted(later, solver.t, side="right")]
        if reached.size:
            ys.extend(np.atleast_2d(solver.dense_output()(reached).T))
        if progress is not None and (len(ys) - 1 - reported >= every or len(ys) == n + 1):
            reported = len(ys) - 1
            try:
                progress(reported, n)
            except BaseException as err:  # noqa: BLE001  (a stop request: keep what was reached)
                failure = err
    run_time = time.perf_counter() - tic
    q, nu, s, p, theta, e, w = _split(model, np.stack(ys, axis=1), np)
    v = np.asarray(_velocities(model, q.T, nu.T))
    nodes = State(q.T, v, s.T, p.T, theta.T, np.zeros_like(q.T))
    stats = {"compile_time": compile_time, "run_time": run_time, "time_per_step": run_time / n,
             "rhs_evaluations": int(solver.nfev), "method": method, "rtol": rtol, "atol": atol,
             "unknowns": unknowns(model)}
    return nodes, np.diff(e.T, axis=0), np.diff(w.T, axis=0), stats, failure


@jit_quick(mode="unoptimized")
def _null_space(model, q):
    """H2(q) (n_q, n_dof) of the model's tree (:func:`~conserve.backends.null_space.null_space`)."""
    return null_space(model.tree, model.blocks(q))


@jit_quick(mode="unoptimized")
def _velocities(model, q, nu):
    """q̇ = H2(q) ν at every node: q (N, n_q), ν (N, n_dof) -> (N, n_q)."""
    return jax.vmap(lambda qk, nk: velocities(model.tree, model.blocks(qk), nk))(q, nu)
