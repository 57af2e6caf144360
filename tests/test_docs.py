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
