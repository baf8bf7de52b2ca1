"""A worker armed with die_with_parent: it lives while its parent does, a worker whose parent is
already gone when it arms kills itself at once, and one a fork server started dies with the process
it was started for (the kill -9 of a whole command is tested with the command that starts workers,
`data mahjong-selfplay`)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_commands import run_child, start_child

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


OWNER = '''
import multiprocessing, os, time
from trainspeed.parent_death import die_with_parent

def work(owner):
    die_with_parent(owner)
    print(os.getpid(), flush=True)
    time.sleep(300)

if __name__ == "__main__":
    worker = multiprocessing.get_context("forkserver").Process(target=work, args=(os.getpid(),))
    worker.start()
    time.sleep(300)
'''


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="lists processes through /proc")
def test_a_worker_a_fork_server_started_dies_with_the_process_it_was_started_for(tmp_path, child_pids):
    """Its parent is the fork server, which outlives a killed owner while any of its children live
    (`trainspeed.child_start` starts workers so once JAX runs in their owner)."""
    script = tmp_path / "owner.py"
    script.write_text(OWNER)
    owner = start_child([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(owner.stdout.readline())  # it armed, and runs
        assert _alive(worker) and worker not in child_pids(owner.pid)
        owner.kill()
        owner.wait()
        gone_by = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not _alive(worker), "the worker outlived its killed owner"
    finally:
        owner.kill()
        if worker is not None and _alive(worker):
            os.kill(worker, signal.SIGKILL)  # its fork server then ends: no child of it is left

