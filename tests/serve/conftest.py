"""Fixtures of the remote tests besides tests/conftest.py's servers in this process (`serve`,
`server`): the token file, and one `trainspeed serve` process that a test may talk to (one that
must kill a server starts its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from child_commands import ServeProcess
from serve_runs import TOKEN


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)  # as a token file should be: readable by its owner alone
    return path


@pytest.fixture(scope="session")
def serve_process() -> Iterator[ServeProcess]:
    """One `trainspeed serve` process for the session, for the tests that only talk to it."""
    process = ServeProcess()
    yield process
    process.stop()
