"""The user guide's tutorials run: every page of docs/tutorials runs its python blocks in order
(the checks they make are asserts of physical properties: energy balance, momentum, agreement with
closed forms or central differences), in a temporary directory."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "tutorials").glob("*.rst"))


def blocks(page):
    """The page's ``.. code-block:: python`` blocks, dedented."""
    found = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|[ \t]*\n)+)", page.read_text())
    return ["\n".join(line[4:] for line in block.splitlines()) for block in found]


def test_every_tutorial_page_has_code_and_is_in_the_guide():
    index = (ROOT / "docs" / "index.rst").read_text()
    assert PAGES
    for page in PAGES:
        assert blocks(page), page.name
        assert f"tutorials/{page.stem}" in index, f"{page.name} is not in docs/index.rst's toctree"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_tutorial_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {}
    for code in blocks(page):
        exec(compile(code, str(page), "exec"), scope)
