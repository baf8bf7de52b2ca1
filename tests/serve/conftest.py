"""Fixtures of the remote tests besides tests/conftest.py's servers in this process (`serve`,
`server`): the token file (a test that must kill a server process starts its own)."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_runs import TOKEN


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)  # as a token file should be: readable by its owner alone
    return path
