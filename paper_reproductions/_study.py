"""What every reproduction script shares: the report file and the command line."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import conserve as cs
from conserve import studies


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


def model_gap(assemblies, dts, t_end, parts):
    """ε_rel between the hybrid and body models run at the same step sizes, and its observed
    order: both converge to the same solution, so the gap shrinks as Δt²."""
    error = studies.relative_error(parts)
    gaps = [error(cs.simulate(assemblies["body"], t_end, h), cs.simulate(assemblies["hybrid"], t_end, h))
            for h in dts]
    order = float(np.log(gaps[0] / gaps[-1]) / np.log(dts[0] / dts[-1]))
    return {"dts": [float(h) for h in dts], "gaps": gaps, "order": order}
