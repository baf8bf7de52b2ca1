"""The layers written in pyproject.toml hold: import-linter checks every import of the package."""

from __future__ import annotations

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
