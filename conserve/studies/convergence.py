"""Convergence and work-precision studies: run models at several step sizes against a reference.

>>> table = cs.studies.convergence({"hybrid": lambda: spacecraft("hybrid"),
...                                 "body": lambda: spacecraft("body")},
...                                dts=[4e-2, 2e-2, 1e-2], t_end=2.0,
...                                error=cs.studies.relative_error(["core"]))
>>> print(table.to_markdown()); table.plot("convergence.png")

Error measures are functions ``error(sol, ref) -> float`` of a run and the reference run (which
may be of another model: compare what both have, e.g. a body's coordinates or a marker point).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ..compilation.modes import resolved_mode
from ..errors import CoarseStepWarning, ConvergenceError
from ..run.options import check_mode, planned_work
from ..run.progress import ProgressBar
from ..run.simulate import simulate


def _coordinates(sol, parts):
    return np.concatenate([np.concatenate([sol[p].position[-1], sol[p].rotation[-1].T.ravel()])
                           if sol[p].kind == "RigidBody" else sol[p].position[-1] for p in parts])


def relative_error(parts):
    """ε_rel = ‖q(T) − q_ref(T)‖ / ‖q_ref(T)‖ on the named parts' coordinates (φ and directors):
    the measure of the hybrid-coordinate paper, on coordinates both models share."""
    def error(sol, ref):
        q, q_ref = _coordinates(sol, parts), _coordinates(ref, parts)
        return float(np.linalg.norm(q - q_ref) / np.linalg.norm(q_ref))
    error.__name__ = f"ε_rel({', '.join(parts)})"
    return error


def marker_error(part, point=(0.0, 0.0, 0.0)):
    """Max over time of ``|x(t) − x_ref(t)|`` for a body point (body axes, m), at the run's nodes
    (the reference is sampled at them; its step must divide the run's)."""
    point = np.asarray(point, float)

    def error(sol, ref):
        x = sol[part].position + sol[part].rotation @ point if sol[part].kind == "RigidBody" else sol[part].position
        r = ref[part].position + ref[part].rotation @ point if ref[part].kind == "RigidBody" else ref[part].position
        idx = np.searchsorted(ref.t, sol.t - 1e-12 * max(1.0, sol.t[-1]))
        return float(np.max(np.linalg.norm(x - r[np.minimum(idx, len(ref.t) - 1)], axis=1)))
    error.__name__ = f"marker({part})"
    return error


def energy_error(sol, ref=None):
    """``max |E_n − E_0 − Σ(W − D)| / |E_0|``: the energy-balance error of the run itself."""
    return float(np.max(np.abs(sol.energy_balance_error)) / abs(sol.energy.total[0]))


def momentum_error(sol, ref=None):
    """``max |J_n − J_0| / |J_0|``: the angular-momentum drift of the run itself."""
    J = sol.angular_momentum
    return float(np.max(np.abs(J - J[0])) / np.linalg.norm(J[0]))


@dataclass
class ConvergenceTable:
    """Errors, observed orders and costs of each model at each step size.

    Attributes
    ----------
    dts : (k,) step sizes, s
    errors, run_times, time_per_step : {label: (k,)} error measure, run time after compilation (s);
        NaN where Newton failed (listed in ``extra["failures"]``)
    unknowns : {label: int} Newton unknowns per step
    reference : description of the reference run
    extra : ``failures`` {label: [(Δt, step)]} where Newton failed; ``reference`` the reference Solution;
        ``compile`` the code generation of all its runs (:func:`convergence`'s ``compile`` resolved)
    """

    dts: np.ndarray
    errors: dict
    run_times: dict
    time_per_step: dict
    unknowns: dict
    error_name: str = "error"
    reference: str = ""
    extra: dict = field(default_factory=dict)

    def orders(self, label):
        """Observed order per pair of consecutive step sizes, log(e_i/e_{i+1}) / log(Δt_i/Δt_{i+1})."""
        e, h = np.asarray(self.errors[label]), self.dts
        return np.log(e[:-1] / e[1:]) / np.log(h[:-1] / h[1:])

    def fitted_order(self, label, max_dt=None):
        """Least-squares slope of log(error) against log(Δt), over the runs that converged (and,
        with ``max_dt``, only the step sizes ≤ max_dt: the asymptotic range of a model that is
        pre-asymptotic at coarse steps)."""
        e = np.asarray(self.errors[label])
        ok = np.isfinite(e) & (self.dts <= (np.inf if max_dt is None else max_dt * (1 + 1e-12)))
        return float(np.polyfit(np.log(self.dts[ok]), np.log(e[ok]), 1)[0]) if ok.sum() >= 2 else float("nan")

    def to_markdown(self, max_dt=None):
        """The table, observed orders per pair and the fitted order (over Δt ≤ ``max_dt`` if given)."""
        labels = list(self.errors)
        head = "| Δt [s] | " + " | ".join(f"{self.error_name} {m} | order {m} | µs/step {m}" for m in labels) + " |"
        lines = [head, "|" + "---|" * (1 + 3 * len(labels))]
        for i, h in enumerate(self.dts):
            cells = []
            for m in labels:
                order = self.orders(m)[i - 1] if i else float("nan")
                cells += [f"{self.errors[m][i]:.3e}", "" if i == 0 else f"{order:.2f}",
                          f"{1e6 * self.time_per_step[m][i]:.0f}"]
            lines.append(f"| {h:g} | " + " | ".join(cells) + " |")
        lines.append("")
        over = "" if max_dt is None else f" over Δt ≤ {max_dt:g}"
        lines += [f"- {m}: fitted order{over} {self.fitted_order(m, max_dt):.2f}, {self.unknowns[m]} unknowns per step"
                  for m in labels]
        for m, fails in self.extra.get("failures", {}).items():
            lines.append(f"- {m}: Newton failed at Δt = {', '.join(f'{h:g} (step {n})' for h, n in fails)}")
        if self.reference:
            lines.append(f"- reference: {self.reference}")
        return "\n".join(lines)

    def to_csv(self, path):
        labels = list(self.errors)
        cols = [self.dts] + [a for m in labels for a in (self.errors[m], self.run_times[m], self.time_per_step[m])]
        header = "dt," + ",".join(f"{k}_{m}" for m in labels for k in ("error", "run_time", "time_per_step"))
        np.savetxt(path, np.column_stack(cols), delimiter=",", header=header, comments="", fmt="%.10g")

    def plot(self, path=None, title="", max_dt=None):
        """Error vs Δt (log-log, with a Δt² guide) and error vs run time (work-precision); the
        legend gives the fitted order (over Δt ≤ ``max_dt`` if given)."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        for m, e in self.errors.items():
            a1.loglog(self.dts, e, "o-", label=f"{m} (order {self.fitted_order(m, max_dt):.2f})")
            a2.loglog(self.run_times[m], e, "o-", label=m)
        e0 = max(e[0] for e in self.errors.values())
        a1.loglog(self.dts, e0 * (self.dts / self.dts[0]) ** 2, "k:", label="Δt²")
        a1.set_xlabel("Δt [s]")
        a2.set_xlabel("run time after compilation [s]")
        for a in (a1, a2):
            a.set_ylabel(self.error_name)
            a.grid(alpha=0.3, which="both")
            a.legend(fontsize=8)
        fig.suptitle(title or f"convergence ({self.reference})")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig


def convergence(models, dts, t_end, *, error, reference=None, backend="director", newton=None, order=2,
                repeats=1, progress=False, compile="auto") -> ConvergenceTable:
    """Run each model at each step size and measure ``error(sol, ref)``.

    Parameters
    ----------
    models : {label: System | Assembly | callable returning one}, or a single one
    dts : step sizes, s (any order; sorted descending)
    t_end : s
    error : callable (sol, ref) -> float, e.g. :func:`relative_error`, :func:`marker_error`,
        :func:`energy_error`
    reference : a Solution, or a step size for a reference run of the first model (default:
        min(dts) / 8); a Richardson check of the reference (the same at half its step) is reported
    backend : backend of every run (a {label: backend} dict for several)
    order : 2, 4 or 6, the order of every run (``simulate(..., order=)``; a {label: order} dict for
        several); the reference runs at the first model's
    repeats : runs per point; the fastest run time is kept
    progress : show a progress bar per run on stderr
    compile : the code generation of every run (``simulate(..., compile=)``): one for the whole
        study, so that its run times compare; "auto" resolves it once, by the study's longest run
    """
    def run(asm, h, label, backend, order):
        bar = ProgressBar(f"{label}, Δt = {h:g}") if progress else None
        with warnings.catch_warnings():  # coarse steps are the point of a study: its table shows their error
            warnings.simplefilter("ignore", CoarseStepWarning)
            return simulate(asm, t_end, h, backend=backend, newton=newton, order=order, progress=bar, compile=code)

    if not isinstance(models, dict):
        models = {"model": models}
    assemblies = {m: (f() if callable(f) else f) for m, f in models.items()}
    assemblies = {m: (a.assemble() if hasattr(a, "assemble") else a) for m, a in assemblies.items()}
    backends = backend if isinstance(backend, dict) else {m: backend for m in models}
    orders = order if isinstance(order, dict) else {m: order for m in models}
    dts = np.sort(np.asarray(dts, float))[::-1]
    first = next(iter(assemblies))
    h_ref = float(reference or dts[-1] / 8) if reference is None or np.isscalar(reference) else None
    h_min = h_ref / 2 if h_ref else dts[-1]  # the study's longest run
    work = max(planned_work(a.model, t_end, h_min, backends[m], newton, orders[m], who="convergence")
               for m, a in assemblies.items())
    code = resolved_mode(check_mode(compile, "convergence"), work)
    note = ""
    if h_ref:
        ref = run(assemblies[first], h_ref, f"reference ({first})", backends[first], orders[first])
        finer = run(assemblies[first], h_ref / 2, f"reference ({first})", backends[first], orders[first])
        note = (f"{first} at Δt = {h_ref:g}; Richardson check against Δt = {h_ref / 2:g}: "
                f"{getattr(error, '__name__', 'error')} = {error(ref, finer):.2e}")
    else:
        ref, note = reference, "given Solution"
    errors, times, per_step, unknowns, failures = {}, {}, {}, {}, {}
    for m, asm in assemblies.items():
        errors[m], times[m], per_step[m] = [], [], []
        for h in dts:
            try:
                runs = [run(asm, h, m, backends[m], orders[m]) for _ in range(repeats)]
            except ConvergenceError as err:  # a model that cannot take this step: say so, go on
                failures.setdefault(m, []).append((h, err.step))
                errors[m].append(np.nan), times[m].append(np.nan), per_step[m].append(np.nan)
                continue
            best = min(runs, key=lambda s: s.stats["run_time"])
            errors[m].append(error(best, ref))
            times[m].append(best.stats["run_time"])
            per_step[m].append(best.stats["time_per_step"])
            unknowns[m] = best.stats["unknowns"]
    arr = lambda d: {k: np.asarray(v) for k, v in d.items()}  # noqa: E731
    return ConvergenceTable(dts, arr(errors), arr(times), arr(per_step), unknowns,
                            getattr(error, "__name__", "error"), note,
                            {"failures": failures, "reference": ref, "compile": code})
