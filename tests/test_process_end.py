"""A program that ends through end_process ends as `sys.exit` would for everything it wrote: its
exit code, its atexit work (a temporary folder removed), its buffered output; a thread still
working is waited for. (`trainspeed` ends this way: every test of a command's exit code and output
in a child process runs through it.)"""

import subprocess
import sys
from pathlib import Path

import pytest
from child_commands import run_child

pytestmark = pytest.mark.e2e


def run_ending(body: str, code: str) -> subprocess.CompletedProcess:
    script = f"from trainspeed.process_end import end_process\n{body}\nend_process({code})\n"
    return run_child([sys.executable, "-c", script], timeout=60)


def test_the_exit_code_the_atexit_work_and_unflushed_output_all_survive(tmp_path: Path) -> None:
    folder = tmp_path / "scratch"
    body = (f"import atexit, shutil, sys, os; os.mkdir({str(folder)!r}); atexit.register(shutil.rmtree, {str(folder)!r})\n"
            "sys.stdout.write('no newline, never flushed'); sys.stderr.write('said')")
    result = run_ending(body, "3")
    assert result.returncode == 3 and result.stdout == "no newline, never flushed" and result.stderr == "said"
    assert not folder.exists()


def test_none_is_0_and_a_code_past_255_wraps_as_the_kernel_keeps_it() -> None:
    assert run_ending("", "None").returncode == 0
    assert run_ending("", "258").returncode == 2


def test_a_thread_still_working_is_waited_for_as_python_s_own_exit_waits(tmp_path: Path) -> None:
    done = tmp_path / "done"
    body = ("import threading, time, pathlib\n"
            f"threading.Thread(target=lambda: (time.sleep(0.5), pathlib.Path({str(done)!r}).write_text('x'))).start()")
    assert run_ending(body, "0").returncode == 0 and done.read_text() == "x"

