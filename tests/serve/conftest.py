"""Servers for the remote tests: in this process (fast; the loss sequence is then bit-comparable with
a local run, same threads) or as a `trainspeed serve` process that a test can kill."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from serve_runs import TOKEN, ServeProcess
from trainspeed.serve.config import ServeConfig
from trainspeed.serve.server import RunningServer, start_server


@pytest.fixture
def serve():
    """A function starting an in-process server (port 0) with the given settings; all stopped at the end."""
    started: list[RunningServer] = []

    def start(**settings) -> RunningServer:
        running = start_server(ServeConfig(**{"listen": "127.0.0.1:0", **settings}))
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop(None)


@pytest.fixture
def server(serve) -> RunningServer:
    return serve()


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)  # as a token file should be: readable by its owner alone
    return path


@pytest.fixture(scope="session")
def serve_process() -> Iterator[ServeProcess]:
    """One `trainspeed serve` process for the session, for the tests that only talk to it (one
    that must kill a server starts its own)."""
    process = ServeProcess()
    yield process
    process.stop()
