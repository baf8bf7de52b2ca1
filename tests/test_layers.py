"""The layers written in pyproject.toml hold: import-linter checks every import of the package; and
no two modules of it import each other, whatever the layers (the module graph read from the sources)."""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

import pytest
from child_commands import run_child


@pytest.mark.e2e
def test_imports_keep_to_the_declared_layers_and_independent_packages() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint_imports, "import-linter is not installed: pip install .[test]"
    result = run_child([lint_imports, "--no-cache"], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


PACKAGE = Path(__file__).resolve().parents[1] / "trainspeed"

CYCLES_BEING_UNTIED: frozenset[frozenset[str]] = frozenset()
"""The import cycles still in the package, each listed until it is untied; every other cycle fails
the test, and so does a cycle listed here that is gone (take it off the list)."""


def module_names(package: Path) -> dict[str, Path]:
    """Every module of `package` by its dotted name (a package by its own name, for its __init__)."""
    names: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """The modules an import statement names: `from X import y` names the module X.y where there is
    one, else X; a relative import is taken from the importing module's package."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, every import statement counted: at the top, in
    a function (an import deferred for speed is still a dependency) and under TYPE_CHECKING (a
    type a module names is part of what a reader must know first)."""
    modules = module_names(package)
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported(node, module, path.name == "__init__.py", modules):
                while name and name not in modules:  # `import a.b.NAME`: the longest module it names
                    name = name.rpartition(".")[0]
                if name and name != module:
                    graph[module].add(name)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    cycles.append(frozenset(members))
    return cycles


def _shown(cycle: frozenset[str], graph: dict[str, set[str]]) -> str:
    ties = [f"{a} -> {b}" for a in sorted(cycle) for b in sorted(graph[a] & cycle)]
    return "; ".join(ties)


def test_the_import_graph_sees_deferred_and_type_only_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("def runner():\n    from pkg.sub import c\n")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    (package / "sub" / "c.py").write_text("from . import NAME\nfrom pkg.a import f\n")
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.sub.c"] == {"pkg.sub", "pkg.a"}
    assert sorted(map(sorted, import_cycles(graph))) == [["pkg.a", "pkg.b"], ["pkg.sub", "pkg.sub.c"]]


def test_no_two_modules_of_the_package_import_each_other() -> None:
    """A cycle of imports means no module of it can be read, tested or moved without the others;
    the shared piece belongs in a module below both."""
    graph = import_graph(PACKAGE)
    cycles = set(import_cycles(graph))
    new = [_shown(cycle, graph) for cycle in cycles - CYCLES_BEING_UNTIED]
    assert not new, "modules that import each other (move what they share into a module below them):\n" + "\n".join(new)
    untied = [sorted(cycle) for cycle in CYCLES_BEING_UNTIED - cycles]
    assert not untied, f"untied, so take them off CYCLES_BEING_UNTIED: {untied}"


def test_no_module_imports_the_package_face() -> None:
    """`trainspeed/__init__.py` loads the Python API on a name's first use, which imports every
    command: a module below that reaches it for a path (`trainspeed.__file__`) imports upwards.
    Where the package lies is `trainspeed.own_code`'s."""
    graph = import_graph(PACKAGE)
    assert [module for module, imported in graph.items() if "trainspeed" in imported] == []
