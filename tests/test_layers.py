"""The layers written in pyproject.toml hold: import-linter checks every import of the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_imports_keep_to_the_declared_layers_and_independent_packages() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint_imports, "import-linter is not installed: pip install .[test]"
    result = subprocess.run([lint_imports, "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
