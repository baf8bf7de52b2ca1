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



def test_jax_s_backend_is_left_to_the_process_s_end_not_torn_down_first(tmp_path: Path) -> None:
    """An exit function registered before JAX's runs after it (they run last in, first out): it
    finds JAX's backend still up, which `sys.exit` would have torn down, and the program's own
    output and exit code are as they were."""
    seen = tmp_path / "backend"
    body = ("import atexit, pathlib, sys\n"
            "def backend_left():\n"
            f"    pathlib.Path({str(seen)!r}).write_text(str(sys.modules['jax._src.xla_bridge']._default_backend is not None))\n"
            "atexit.register(backend_left)\n"
            "import jax, jax.numpy as jnp\nprint(float(jax.jit(lambda x: x * 2)(jnp.ones(3)).sum()))")
    result = run_ending(body, "0")
    assert result.returncode == 0 and result.stdout == "6.0\n" and seen.read_text() == "True"
    plain = run_child([sys.executable, "-c", body + "\nimport sys; sys.exit(0)"], timeout=60)
    assert plain.returncode == 0 and seen.read_text() == "False"
