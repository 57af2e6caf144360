"""The README's commands work: the examples and `conserve demo` run and write their plots."""

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conserve.cli import main

ROOT = Path(__file__).resolve().parents[1]


SUMMARY = r"energy              max \|E - E0\|"


@pytest.mark.parametrize("script, outputs, expect", [
    ("heavy_top.py", ["heavy_top.png"], SUMMARY),
    ("free_body.py", ["free_body.png", "free_body_flip.png"], SUMMARY),
    ("spacecraft.py", ["spacecraft.png"], SUMMARY),
    # a free beam after its load pulse: energy constant to round-off
    ("flying_beam.py", ["flying_beam.png"], r"relative change ≤ \d\.\de-1[3-9]"),
    pytest.param("flexible_rotor.py", ["flexible_rotor.png"], SUMMARY, marks=pytest.mark.slow),
    pytest.param("flexible_spacecraft.py", ["flexible_spacecraft.png"], SUMMARY, marks=pytest.mark.slow),
    pytest.param("flexible_crane.py", ["flexible_crane.png"], SUMMARY, marks=pytest.mark.slow),
    pytest.param("mechanisms.py", ["mechanisms_pendulum.png", "mechanisms_four_bar.png",
                                   "mechanisms_double_pendulum.png", "mechanisms_slider_crank.png"], SUMMARY,
                 marks=pytest.mark.slow),
    # the wheels' inertias found from the noisy attitude to better than 1 % (measured 4e-4)
    pytest.param("identify_wheels.py", ["identify_wheels.png"], r"relative error \d\.\de-0[3-9]",
                 marks=pytest.mark.slow),
    # the sampled PD slew: total angular momentum (zero) and the energy balance to round-off
    pytest.param("attitude_control.py", ["attitude_control.png"],
                 r"max \|H\| = \d\.\d\de-1[3-9] kg m²/s(.|\n)*balance max \|E − E0 − \(W − D\)\| = \d\.\d\de-1[3-9] of",
                 marks=pytest.mark.slow),
    # anti-sway on the P5 crane: the energy balance with the motors' work to round-off
    pytest.param("crane_control.py", ["crane_control.png"],
                 r"residual sway: \d+\.\d mm with anti-sway(.|\n)*energy balance: \d\.\de-1[3-9] of its scale",
                 marks=pytest.mark.slow),
    # the slew reaches its target attitude with the wheels' momenta zero, to below 1e-10
    pytest.param("slew.py", ["slew.png"], r"wheel momentum error \d\.\de-(1\d|[2-9]\d)", marks=pytest.mark.slow),
])
def test_example_runs_and_writes_plots(script, outputs, expect, tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "examples" / script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert re.search(expect, run.stdout), run.stdout
    for name in outputs:
        assert (tmp_path / name).stat().st_size > 10_000


def test_demo_prints_conservation_and_writes_plot(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--t-end", "0.4"]) == 0
    out = capsys.readouterr().out
    drift = float(out.split(" of its scale")[0].rsplit("= ", 1)[1])  # the energy's line comes first
    assert drift <= 1e-10
    assert (tmp_path / "heavy_top_conservation.png").stat().st_size > 10_000


def readme_runs():
    """The README's python blocks in runs: a block that begins with an import starts a run, and
    the blocks after it build on the names it and its run defined (so the runs can go to
    different workers)."""
    runs = []
    for code in re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S):
        if not runs or re.match(r"(import|from) ", code):
            runs.append([])
        runs[-1].append(code)
    return runs


@pytest.mark.parametrize("blocks", readme_runs(), ids=lambda blocks: f"{len(blocks)} blocks from "
                         + blocks[0].split("\n")[0][:40])
def test_readme_snippets_run_and_conserve(blocks, tmp_path, monkeypatch):
    """Every python block of the README runs (shortened) after those of its run, the names
    numpy, jax, jax.numpy and conserve imported as the README does, and each solution keeps its
    energy balance. The blocks run in a temporary directory (they write figures and files)."""
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec("import numpy as np, jax, jax.numpy as jnp, conserve as cs", scope)
    for code in blocks:
        before = scope.get("sol")
        exec(re.sub(r"t_end=20(\.0)?", "t_end=0.4", code), scope)
        sol = scope.get("sol")
        if sol is not None and sol is not before:
            E = sol.energy.total
            assert np.max(np.abs(sol.energy_balance_error)) <= 1e-10 * abs(E[0])


def test_the_readme_has_runs_of_python_blocks():
    assert len(readme_runs()) >= 2 and sum(map(len, readme_runs())) >= 10


def test_cli_help_names_every_option_and_study():
    """Every command, option and choice has a help text; every study and problem is described."""
    import argparse

    from conserve import cli

    top = cli.parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == {"demo", "reproduce", "convergence", "cache", "view"}
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"conserve {name}: {action.dest} has no help"
            for choice in action.choices or ():
                assert str(choice) in action.help, f"conserve {name} {action.dest}: {choice} not described"
    assert set(cli.STUDIES) == {*cli.REPRODUCTIONS, "all"}


def test_cli_cache_shows_and_clears_only_the_compiled_programs(tmp_path):
    """`conserve cache` names the directory and what it holds; `conserve cache clear` deletes
    jax's cache entries there and nothing else; with the cache off it says so."""
    (tmp_path / "a-cache").write_bytes(b"x" * 1000)
    (tmp_path / "a-atime").write_bytes(b"t")
    (tmp_path / "notes.txt").write_text("mine")
    env = {**{k: v for k, v in os.environ.items() if "COMPILATION_CACHE" not in k},
           "CONSERVE_COMPILATION_CACHE": str(tmp_path)}

    def cli(*args, **extra):
        return subprocess.run([sys.executable, "-m", "conserve", "cache", *args], env={**env, **extra},
                              capture_output=True, text=True, check=True).stdout

    assert str(tmp_path) in cli() and "1 compiled programs" in cli()
    assert "removed 1 compiled programs" in cli("clear")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert "off" in cli(CONSERVE_COMPILATION_CACHE="off")


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


def test_a_progress_bar_writes_plain_lines_off_a_terminal_and_redraws_on_one():
    """Into a log (a stream that is no terminal) every update that fills the bar further is a
    line of its own, without carriage returns; on a terminal one line is redrawn in place.
    Adaptive runs report simulated seconds, not steps."""
    from conserve.run.progress import ProgressBar

    log = io.StringIO()
    bar = ProgressBar("run", width=10, stream=log)
    for done in range(0, 1001, 25):
        bar(done, 1000)
    text = log.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and text.endswith("\n")
    assert len(lines) == 11  # one per tenth of the bar (41 updates)
    assert [line.count("#") for line in lines] == list(range(11)) and lines[-1].endswith("1000/1000 steps")
    terminal = _Terminal()
    bar = ProgressBar("run", width=10, stream=terminal)
    for done in (500, 1000):
        bar(done, 1000)
    assert terminal.getvalue().count("\r") == 2 and terminal.getvalue().count("\n") == 1
    log = io.StringIO()
    ProgressBar("orbit", width=10, stream=log)(0.125, 0.5)  # seconds of a 0.5 s adaptive run
    assert log.getvalue() == "orbit [##........] 0.125/0.5 s\n"


def test_cli_help_is_plain_text_and_does_not_import_jax():
    """`conserve --help` (and each command's) shows no reStructuredText markup, and answers without
    importing jax (or anything of conserve beyond the command line); its backend names are the
    library's."""
    import argparse

    from conserve import cli
    from conserve.backends import BACKENDS

    top = cli.parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for parser in (top, *commands.choices.values()):
        text = parser.format_help()
        assert "`" not in text and not re.search(r":(mod|func|class|meth|attr|data|ref):", text), text
    assert sorted(cli.BACKEND_NAMES) == sorted(BACKENDS)
    for argv in (["--help"], ["convergence", "--help"]):
        run = subprocess.run([sys.executable, "-X", "importtime", "-m", "conserve", *argv], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
        assert run.returncode == 0 and "usage: conserve" in run.stdout, run.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time")}
        assert "conserve.cli" in imported and not {m for m in imported if m == "jax" or m.startswith("jax.")}
        assert "conserve.run.simulate" not in imported
