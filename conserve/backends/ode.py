"""Thompson's reduced ODE integrated by :func:`scipy.integrate.solve_ivp` (``backend="ode"``):
a non-conserving reference for studies (DESIGN §8, Thompson §III).

With the kinematic tree's null-space map q̇ = H2(q) ν (:func:`conserve.model.tree.velocities`)
and the Routhian of the hybrid rotors' axial momenta p,

    L(q, q̇) = ½ q̇ᵀ M q̇ − p·θ'(q, q̇, p) − V(q, s),      D(q̇) = ½ Σ c_k ṡ_k²

(θ' the rotors' relative rates, s the tracked joint coordinates, D Rayleigh's function of the
joint dampers; a rotor bearing's torque −c_r θ' acts on p alone), the equations of motion in the minimal velocities ν are

    H2ᵀ M H2 ν' = H2ᵀ (∂L/∂q − ∂²L/∂q̇∂q q̇ − ∂²L/∂q̇∂p p' − ∂D/∂q̇ − M Ḣ2 ν),
    q' = H2 ν,   s' = ∂s/∂q q',   p' = −c_r θ',   θ' = θ'(q, q', p),

all derivatives by jax. The state (q, ν, s, p, θ, dissipated energy per element) is integrated
with any solve_ivp method; nothing is projected, so constraints and invariants drift at the
integrator's tolerance (the Solution's diagnostics show by how much). Tree systems only, without
motors or applied loads (their continuous forces are not modelled here).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

from ..errors import ModelError
from ..model.assembled import State
from ..model.tree import null_space, velocities


def unknowns(model) -> int:
    """Size of the ODE state per evaluation: q, ν, s, p, θ and one dissipation per damper."""
    n_s, n_r = sum(sl.stop - sl.start for *_, sl in model._coordinate_groups()), model.n_rotors
    return model.n_coordinates + model.tree.n_dof + 2 * n_s + 3 * n_r


def check(assembly):
    """Refuse, with the reason, what the ODE backend does not model."""
    model, layout = assembly.model, assembly.layout
    if model.tree.loop_rows or model.tree.cut_rows:
        owners = sorted({layout.constraint_rows[model.constraint_keep[i]][0]
                         for i in model.tree.loop_rows + model.tree.cut_rows})
        raise ModelError(f"backend 'ode': the constraints of {owners} close loops or act outside the kinematic "
                         "tree; the reduced ODE needs a tree system. Use backend='reduced' or 'director'.")
    if layout.work_names:
        raise ModelError(f"backend 'ode': motors and applied loads {layout.work_names} are not modelled by the "
                         "reduced ODE; use backend='reduced' or 'director'.")


def _split(model, y):
    n_q, n_d, n_r = model.n_coordinates, model.tree.n_dof, model.n_rotors
    n_s = (y.shape[0] - n_q - n_d - 3 * n_r) // 2
    sizes = np.cumsum([n_q, n_d, n_s, n_r, n_r])
    return jnp.split(y, sizes)  # q, ν, s, p, θ, dissipated energy (n_s + n_r)


@jax.jit
def rhs(model, y):
    """dy/dt of the ODE state y = (q, ν, s, p, θ, E_d) (see the module docstring)."""
    q, nu, s, p, theta, _ = _split(model, y)
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
    p_dot = -c_r * rates
    dLdv = lambda q, p: jax.grad(lagrangian, argnums=1)(q, v, p)  # noqa: E731
    force = (jax.grad(lagrangian)(q, v, p) - jax.jvp(lambda x: dLdv(x, p), (q,), (v,))[1]
             - jax.jvp(lambda x: dLdv(q, x), (p,), (p_dot,))[1] - dD - model.mass_times(H2_dot_nu))
    nu_dot = jnp.linalg.solve(H2.T @ jax.vmap(model.mass_times, 1, 1)(H2), H2.T @ force)
    c_s = jnp.concatenate([g["damping"] for _, g, _ in model._coordinate_groups()]) if s.size else s
    return jnp.concatenate([v, nu_dot, s_dot, p_dot, rates, c_s * s_dot**2, c_r * rates**2])


def integrate(assembly, t0, t_end, dt, method="DOP853", rtol=1e-10, atol=1e-12):
    """Integrate from the assembly's initial state; returns (nodes State (N+1, ...), dissipation
    per step (N, n_s + n_r), stats, failure). Nodes at t0 + k dt, k = 0 … N; if solve_ivp fails,
    the nodes it reached and its message as ``failure`` (else None)."""
    check(assembly)
    model, state = assembly.model, assembly.initial_state
    H0 = np.asarray(null_space(model.tree, model.blocks(state.q)))
    nu0 = np.linalg.lstsq(H0, np.asarray(state.v), rcond=None)[0]
    n_diss = state.s.shape[0] + state.p.shape[0]
    y0 = np.concatenate([state.q, nu0, state.s, state.p, state.theta, np.zeros(n_diss)])
    n = max(1, int(np.ceil((t_end - t0) / dt - 1e-9)))
    t_eval = t0 + dt * np.arange(n + 1)
    tic = time.perf_counter()
    f = lambda t, y: np.asarray(rhs(model, jnp.asarray(y)))  # noqa: E731
    f(t0, y0)
    compile_time = time.perf_counter() - tic
    tic = time.perf_counter()
    out = solve_ivp(f, (t0, t_eval[-1]), y0, method=method, t_eval=t_eval, rtol=rtol, atol=atol)
    run_time = time.perf_counter() - tic
    q, nu, s, p, theta, e = (np.asarray(x) for x in _split(model, jnp.asarray(out.y)))
    H = jax.vmap(lambda qk: null_space(model.tree, model.blocks(qk)))(jnp.asarray(q.T))
    v = np.einsum("nij,jn->ni", np.asarray(H), nu)
    nodes = State(q.T, v, s.T, p.T, theta.T)
    stats = {"compile_time": compile_time, "run_time": run_time, "time_per_step": run_time / n,
             "rhs_evaluations": int(out.nfev), "method": method, "rtol": rtol, "atol": atol,
             "unknowns": unknowns(model)}
    return nodes, np.diff(e.T, axis=0), stats, None if out.success else f"solve_ivp ({method}): {out.message}"
