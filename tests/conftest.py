"""Test-session setup shared by every test folder."""

import importlib.util
import os
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")

import pytest  # noqa: E402
import torch  # noqa: E402

if importlib.util.find_spec("torch_xla") is not None:
    # Register the XLA device before any test runs a backward pass: autograd sizes its
    # per-device queues at the first backward, and an XLA device added later trips an assert.
    import torch_xla

    torch_xla.device()

torch.set_num_threads(int(os.environ.get("TRAINSPEED_TEST_THREADS", "2")))

import child_commands  # noqa: E402 - tests/child_commands.py, the one runner of child processes

_running: list[pytest.Item] = []
"""The test being set up, run or torn down (the runner checks that it is marked `e2e`)."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _running[:] = [item]


def _check_marked_e2e() -> None:
    """A test that starts a child process (itself, or through a fixture it needs) is end-to-end."""
    if _running and _running[0].get_closest_marker("e2e") is None:
        raise AssertionError(f"{_running[0].nodeid} runs trainspeed in a child process: mark it "
                             "@pytest.mark.e2e (or its module: pytestmark = pytest.mark.e2e)")


child_commands.check_marked = _check_marked_e2e


@pytest.fixture
def tmp_results(tmp_path):
    return tmp_path / "results.jsonl"


def _child_pids(parent: int | None = None) -> set[int]:
    parent = os.getpid() if parent is None else parent
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children.add(int(stat.parent.name))
    return children


@pytest.fixture
def child_pids():
    """A function listing the processes whose parent is the test process (e.g. loader workers),
    or the given process."""
    return _child_pids


@pytest.fixture
def cli_error(capsys):
    """A function running `trainspeed ARGV...` in-process that asserts the command failed as bad
    input must (exit code 2, exactly one stderr line `trainspeed: error: ...`) and returns the line."""
    from trainspeed.cli import main

    def run(*argv: str) -> str:
        code = main(list(argv))
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: "), (code, lines)
        return lines[0]

    return run
