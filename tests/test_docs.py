"""The documentation builds without warnings; nitpicky mode makes every broken cross reference
into conserve an error (the README's docs command)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                          str(ROOT / "docs"), str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "html" / "api.html").exists()


def test_api_reference_is_complete():
    """Every name of the package namespace has an entry in docs/api.rst, and every public method
    and property of the result views and every benchmark problem has a docstring (autodoc's
    ``:members:`` leaves out those without one), so the reference lists all of them."""
    import inspect
    import re

    import conserve as cs
    from conserve import problems
    from conserve.results.sensors import JointView, PointHistory
    from conserve.results.solution import PartView, RotorView

    text = (ROOT / "docs" / "api.rst").read_text()
    missing = [n for n in cs.__all__ if not re.search(rf"::\s+conserve(\.\w+)*\.{re.escape(n)}\s", text)]
    assert not missing, f"not in docs/api.rst: {missing}"
    for module in ("conserve.problems", "conserve.results.sensors", "conserve.studies"):
        assert re.search(rf"automodule:: {re.escape(module)}\n\s+:members:", text), module
    undocumented = [f"{cls.__name__}.{n}" for cls in (cs.Solution, PartView, RotorView, JointView, PointHistory,
                                                     cs.Ensemble)
                    for n, v in vars(cls).items() if not n.startswith("_") and (isinstance(v, property) or callable(v))
                    and not (v.__doc__ or "").strip()]
    undocumented += [f"problems.{n}" for n, v in vars(problems).items() if not n.startswith("_")
                     and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == problems.__name__
                     and not (v.__doc__ or "").strip()]
    assert not undocumented, f"no docstring: {undocumented}"
