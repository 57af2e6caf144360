"""The package's layers: every module imports only from its own layer or the layers below it,

    base -> model -> discrete -> backends -> results -> run -> studies -> face

(base: the float64 switch, code generation, errors, kinematics; model: what a system is; discrete:
the energy-momentum scheme; backends: who solves it; results: the Solution and what reads it;
run: simulate and what it is made of; studies: convergence, sweeps, linearisation and the
benchmark problems; face: the package namespace and the command line), no two modules import each
other (directly or through others), and the package root holds only the face, the errors, the
problems and the float64 switch. Imports inside functions count too."""

import ast
import importlib
import pathlib

import pytest

import conserve

ROOT = pathlib.Path(conserve.__file__).parent

#: layer of each module (a package's modules inherit its layer unless listed themselves)
LAYERS = [
    ("base", ["conserve._x64", "conserve.compilation", "conserve.errors", "conserve.kinematics"]),
    ("model", ["conserve.model", "conserve.control", "conserve.importers"]),
    ("discrete", ["conserve.discrete"]),
    ("backends", ["conserve.backends"]),
    ("results", ["conserve.results"]),
    ("run", ["conserve.run"]),
    ("studies", ["conserve.studies", "conserve.problems"]),
    ("face", ["conserve", "conserve.cli", "conserve.__main__"]),
]

#: the modules at the package root (everything else lives in a package named for what it is)
ROOT_MODULES = {"__init__", "__main__", "cli", "errors", "problems", "_x64"}


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


def import_graph():
    """{module: the conserve modules it imports} over the package, each import resolved to the
    module it names (``from . import x`` to the module x, ``from .m import name`` to m)."""
    names = {name for name, _ in modules()}
    graph = {}
    for name, path in modules():
        found = imports(name, path.read_text(), path.name == "__init__.py")
        graph[name] = {t for t in found if t in names and t != name}
    return graph


def test_no_import_cycle():
    """No module imports itself through others (a package's ``__init__`` that imports its own
    modules is the package itself, not a cycle: its modules do not import it back)."""
    graph = import_graph()
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_checker_finds_a_cycle(monkeypatch):
    import sys

    module = sys.modules[__name__]
    monkeypatch.setattr(module, "import_graph", lambda: {"a": {"b"}, "b": {"c"}, "c": {"a"}})
    with pytest.raises(AssertionError, match="a -> b -> c -> a"):
        module.test_no_import_cycle()


def test_the_package_root_holds_only_the_face_errors_problems_and_the_float64_switch():
    loose = sorted(p.stem for p in ROOT.glob("*.py") if p.stem not in ROOT_MODULES)
    assert not loose, f"modules at the package root: {loose}; move them into the package named for what they are"
