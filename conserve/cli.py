"""Command line (also python -m conserve):

    conserve demo                                   heavy top: conservation summary and a plot
    conserve reproduce spacecraft|crane|heavy-top|thompson|all [--out DIR] [--quick]
    conserve convergence heavy-top|spacecraft|crane|pendulum --dt 2e-3 1e-3 5e-4 [--t-end T]
                         [--backend director] [--order 2] [--out DIR]
    conserve cache [clear]                          where the compiled-code cache is, how large; empty it
    conserve view run.npz [-o out.html] [--no-open] a saved run in an interactive 3-D viewer (HTML)

conserve <command> --help describes every option.
"""

# This docstring is the --help text (plain text, no markup). The command line imports jax (and the
# rest of conserve) only when a command runs, so --help answers at once.

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path

from .run.progress import ProgressBar

#: the backends a convergence study runs on (the names of conserve.backends.BACKENDS)
BACKEND_NAMES = ("director", "ode", "reduced")

REPRODUCTIONS = {"heavy-top": "heavy_top.py", "spacecraft": "hca_spacecraft.py", "crane": "hca_rotary_crane.py",
                 "thompson": "thompson_examples.py"}
#: what each reproduction shows (``conserve reproduce --help``)
STUDIES = {"heavy-top": "P1 heavy top: conservation over 10⁴ steps, order 2 against the exact precession",
           "spacecraft": "P4 spacecraft with three reaction wheels: hybrid vs full-body wheels, path, "
                         "convergence, conservation",
           "crane": "P5 rotary crane with a winch: hybrid vs full-body drum, load height, convergence, stress variant",
           "thompson": "P6/P8 Thompson's example systems and pendulum: degrees of freedom, null spaces, director "
                       "vs reduced vs ode backends",
           "all": "all of the above"}
PROBLEMS = {"heavy-top": "P1 heavy top (error: the top's centre)", "spacecraft": "P3a spacecraft, hybrid and "
            "full-body wheels (error: core, relative)", "crane": "P5 rotary crane, hybrid and full-body drum "
            "(error: tower and load, relative)", "pendulum": "Thompson's pendulum (error: relative)"}
ROOT = Path(__file__).resolve().parents[1]


def demo(out: Path, t_end: float, dt: float) -> int:
    """P1 heavy top in steady precession: conservation summary, precession check, plot."""
    import numpy as np

    import conserve as cs
    from conserve.problems import HeavyTop
    from conserve.results.plotting import plot_conservation

    top = HeavyTop()
    sol = cs.simulate(top.system(), t_end=t_end, dt=dt, progress=ProgressBar("heavy top"))
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


def reproduce(which: str, out: Path, quick: bool) -> int:
    folder = ROOT / "paper_reproductions"
    if not folder.is_dir():
        print("conserve reproduce needs the source checkout (paper_reproductions/ next to conserve/); "
              "install it with pip install -e . from a clone.", file=sys.stderr)
        return 2
    for name in (REPRODUCTIONS if which == "all" else [which]):
        script = folder / REPRODUCTIONS[name]
        args = ["--out", str(out / Path(REPRODUCTIONS[name]).stem)] + (["--quick"] if quick else [])
        print(f"== {name}: {script.name} {' '.join(args)}")
        runpy.run_path(str(script), run_name="conserve_cli")["main"](args)
    return 0


def convergence(problem: str, dts, t_end: float, out: Path, backend: str = "director", order: int = 2) -> int:
    from conserve import studies
    from conserve.problems import HeavyTop, RotaryCrane, ThompsonPendulum, spacecraft

    if problem == "heavy-top":
        models, error = {"heavy top": HeavyTop().system()}, studies.marker_error("top")
    elif problem == "spacecraft":
        models = {"hybrid": spacecraft("hybrid"), "body": spacecraft("body")}
        error = studies.relative_error(["core"])
    elif problem == "crane":
        models = {m: RotaryCrane().system(m) for m in ("hybrid", "body")}
        error = studies.relative_error(["tower", "load"])
    else:
        models, error = {"pendulum": ThompsonPendulum().system()}, studies.relative_error(["pendulum"])
    table = studies.convergence(models, dts, t_end, error=error, backend=backend, order=order)
    print(table.to_markdown())
    out.mkdir(parents=True, exist_ok=True)
    table.plot(out / f"convergence_{problem}.png")
    table.to_csv(out / f"convergence_{problem}.csv")
    print(f"wrote {out}/convergence_{problem}.png and .csv")
    return 0


def cache(action: str | None) -> int:
    """Where the persistent compilation cache is and how much it holds; ``clear``: empty it."""
    from .compilation import cache as store

    directory = store.compilation_cache_directory()
    if directory is None:
        setting = os.environ.get(store.ENVIRONMENT_VARIABLE)
        print(f"the compilation cache is off ({store.ENVIRONMENT_VARIABLE}={setting!r})")
        return 0
    if action == "clear":
        entries, size = store.clear_compilation_cache(directory)
        print(f"removed {entries} compiled programs ({size / 1e6:.2f} MB) from {directory}")
    else:
        entries, size = store.cache_contents(directory)
        print(f"{directory}: {entries} compiled programs, {size / 1e6:.2f} MB "
              f"(conserve cache clear empties it; {store.ENVIRONMENT_VARIABLE}=off turns it off)")
    return 0


