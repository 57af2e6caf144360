"""The paper reproductions in --quick mode, through the CLI, asserting their physical claims."""

import runpy
from pathlib import Path

import numpy as np
import pytest

from conserve.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_heavy_top_reproduction(tmp_path):
    numbers = runpy.run_path(str(ROOT / "paper_reproductions" / "heavy_top.py"))["run"](tmp_path, quick=True)
    assert numbers["energy"] <= 1e-10 and numbers["J3"] <= 1e-10 and numbers["constraints"] <= 1e-10
    assert abs(numbers["order"] - 2.0) <= 0.15
    for name in ("report.md", "conservation.png", "convergence.png", "convergence.csv"):
        assert (tmp_path / name).stat().st_size > 100


@pytest.mark.slow
def test_spacecraft_reproduction(tmp_path):
    numbers = runpy.run_path(str(ROOT / "paper_reproductions" / "hca_spacecraft.py"))["run"](tmp_path, quick=True)
    for m in ("hybrid", "body"):  # the body model over its asymptotic range, ωh ≤ 0.52
        assert abs(numbers["order"][m] - 2.0) <= 0.15
        assert numbers["energy_balance"][m] <= 1e-10 and numbers["momentum"][m] <= 1e-10
    assert numbers["unknowns"]["hybrid"] < numbers["unknowns"]["body"]
    hybrid, body = np.asarray(numbers["errors"]["hybrid"]), np.asarray(numbers["errors"]["body"])
    assert np.all(hybrid * 10 < body)  # with fast wheels the hybrid model is far more accurate at every Δt
    assert abs(numbers["model_gap"]["order"] - 2.0) <= 0.15  # the two models agree as Δt → 0
    assert numbers["reduced"]["error_difference"] <= 1e-9  # the reduced backend: the same trajectory
    assert (tmp_path / "path.png").stat().st_size > 10_000


@pytest.mark.slow
def test_crane_reproduction(tmp_path):
    numbers = runpy.run_path(str(ROOT / "paper_reproductions" / "hca_rotary_crane.py"))["run"](tmp_path, quick=True)
    for m in ("hybrid", "body"):
        assert abs(numbers["order"][m] - 2.0) <= 0.15
        c = numbers["conservation"][m]
        assert c["energy_balance"] <= 1e-10 and c["J3_after"] <= 1e-10 and c["constraints"] <= 1e-10
    assert numbers["unknowns"]["hybrid"] < numbers["unknowns"]["body"]
    assert abs(numbers["model_gap"]["order"] - 2.0) <= 0.15
    assert numbers["reduced"]["error_difference"] <= 1e-9
    exact = numbers["drop_exact"]
    for h in (0.01, 0.001):  # the hybrid drum is exact at any step; the body drum converges as Δt²
        assert abs(numbers["drop_acceleration"][f"hybrid {h:g}"] - exact) <= 1e-6
    body_errors = [abs(numbers["drop_acceleration"][f"body {h:g}"] - exact) for h in (0.01, 0.001)]
    assert abs(np.log10(body_errors[0] / body_errors[1]) - 2.0) <= 0.15
    for name in ("load_height.png", "stress.png", "conservation.png", "convergence.png", "report.md"):
        assert (tmp_path / name).stat().st_size > 100


@pytest.mark.slow
def test_thompson_reproduction(tmp_path):
    """P8: the paper's degrees of freedom, G H2 = 0 with full rank, director = reduced trajectories
    with EM conservation; P6: the ode backend solves the pendulum's reduced equation."""
    numbers = runpy.run_path(str(ROOT / "paper_reproductions" / "thompson_examples.py"))["run"](tmp_path, quick=True)
    assert len(numbers["rows"]) == 6
    for row in numbers["rows"]:
        assert row["paper P"] == row["model P"] == row["tree P"]
        assert row["max |G H2| (rel)"] <= 1e-13 and row["rank H2 = P"]
        assert row["reduced − director (rel q)"] <= 1e-8
        assert row["energy error director"] <= 1e-10 and row["energy error reduced"] <= 1e-10
    assert numbers["p6_errors"]["ode"] <= 1e-8
    assert max(numbers["p6_balance"].values()) <= 1e-8
    for name in ("report.md", "energy.png", "pendulum.png", "examples.csv"):
        assert (tmp_path / name).stat().st_size > 100


def test_cli_reproduce_and_convergence(tmp_path, capsys):
    assert main(["convergence", "pendulum", "--dt", "1e-2", "5e-3", "2.5e-3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    order = float(out.split("fitted order")[1].split(",")[0])
    assert abs(order - 2.0) <= 0.1
    assert (tmp_path / "convergence_pendulum.png").exists()
