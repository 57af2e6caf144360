"""The discrete forces of the energy-momentum step (Gonzalez 1996; Betsch and Steinmann 2001, 2002):
exact discrete derivatives of everything the model's kinds define.

- constraint forces Ḡᵀλ: G(q_{n+½})ᵀλ for quadratic constraint kinds (an exact discrete
  derivative: Ḡ·Δq = Δg), and for invariant kinds (``InvariantConstraintKind``) the discrete
  gradient of λ·outer(π) in invariant space;
- potentials: ∇π(q_{n+½})ᵀ ∇̄U(π_n, π_{n+1}) with the kind's closed form or Gonzalez's
  discrete gradient (:func:`conserve.discrete.gradient.discrete_gradient`), so f·Δq = ΔU; a
  viscous part (params ``damping`` η) adds ∇π(q_{n+½})ᵀ η Δπ/h, which dissipates η Δπ²/h ≥ 0;
- joint springs, dampers (viscous, and dry friction τ_c tanh(ṡ/ω_s) at ṡ = Δs/h) and motors on
  joint coordinates: w ∇̄s with ∇̄s = ∇π(q_{n+½})ᵀ ∂̄s/∂π (``conserve.model.coordinates``), so
  their work is w Δs exactly;
- applied loads at the midpoint (:class:`~conserve.model.elements.LoadKind`).

All are pure functions of the assembled ``Model`` (n_q = 3 n_blocks
coordinates, n_c kept constraint rows, n_s joint coordinates).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from ..model.assembled import Model, State
from ..model.coordinates import dry_friction
from ..model.elements import InvariantConstraintKind
from ..model.terms import midpoint_state
from .gradient import discrete_gradient


def constraint_force(model: Model, q0, q1, theta0, theta1, s0, s1, lam):
    """(Ḡ_qᵀ λ (n_q,), Ḡ_θᵀ λ (n_r,), Ḡ_sᵀ λ (n_s,)): G(q_{n+½}, θ_{n+½}, s_{n+½})ᵀλ for
    quadratic kinds (exact discrete derivative), the invariant-space discrete gradient of
    λ·outer(π) for kinds with ``outer``. The s part acts on q through the exact discrete
    derivatives ∇̄s of the joint coordinates (``coordinate_load`` of :func:`discrete_forces`)."""
    lam_all = model.to_all_rows(lam)
    C0, C1 = model.configuration(q0, theta0, s0), model.configuration(q1, theta1, s1)
    cotangents = []
    for kind, p, rows in model.constraint_groups():
        lk = lam_all[rows].reshape(-1, len(kind.rows))
        if isinstance(kind, InvariantConstraintKind):
            def dg(pe, a, b, le, kind=kind):
                return discrete_gradient(lambda pi: jnp.sum(le * kind.outer(pe, pi)), a, b)
            lk = jax.vmap(dg)(p, kind.invariants(p, C0), kind.invariants(p, C1), lk)
        cotangents.append(lk)

    def fields(q, theta, s):
        C = model.configuration(q, theta, s)
        return [k.invariants(p, C) if isinstance(k, InvariantConstraintKind) else k.residual(p, C)
                for k, p in zip(model.constraint_kinds, model.constraint_params)]

    if not cotangents:
        return jnp.zeros_like(q0), jnp.zeros_like(theta0), jnp.zeros_like(s0)
    return jax.vjp(fields, 0.5 * (q0 + q1), 0.5 * (theta0 + theta1), 0.5 * (s0 + s1))[1](cotangents)


def part_wrench(f, Q, frame, at):
    """(F, M) (3,) each: the resultant force and the moment about the body point ``at`` (3,) of
    generalised forces ``f`` on a rigid part's blocks, ``frame`` (4,) its block indices (φ, d1, d2,
    d3) into ``f`` and the block array ``Q`` (at the step's midpoint): F = f_φ and, by the virtual
    work of a rigid variation δd_k = δα × d_k, the moment Σ_k d_k × f_k about φ, moved to the point
    φ + at_k d_k. Joint reactions read the constraint forces this way
    (:func:`conserve.joint_reactions`, :func:`conserve.backends.sampled.reaction`)."""
    F, D = f[frame[0]], Q[frame[1:]]
    return F, jnp.sum(jnp.cross(D, f[frame[1:]]), axis=0) - jnp.cross(at @ D, F)


def coordinate_increments(model: Model, q0, q1):
    """Exact increments Δs (n_s,) of the joint coordinates over a step."""
    ds = [d for d, _ in increment_groups(model, q0, q1)]
    return jnp.concatenate(ds) if ds else jnp.zeros((0,), q0.dtype)


def increment_groups(model: Model, q0, q1):
    """Per group of ``model.coordinate_groups()``: the exact increments Δs (n,) of its joint
    coordinates over a step and their derivatives ∂̄s/∂π (n, k) by the invariants π
    (:func:`discrete_forces` needs both; the step's equations share one evaluation)."""
    Q0, Q1 = model.blocks(q0), model.blocks(q1)
    return [jax.vmap(k.geometry.increment)(k.geometry.invariants(p, Q0), k.geometry.invariants(p, Q1))
            for k, p, _ in model.coordinate_groups()]


def discrete_forces(model: Model, t, h, state: State, q1, coordinate_load=None, increments=None):
    """All non-constraint discrete forces of the step t -> t + h.

    ``coordinate_load`` (n_s,), optional: generalized forces w along the joint coordinates
    (N m or N) added to the springs', dampers' and motors' (constraint forces of coordinate
    relations); it does no work of its own accounting. ``increments``, optional: the step's
    :func:`increment_groups`, if already evaluated.

    Returns
    -------
    f : (n_q,) ∇̄V(q_n, q_{n+1}) + Σ w ∇̄s − F̄ (potentials, joint springs-dampers-motors,
        applied loads), so that f·Δq = ΔV + D − W exactly
    s1 : (n_s,) joint coordinates at t + h
    work : (n_w,) discrete work of each motor and load (J)
    dissipation : (n_s + n_v,) energy each joint damper removes, c Δs²/h + τ_c tanh(Δs/(h ω_s)) Δs
        ≥ 0, then each viscous
        potential element (a damped beam element), Σ η Δπ²/h ≥ 0 (J)
    """
    q0, s0 = state.q, state.s
    qm = 0.5 * (q0 + q1)
    Q0, Q1 = model.blocks(q0), model.blocks(q1)
    tm = t + 0.5 * h
    invariants, cotangents, viscous = [], [], []
    # potentials through their invariants (Gonzalez 1996; Betsch and Steinmann 2001)
    for k, p in zip(model.potential_kinds, model.potential_params):
        def dg(pe, a, b, k=k):  # the kind's closed form, else Gonzalez's in invariant space
            closed = k.discrete_gradient(pe, a, b)
            return discrete_gradient(partial(k.energy, pe), a, b) if closed is None else closed
        invariants.append(k.invariants)
        pi0, pi1 = k.invariants(p, Q0), k.invariants(p, Q1)
        cotangent = jax.vmap(dg)(p, pi0, pi1)
        if "damping" in p:  # viscous (Kelvin–Voigt): η Δπ/h, dissipating Σ η Δπ²/h ≥ 0
            cotangent = cotangent + p["damping"] * (pi1 - pi0) / h
            viscous.append(jnp.sum(p["damping"] * (pi1 - pi0) ** 2, axis=1) / h)
        cotangents.append(cotangent)
    # joint coordinates: w ∇̄s with ∇̄s = ∇π(q_m)ᵀ ∂̄s/∂π
    s1, work, dissipation = [], [], []
    increments = increment_groups(model, q0, q1) if increments is None else increments
    for (k, p, sl), (ds, dsdpi) in zip(model.coordinate_groups(), increments):
        s_mid = s0[sl] + 0.5 * ds
        rate = ds / h
        friction = dry_friction(p, rate)
        w = p["stiffness"] * (s_mid - p["rest"]) + p["damping"] * rate + friction
        if coordinate_load is not None:
            w = w + coordinate_load[sl]
        if k.motor is not None:
            a_state = midpoint_state(Q0, Q1, p["frame_a"], h)
            tau = k.motor.vmap((None, 0, 0, 0))(tm, s_mid, rate, a_state)
            w = w - tau
            work.append(tau * ds)
        invariants.append(k.geometry.invariants)
        cotangents.append(w[:, None] * dsdpi)
        s1.append(s0[sl] + ds)
        dissipation.append(p["damping"] * ds * rate + friction * ds)
    params = list(model.potential_params) + [p for _, p, _ in model.coordinate_groups()]

    def all_invariants(q):
        Q = model.blocks(q)
        return [fn(p, Q) for fn, p in zip(invariants, params)]

    f = jax.vjp(all_invariants, qm)[1](cotangents)[0] if invariants else jnp.zeros_like(q0)
    # applied loads at the midpoint
    for k, p in zip(model.load_kinds, model.load_params):
        force, w_load = k.generalized_force(p, Q0, Q1, tm, h)
        f = f - force[:-4].ravel()
        work.append(w_load)
    cat = lambda xs: jnp.concatenate(xs) if xs else jnp.zeros((0,), q0.dtype)  # noqa: E731
    return f, cat(s1), cat(work), cat(dissipation + viscous)
