"""Import layers, top to bottom: cli -> (bench | train | report) -> targets -> workloads -> data ->
(errors, atomic). A module imports only from its own layer's package or lower ones, and the built-in
workloads do not import each other.

Read from the source with `ast`, so imports under TYPE_CHECKING and inside functions count too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "trainspeed"
BASE = ("trainspeed.errors", "trainspeed.atomic")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every trainspeed import of the file; `from x import y` counts as x.y too,
    since y may be a module."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if base != "trainspeed":
                found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if base == "trainspeed"]
    return [(line, name) for line, name in found if name == "trainspeed" or name.startswith("trainspeed.")]


def violations(folder: str, allowed: tuple[str, ...]) -> list[str]:
    def is_allowed(name: str) -> bool:
        return any(name == prefix or name.startswith(prefix + ".") for prefix in allowed)

    return [f"{path.relative_to(PACKAGE.parent)}:{line}: imports {name}"
            for path in sorted((PACKAGE / folder).rglob("*.py"))
            for line, name in imported_names(path) if not is_allowed(name)]


def test_the_data_layer_imports_nothing_from_the_workloads_or_above():
    assert list((PACKAGE / "data").glob("*.py")), "the data package moved?"
    assert violations("data", ("trainspeed.data", *BASE)) == []


def test_the_workloads_import_only_workloads_and_data():
    assert violations("workloads", ("trainspeed.workloads", "trainspeed.data", *BASE)) == []


@pytest.mark.parametrize("workload,other", [("mahjong", "stylegan3"), ("stylegan3", "mahjong")])
def test_built_in_workloads_do_not_import_each_other(workload, other):
    allowed = (f"trainspeed.workloads.{workload}", "trainspeed.workloads.base", "trainspeed.data", *BASE)
    assert violations(f"workloads/{workload}", allowed) == []


def test_the_checker_sees_imports_of_every_form(tmp_path, monkeypatch):
    fake = tmp_path / "trainspeed" / "data"
    fake.mkdir(parents=True)
    (fake / "sneaky.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from trainspeed.workloads.base import Batch\n"
        "def late():\n    import trainspeed.targets\n"
        "from .. import workloads\n"
        "from trainspeed import cli\n"
        "from . import shards\n"
        "from trainspeed.errors import UsageError\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "trainspeed")
    found = sorted(problem.split(": imports ")[1] for problem in violations("data", ("trainspeed.data", *BASE)))
    assert found == ["trainspeed.cli", "trainspeed.targets", "trainspeed.workloads", "trainspeed.workloads.base"]
