"""A worker armed with die_with_parent: it lives while its parent does, and a worker whose parent
is already gone when it arms kills itself at once (the kill -9 of a whole command is tested with
the command that starts workers, `data mahjong-selfplay`)."""

import signal
import subprocess
import sys

import pytest
from child_commands import run_child

pytestmark = pytest.mark.e2e


def run_armed(parent_pid: str) -> subprocess.CompletedProcess:
    script = ("import os, sys; from trainspeed.parent_death import die_with_parent; "
              f"die_with_parent({parent_pid}); print('still running')")
    return run_child([sys.executable, "-c", script], timeout=60)


def test_a_worker_whose_parent_lives_runs_on():
    result = run_armed("os.getppid()")
    assert result.returncode == 0 and result.stdout == "still running\n", result.stderr


def test_a_worker_whose_parent_already_died_kills_itself_when_it_arms():
    result = run_armed("os.getppid() + 1")  # not its parent: as if the parent had died before the worker armed
    assert result.returncode == -signal.SIGKILL and result.stdout == ""
