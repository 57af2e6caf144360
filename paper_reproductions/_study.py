"""What every reproduction script shares: the report file and the command line."""

from __future__ import annotations

import argparse
from pathlib import Path


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
