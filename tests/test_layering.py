"""The package's layers: every module imports only from its own layer or the layers below it,

    base -> model -> discrete -> backends -> run -> studies -> face

(model: what a system is; discrete: the energy-momentum scheme; backends: who solves it; run:
simulate, step, Solution and what reads it; studies: problems and convergence studies; face: the
package namespace and the command line). Imports inside functions count too."""

import ast
import importlib
import pathlib

import pytest

import conserve

ROOT = pathlib.Path(conserve.__file__).parent

#: layer of each module (a package's modules inherit its layer unless listed themselves)
LAYERS = [
    ("base", ["conserve._x64", "conserve.compilation", "conserve.errors", "conserve.files", "conserve.kinematics"]),
    ("model", ["conserve.model"]),
    ("discrete", ["conserve.discrete"]),
    ("backends", ["conserve.backends"]),
    ("run", ["conserve.simulate", "conserve.failures", "conserve.adaptive", "conserve.ensemble", "conserve.stepping", "conserve.solution", "conserve.checkpoint",
             "conserve.fingerprint", "conserve.export", "conserve.linearize", "conserve.reactions",
             "conserve.progress", "conserve.animation", "conserve.plotting", "conserve.sensors",
             "conserve.posing"]),
    ("studies", ["conserve.studies", "conserve.problems"]),
    ("face", ["conserve", "conserve.cli", "conserve.__main__"]),
]


def layer(module):
    """Index of the layer of a dotted module name (the longest listed prefix decides)."""
    best = None
    for k, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (k, p)
    assert best is not None, f"module {module} has no layer: add it to LAYERS in tests/test_layering.py"
    return best[0]


def modules():
    """(dotted name, path) of every module of the package."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def imports(name, source, is_package=False):
    """The conserve modules that module ``name`` with this ``source`` imports (at module level or
    inside functions)."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "conserve":
                continue
            if node.module is None:  # from . import x: x is a module of the package
                found.update(f"{target}.{a.name}" for a in node.names)
            else:
                found.add(target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "conserve")
    return found


@pytest.mark.parametrize("name,path", list(modules()), ids=lambda x: str(x) if isinstance(x, str) else "")
def test_module_imports_only_from_its_layer_or_below(name, path):
    if name != "conserve.__main__":  # importing it runs the command line
        importlib.import_module(name)
    own = layer(name)
    upward = sorted(t for t in imports(name, path.read_text(), path.name == "__init__.py") if layer(t) > own)
    assert not upward, (f"{name} (layer '{LAYERS[own][0]}') imports from a higher layer: "
                        + ", ".join(f"{t} ('{LAYERS[layer(t)][0]}')" for t in upward))


def test_the_checker_finds_an_upward_import():
    """An upward import, relative or absolute, at module level or inside a function, is seen."""
    source = ("import numpy\nfrom ..discrete.scheme import advance\n"
              "def f():\n    from conserve.backends.director import step\n")
    found = imports("conserve.model.probe", source)
    assert found == {"conserve.discrete.scheme", "conserve.backends.director"}
    assert all(layer(t) > layer("conserve.model.probe") for t in found)
