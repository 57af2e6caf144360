"""Command line: ``conserve demo`` (also ``python -m conserve demo``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def demo(out: Path, t_end: float, dt: float) -> int:
    """P1 heavy top in steady precession: conservation summary, precession check, plot."""
    import conserve as cs
    from conserve.plotting import plot_conservation
    from conserve.problems import HeavyTop

    top = HeavyTop()
    sol = cs.simulate(top.system(), t_end=t_end, dt=dt)
    x = sol["top"].position
    azimuth = np.unwrap(np.arctan2(x[:, 1], x[:, 0]))
    J3 = sol.angular_momentum[:, 2]
    print(f"Heavy top (P1), steady precession at ω_p = {top.omega_p} rad/s, spin {top.omega_s:.4g} rad/s")
    print(sol.summary())
    print(f"  J·e3 drift          max |ΔJ3|/|J3|    = {np.max(np.abs(J3 - J3[0])) / abs(J3[0]):.2e}")
    print(f"  height error        max |z - l cos α0| = {np.max(np.abs(x[:, 2] - top.height())):.2e} m")
    print(f"  precession rate     {(azimuth[-1] - azimuth[0]) / sol.t[-1]:.8f} rad/s (exact {top.omega_p})")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "heavy_top_conservation.png"
    plot_conservation(sol, path, title="Heavy top: conservation errors", momentum_components=(2,))
    print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="conserve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="simulate the heavy top, print the conservation summary, write a plot")
    p.add_argument("--out", type=Path, default=Path("out"), help="output folder (default: out)")
    p.add_argument("--t-end", type=float, default=20.0, help="end time in s (default 20: 10⁴ steps)")
    p.add_argument("--dt", type=float, default=2e-3, help="time step in s (default 2e-3)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(args.out, args.t_end, args.dt)
    return 2  # pragma: no cover  (argparse rejects unknown commands)