def view(file: Path, output: Path | None, open_browser: bool) -> int:
    """Write the interactive 3-D viewer of the saved run ``file`` (.npz, ``Solution.save``) to ``output``
    (default: the same name with .html, next to it) and open it in the default browser."""
    import webbrowser

    from .errors import FileError
    from .results.solution import Solution
    from .results.viewer import write_html

    output = file.with_suffix(".html") if output is None else output
    try:
        sol = Solution.load(file)
        write_html(sol, output, title=file.name)
    except (OSError, FileError, ValueError) as err:
        print(f"conserve view: {err}", file=sys.stderr)
        return 2
    print(f"wrote {output}")
    if open_browser:
        try:
            opened = webbrowser.open(output.resolve().as_uri())
        except webbrowser.Error:
            opened = False
        if not opened:
            print(f"no web browser to open it here: open {output} in one", file=sys.stderr)
    return 0


def _listing(entries):
    return "; ".join(f"{k}: {v}" for k, v in entries.items())


def parser() -> argparse.ArgumentParser:
    """The command line's parser: every command, option and study name with its help."""
    top = argparse.ArgumentParser(prog="conserve", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True, metavar="{demo,reproduce,convergence,cache,view}")
    p = sub.add_parser("demo", help="simulate the heavy top, print the conservation summary, write a plot",
                       description="P1 heavy top in steady precession: conservation summary, precession check "
                       "and a plot of the conservation errors.")
    p.add_argument("--out", type=Path, default=Path("out"), help="output folder (default: out)")
    p.add_argument("--t-end", type=float, default=20.0, help="end time in s (default 20: 10⁴ steps)")
    p.add_argument("--dt", type=float, default=2e-3, help="time step in s (default 2e-3)")
    p = sub.add_parser("reproduce", help="run paper reproductions (figures, CSV, report)",
                       description="Run a paper reproduction (paper_reproductions/): figures, CSV and report.md "
                       "in OUT/<study>.")
    p.add_argument("which", choices=list(STUDIES), metavar="study", help=f"which study: {_listing(STUDIES)}")
    p.add_argument("--out", type=Path, default=Path("out"), help="output folder (default: out)")
    p.add_argument("--quick", action="store_true", help="shorter runs, fewer step sizes (minutes, not ~15 min)")
    p = sub.add_parser("convergence", help="convergence and work-precision table of a problem",
                       description="Errors, observed orders and run times of a benchmark problem over step sizes "
                       "(conserve.studies.convergence): a markdown table, a plot and a CSV in OUT.")
    p.add_argument("problem", choices=list(PROBLEMS), metavar="problem", help=f"which problem: {_listing(PROBLEMS)}")
    p.add_argument("--dt", type=float, nargs="+", required=True, help="step sizes in s, e.g. 2e-3 1e-3 5e-4")
    p.add_argument("--t-end", type=float, default=1.0, help="end time in s (default 1)")
    p.add_argument("--backend", choices=BACKEND_NAMES, default="director",
                   help=f"backend of every run: {', '.join(BACKEND_NAMES)} (default director)")
    p.add_argument("--order", type=int, choices=[2, 4, 6], default=2,
                   help="2: the energy-momentum step; 4, 6: its symmetric compositions (default 2)")
    p.add_argument("--out", type=Path, default=Path("out"), help="output folder (default: out)")
    p = sub.add_parser("cache", help="the persistent compilation cache: where, how large; clear it",
                       description="conserve keeps compiled programs on disk (jax's persistent compilation cache) "
                       "so that a later process running the same model structure loads them instead of "
                       "compiling. Directory: ~/.cache/conserve/jax, or $CONSERVE_COMPILATION_CACHE; "
                       "CONSERVE_COMPILATION_CACHE=off turns it off.")
    p.add_argument("action", nargs="?", choices=["clear"], help="clear: delete the cached programs")
    p = sub.add_parser("view", help="a saved run in an interactive 3-D viewer (one self-contained HTML file)",
                       description="Write an interactive 3-D viewer of a run saved with Solution.save (.npz): "
                       "bodies, joints, rotors and traces in three.js, play/pause, time slider, speed, orbit "
                       "camera, and the energy-balance error and constraint residual over time. One HTML file "
                       "that needs no network or server (conserve.results.viewer), opened in the default "
                       "browser.")
    p.add_argument("file", type=Path, help="the saved run (.npz)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="the HTML file to write (default: FILE with .html, in FILE's folder)")
    p.add_argument("--no-open", action="store_true", help="only write the file, do not open a browser")
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.command == "demo":
        return demo(args.out, args.t_end, args.dt)
    if args.command == "reproduce":
        return reproduce(args.which, args.out, args.quick)
    if args.command == "cache":
        return cache(args.action)
    if args.command == "view":
        return view(args.file, args.output, not args.no_open)
    return convergence(args.problem, args.dt, args.t_end, args.out, args.backend, args.order)
