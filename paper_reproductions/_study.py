"""What every reproduction script shares: the report file and the command line."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

import conserve as cs
from conserve import studies

# the studies run deliberately coarse steps (their tables and figures show what those cost)
warnings.simplefilter("ignore", cs.CoarseStepWarning)


def write_report(out: Path, lines, files):
    """Write report.md into ``out``, echo it, and say which files were written."""
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwrote {out}/report.md, " + ", ".join(files))


def command_line(run, doc, default_out, argv=None, quick_help="shorter runs, fewer step sizes"):
    """Parse ``--out`` and ``--quick`` and call ``run(out, quick)``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(default_out))
    parser.add_argument("--quick", action="store_true", help=quick_help)
    args = parser.parse_args(argv)
    run(args.out, args.quick)


#: label of the hybrid model run by the reduced backend (the third curve of the P4/P5 studies)
REDUCED = "hybrid, reduced"


def with_reduced(assemblies):
    """The studies' models plus the hybrid model on the reduced backend: (models, backends)."""
    models = {**assemblies, REDUCED: assemblies["hybrid"]}
    return models, {**{m: "director" for m in assemblies}, REDUCED: "reduced"}


def reduced_summary(table):
    """Report line and numbers: the reduced backend against the director backend on the hybrid model."""
    diff = float(np.nanmax(np.abs(table.errors[REDUCED] - table.errors["hybrid"])))
    per_step = {m: float(np.nanmedian(table.time_per_step[m])) * 1e6 for m in ("hybrid", REDUCED)}
    line = (f"hybrid model on the reduced backend: {table.unknowns[REDUCED]} unknowns per step against "
            f"{table.unknowns['hybrid']} (director), {per_step[REDUCED]:.0f} against {per_step['hybrid']:.0f} µs per "
            f"step; its ε_rel equals the director's to {diff:.1e} at every Δt (the same discrete trajectory)")
    return line, {"error_difference": diff, "time_per_step_us": per_step}


def model_gap(assemblies, dts, t_end, parts, compile="auto"):
    """ε_rel between the hybrid and body models run at the same step sizes, and its observed
    order: both converge to the same solution, so the gap shrinks as Δt². ``compile``: the
    code generation (the study's, whose compiled code the runs then share)."""
    error = studies.relative_error(parts)
    gaps = [error(*(cs.simulate(assemblies[m], t_end, h, compile=compile) for m in ("body", "hybrid")))
            for h in dts]
    order = float(np.log(gaps[0] / gaps[-1]) / np.log(dts[0] / dts[-1]))
    return {"dts": [float(h) for h in dts], "gaps": gaps, "order": order}


def gap_summary(gap, target=1e-6):
    """One report line on the model gap: values, order, and whether the finest step reaches ``target``."""
    line = ("difference between the two models (ε_rel, same Δt): "
            + ", ".join(f"{v:.2e} at Δt = {h:g}" for h, v in zip(gap["dts"], gap["gaps"]))
            + f" (order {gap['order']:.2f}); ")
    if gap["gaps"][-1] <= target:
        return line + f"≤ {target:g} at the finest step"
    need = gap["dts"][-1] * (target / gap["gaps"][-1]) ** 0.5  # the gap shrinks as Δt²
    return line + f"NOT ≤ {target:g} at the finest step: that needs Δt ≈ {need:.1g}"
