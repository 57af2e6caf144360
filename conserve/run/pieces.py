"""A run's pieces — the outputs of its chunks with their nodes' diagnostics, as dicts of node_*,
step_* and diag_* arrays — and their assembly into a :class:`~conserve.Solution` (and the
ConvergenceError of a failed run)."""

from __future__ import annotations

import warnings

import jax
import numpy as np

from ..backends import StepOutput
from ..discrete.newton import Newton
from ..errors import ConstraintWarning
from ..model.assembled import Model, State
from ..model.system import POSITION_TOL
from ..results.solution import Solution, diagnostics, layout_record
from .failures import convergence_error

#: The State fields a Solution keeps per node (q_low, the rounding carried by the compensated
#: update, lives only in the run's carry and its checkpoints).
NODE_FIELDS = ("q", "v", "s", "p", "theta")


def first_piece(model: Model, state: State, t0, mode="unoptimized", control=None):
    """The node at t0 as a piece: its node_* and diag_* arrays (leading axis 1), the diagnostics
    evaluated as those of a run compiled ``mode`` (:func:`conserve.results.solution.diagnostics`),
    with the controllers' initial ``control`` (the carry's, :func:`conserve.run.pieces.control_columns`)."""
    node = jax.tree.map(lambda a: np.asarray(a)[None], state)
    control = None if control is None else jax.tree.map(lambda a: np.asarray(a)[None], control)
    return {**{f"node_{k}": getattr(node, k) for k in NODE_FIELDS},
            **{f"diag_{k}": a for k, a in diagnostics(model, node, [t0], mode).items()},
            **control_columns(model, control)}


def piece(out: StepOutput, done, diag, model: Model | None = None):
    """The first ``done`` steps of a chunk's output and of its nodes' diagnostics ``diag``
    (:func:`conserve.results.solution.diagnostics` of every node of the chunk) as a dict of node_*, diag_*
    and step_* arrays (with the ``model``'s controllers' columns, :func:`conserve.run.pieces.control_columns`)."""
    out = jax.tree.map(lambda a: np.asarray(a)[:done], out)
    record = out.record
    return {**{f"node_{k}": getattr(out.node, k) for k in NODE_FIELDS},
            **{f"diag_{k}": np.asarray(a)[:done] for k, a in diag.items()},
            **(control_columns(model, out.control) if model is not None else {}),
            "step_lam": record.multipliers, "step_iterations": record.iterations, "step_work": record.work,
            "step_dissipation": record.dissipation, "step_substeps": record.substeps}


def control_columns(model: Model, control) -> dict:
    """The controllers' carry at each node (leading node axis) as diag_* arrays, so that a Solution
    keeps and saves them (:meth:`conserve.Solution.controller` reads them):
    ``control.<name>.k`` the next sample's index, ``.time`` the last one's time (s),
    ``.commands`` the held commands, ``.state.<j>`` the leaves of the law's state and
    ``.reading.<sensor>`` the readings the last sample used."""
    if control is None:
        return {}
    columns = {}
    for sampler, c in zip(model.controllers, control):
        base = f"diag_control.{sampler.name}."
        columns[base + "k"], columns[base + "time"] = np.asarray(c.k), np.asarray(c.time)
        columns[base + "commands"] = np.asarray(c.commands)
        columns.update({f"{base}state.{j}": np.asarray(a) for j, a in enumerate(jax.tree.leaves(c.state))})
        columns.update({f"{base}reading.{name}": np.asarray(a) for name, a in c.readings.items()})
    return columns


