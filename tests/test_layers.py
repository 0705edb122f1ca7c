"""The package's architecture, checked from its source: imports only go down the layers
core <- learn, importers, emit (peers: two ways a model comes into being, and what it becomes) <- device
<- cli, hil (peers: the command line and the pytest plugin),
with no cycle anywhere and nothing outside ``treegen/cli/`` importing ``treegen.cli``.
Function-level (lazy) imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "treegen"

#: layer -> the layers its modules may import (itself included)
ALLOWED = {
    "core": {"core"},
    "learn": {"core", "learn"},
    "importers": {"core", "importers"},
    "emit": {"core", "emit"},
    "device": {"core", "learn", "importers", "emit", "device"},
    "cli": {"core", "learn", "importers", "emit", "device", "cli"},
    "hil": {"core", "learn", "importers", "emit", "device", "hil"},      # the pytest plugin and its bundled checks
    # the public facade (treegen/__init__.py): re-exports for users
    "api": {"core", "learn", "importers", "emit"},
    "entry": {"cli"},                        # treegen/__main__.py
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) > 1 and parts[1] in ("core", "learn", "importers", "emit", "device", "cli", "hil"):
        return parts[1]
    return "entry" if mod == "treegen.__main__" else "api"


def imports_of(mod: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """treegen modules imported anywhere in ``path`` (module level or inside functions)."""
    is_pkg = path.name == "__init__.py"
    package = mod if is_pkg else mod.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        found |= {n for n in names if n == "treegen" or n.startswith("treegen.")}
    return found


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {mod: imports_of(mod, path, modules) - {mod} for mod, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {m: WHITE for m in graph}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        colour[m] = GREY
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if n not in colour:
                continue
            if colour[n] == GREY:
                return stack[stack.index(n):] + [n]
            if colour[n] == WHITE and (c := visit(n)):
                return c
        stack.pop()
        colour[m] = BLACK
        return None

    for m in sorted(graph):
        if colour[m] == WHITE and (c := visit(m)):
            return c
    return None


def test_the_walker_sees_relative_absolute_and_lazy_imports(tmp_path):
    pkg = tmp_path / "treegen"
    (pkg / "core").mkdir(parents=True)
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("from . import b\nfrom .b import X\n")
    (pkg / "core" / "b.py").write_text("def f():\n    from treegen.cli import main\n    import treegen.core.a\n")
    modules = {"treegen.core": pkg / "core" / "__init__.py", "treegen.core.a": pkg / "core" / "a.py",
               "treegen.core.b": pkg / "core" / "b.py", "treegen.cli": pkg / "cli.py"}
    assert imports_of("treegen.core.a", modules["treegen.core.a"], modules) == {"treegen.core.b"}
    assert imports_of("treegen.core.b", modules["treegen.core.b"], modules) == {"treegen.cli", "treegen.core.a"}
    graph = {m: imports_of(m, p, modules) - {m} for m, p in modules.items() if p.exists()}
    assert find_cycle(graph) == ["treegen.core.a", "treegen.core.b", "treegen.core.a"]


def test_every_layer_is_a_documented_subpackage():
    for name in ALLOWED:
        if name in ("api", "entry"):
            continue
        init = PKG / name / "__init__.py"
        assert init.is_file(), f"treegen/{name}/ is not a package"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"treegen/{name}/__init__.py has no docstring"


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_nothing_outside_the_cli_imports_it():
    offenders = [f"{m} imports {', '.join(sorted(i for i in deps if i == 'treegen.cli' or i.startswith('treegen.cli.')))}"
                 for m, deps in import_graph().items()
                 if layer(m) not in ("cli", "entry") and any(i == "treegen.cli" or i.startswith("treegen.cli.") for i in deps)]
    assert not offenders, offenders


@pytest.mark.parametrize("lay", [k for k in ALLOWED if k not in ("api", "entry")])
def test_imports_only_go_down(lay):
    bad = []
    for mod, deps in import_graph().items():
        if layer(mod) != lay:
            continue
        for dep in sorted(deps):
            if dep == "treegen":
                bad.append(f"{mod} imports the package facade 'treegen' (import from the layer instead)")
            elif layer(dep) not in ALLOWED[lay]:
                bad.append(f"{mod} ({lay}) imports {dep} ({layer(dep)})")
    assert not bad, "\n".join(bad)


def _bench_imports(path: Path, siblings: set[str]) -> set[str]:
    """The bench scripts a bench script imports (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return (found & siblings) - {path.stem}


def test_no_import_circle_in_bench():
    """bench/boosted.py and bench/import_exactness.py imported each other (issue #36): none may."""
    bench = Path(__file__).resolve().parents[1] / "bench"
    scripts = {p.stem: p for p in bench.glob("*.py")} | {p.stem: p for p in (bench / "qemu").glob("*.py")}
    graph = {name: _bench_imports(p, set(scripts)) for name, p in scripts.items()}
    done, stack = set(), []

    def visit(n):
        if n in stack:
            raise AssertionError("bench import circle: " + " -> ".join(stack[stack.index(n):] + [n]))
        if n in done:
            return
        stack.append(n)
        for m in sorted(graph[n]):
            visit(m)
        stack.pop()
        done.add(n)

    for name in sorted(graph):
        visit(name)
