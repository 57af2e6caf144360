"""conserve.studies: convergence tables measure what they claim."""

import numpy as np

from conserve import studies
from conserve.problems import HeavyTop, ThompsonPendulum
from conserve.run.chunks import _compiled


def test_convergence_table_orders_and_outputs(tmp_path):
    compiled_before = set(_compiled)
    table = studies.convergence({"top": HeavyTop().system(), "same top": HeavyTop().system().assemble()},
                                [2e-3, 1e-3, 5e-4], 0.5, error=studies.marker_error("top"))
    for label in ("top", "same top"):
        assert abs(table.fitted_order(label) - 2.0) <= 0.1
        assert np.all(np.abs(table.orders(label) - 2.0) <= 0.15)
        assert table.unknowns[label] == 21
    np.testing.assert_allclose(table.errors["top"], table.errors["same top"], rtol=1e-12)  # deterministic
    assert "Richardson" in table.reference
    # one code generation for the whole study, so that its run times compare: its longest run's
    # (the reference's check, 16,000 steps: quick), although a 250-step run alone compiles unoptimized
    assert table.extra["compile"] == "quick" == table.extra["reference"].stats["compile"]
    assert {key[-1] for key in set(_compiled) - compiled_before} == {"quick"}  # the modes of its compiled runs
    table.plot(tmp_path / "c.png")
    table.to_csv(tmp_path / "c.csv")
    assert (tmp_path / "c.png").stat().st_size > 10_000
    assert np.genfromtxt(tmp_path / "c.csv", delimiter=",", names=True).shape == (3,)
    assert "fitted order" in table.to_markdown()


def test_energy_and_relative_error_measures(capsys):
    p = ThompsonPendulum(spring=False)
    table = studies.convergence(p.system(), [1e-2, 5e-3], 1.0, error=studies.energy_error, progress=True)
    assert "model, Δt = 0.005 [####" in capsys.readouterr().err  # one progress bar per run
    assert np.all(table.errors["model"] <= 1e-12)  # conservative: the balance is exact at any step
    table = studies.convergence(p.system(), [1e-2, 5e-3, 2.5e-3], 1.0, error=studies.relative_error(["pendulum"]))
    assert abs(table.fitted_order("model") - 2.0) <= 0.1
    # max_dt keeps only the finer steps: here the last pair's observed order
    assert abs(table.fitted_order("model", max_dt=5e-3) - table.orders("model")[-1]) <= 1e-12