def assemble_solution(assembly, settings, backend, pieces, n, failed, failure, compile_time, run_time, warn=True):
    """(Solution of the n steps in ``pieces``, the ConvergenceError of a failed run or None);
    ``warn``: the ConstraintWarning of rows left that were dropped as redundant (an ensemble
    gives one for all its members)."""
    model, layout = assembly.model, assembly.layout
    t0, dt = settings["t0"], settings["dt"]
    join = lambda key: np.concatenate([p[key] for p in pieces if key in p])  # noqa: E731
    q, v, s, p, theta = (join(f"node_{k}") for k in NODE_FIELDS)
    lams, iters, work, dissipation, substeps = (join(f"step_{k}") for k in
                                                ("lam", "iterations", "work", "dissipation", "substeps"))
    diag = {k[5:]: join(k) for k in pieces[0] if k.startswith("diag_")}
    if dt == "adaptive":  # the nodes' times and each step's size (conserve.run.adaptive)
        t = np.concatenate([[t0], *(p["node_t"] for p in pieces if "node_t" in p)])
        h = np.concatenate([np.zeros(0), *(p["step_h"] for p in pieces if "step_h" in p)])
    else:
        t, h = t0 + dt * np.arange(n + 1), dt
    stats = {"backend": backend.name, "steps": n, "compile": settings["compile"],
             "unknown_steps": settings.get("unknown_steps"), "compile_time": compile_time, "run_time": run_time,
             "time_per_step": run_time / max(n, 1), "newton_tol": settings["newton"][0],
             "order": settings.get("order", 2), "unknowns": backend.unknowns(model), "subdivided_steps": int(np.sum(substeps > 1)),
             "newton_matrix": getattr(getattr(backend, "linear", None), "name", None)}  # "dense", "coloured", "tree"

    def multipliers():  # on first access (Solution.deferred)
        scaled = lams
        if n and not settings.get("saveat"):  # those a backend eliminated (the reduced backend's tree rows)
            scaled = backend.recover_multipliers(model, State(q, v, s, p, theta, np.zeros_like(q)), lams, t[:-1], h)
        full = np.zeros((n, len(layout.constraint_rows)))
        full[:, list(model.constraint_keep)] = scaled * (2.0 / np.reshape(h, (-1, 1))**2)
        return full

    solution = Solution.deferred(multipliers, t=t, q=q, v=v, s=s, p=p, theta=theta, newton_iterations=iters,
                                 work=work, dissipation=dissipation, substeps=substeps,
                                 layout=layout_record(layout), diagnostics=diag, stats=stats, assembly=assembly)
    if warn:
        warn_violated_redundant_rows(layout, diag.get("constraint_residual"), t)
    if failed:
        history = np.asarray(failure[0])[: int(failure[1])]
        return solution, convergence_error(n, t0 + n * dt, dt, Newton(*settings["newton"]), history, solution, settings)
    return solution, None


#: ``|g|`` beyond which a run's constraint residual means a row it does not solve was left (the rows
#: solved hold to round-off, ~1e-15 of their terms)
LEFT_CONSTRAINT = 1e3 * POSITION_TOL


def warn_violated_redundant_rows(layout, residual, t):
    """Warn (:class:`~conserve.errors.ConstraintWarning`) when the constraints of a run whose
    assembly dropped rows as redundant are violated (:func:`left_redundant_rows`)."""
    message = left_redundant_rows(layout, residual, t)
    if message:
        warnings.warn(f"simulate: {message}", ConstraintWarning, stacklevel=4)


def left_redundant_rows(layout, residual, t):
    """What a run whose assembly dropped rows as redundant did to them, or None: rows dependent on
    the others only at the initial configuration (a singular pose) are left by the motion, since
    the step does not solve them. ``residual`` (N+1,) max ``|g|`` of every row at the nodes' times ``t``."""
    if not layout.dropped_rows or residual is None or not len(residual):
        return None
    worst = int(np.nanargmax(residual)) if np.any(np.isfinite(residual)) else 0
    if not residual[worst] > LEFT_CONSTRAINT:
        return None
    rows = ", ".join(f"'{layout.constraint_rows[i][0]}' ({layout.constraint_rows[i][1]})" for i in layout.dropped_rows)
    return (f"the constraints are violated by up to {residual[worst]:.3g} (max |g|, at t = {t[worst]:.6g} s), "
            f"which the rows dropped at assembly as redundant explain: {rows}. They depended on the others only at "
            "the initial configuration (a singular pose: a mechanism at a dead centre, constraints aligned), so the "
            "step does not solve them and the motion left them. Start from a configuration where the constraints are "
            "independent, or remove the constraint that is redundant there (assemble(redundant='raise') lists them).")
