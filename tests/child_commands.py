"""The one way tests run trainspeed (and the repository's scripts) in child processes, as a user's
shell would: this checkout first on the path, the XLA client on the CPU, nothing the test session
set for itself leaking in.

Every test that starts a child this way is an end-to-end test and must be marked `e2e`
(`tests/conftest.py` refuses the start otherwise), so `pytest -m "not e2e"` runs exactly the tests
that need no child process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"
TESTS = REPO_ROOT / "tests"
"""Where the tests' own workload and device family live (toy_workload.py, toy_target.py): a child
that imports them has this folder on its path."""

check_marked: Callable[[], None] = lambda: None  # noqa: E731 - tests/conftest.py installs the real check


def trainspeed_env(*path: str | os.PathLike, **extra: str) -> dict[str, str]:
    """The environment of a child: this checkout (and `path`) importable, PJRT on the CPU."""
    env = dict(os.environ)
    # torch_xla, imported by the test session's conftest, sets GRPC_VERBOSITY for this process's
    # children; a user's shell has it unset.
    env.pop("GRPC_VERBOSITY", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), *map(str, path), env.get("PYTHONPATH")]))
    env.setdefault("PJRT_DEVICE", "CPU")
    env.update(extra)
    return env


def trainspeed_argv(*args: str) -> list[str]:
    """`trainspeed ARGS...` as the console script runs it: `-P` leaves the working directory off
    the command's own import path (the processes it starts it must leave off theirs)."""
    return [sys.executable, "-P", "-m", "trainspeed", *args]


def python_argv(*args: str) -> list[str]:
    return [sys.executable, *args]


def run_child(argv: list[str], *, path: tuple[str | os.PathLike, ...] = (), env: dict[str, str] | None = None,
        timeout: float = 300, cwd: str | os.PathLike = REPO_ROOT, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run `argv` from `cwd` (the checkout's root by default) to its end; its output captured as text."""
    check_marked()
    return subprocess.run(argv, env=env or trainspeed_env(*path), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def start_child(argv: list[str], *, path: tuple[str | os.PathLike, ...] = (), env: dict[str, str] | None = None,
          cwd: str | os.PathLike = REPO_ROOT, **kwargs: Any) -> subprocess.Popen:
    """Start `argv` from `cwd` (the checkout's root by default); the caller waits for it (or signals
    and kills it)."""
    check_marked()
    return subprocess.Popen(argv, env=env or trainspeed_env(*path), cwd=cwd, **kwargs)


def run_trainspeed(*args: str, path: tuple[str | os.PathLike, ...] = (), env: dict[str, str] | None = None,
                   timeout: float = 300, cwd: str | os.PathLike = REPO_ROOT,
                   **kwargs: Any) -> subprocess.CompletedProcess:
    """`trainspeed ARGS...` to its end."""
    return run_child(trainspeed_argv(*args), path=path, env=env, timeout=timeout, cwd=cwd, **kwargs)


def run_ok(*args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """`trainspeed ARGS...`, asserting it succeeded (its last output in the failure)."""
    result = run_trainspeed(*args, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


class ServeProcess:
    """`trainspeed serve` in a process of its own, on loopback port 0 with one thread; `name` is the
    target name it printed. `path`: folders its workloads (`--workload`) are imported from. Its
    stderr goes to a file (a full pipe would stop the server), which `stderr()` reads for a message."""

    def __init__(self, *args: str, path: tuple[str | os.PathLike, ...] = ()) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = start_child(trainspeed_argv("serve", "--listen", "127.0.0.1:0", "--threads", "1", *args),
                                   path=path, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.name = self.process.stdout.readline().strip()
        if not self.name.startswith("remote:"):
            self.stop()
            raise AssertionError(f"trainspeed serve printed no target name: {self.stderr()[-3000:]}")

    @property
    def address(self) -> str:
        """HOST:PORT of the server, from its target name (`remote:HOST:PORT/device:mode:precision`)."""
        return self.name.removeprefix("remote:").split("/", 1)[0]

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


UNTRUSTED_MODULES = ("torch", "numpy", "psutil", "pickle", "socket", "threading")
"""Modules trainspeed's processes import: its libraries, and the standard library's modules that a
`multiprocessing` spawn worker imports before it takes on its parent's path."""


def write_untrusted_modules(folder: Path) -> Path:
    """`folder` as a folder received from someone may be: a module named as each of
    UNTRUSTED_MODULES, which leaves `NAME.imported` beside itself and fails when it is imported."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in UNTRUSTED_MODULES:
        (folder / f"{name}.py").write_text(
            'open(__file__[:-3] + ".imported", "w").close()\n'
            'raise ImportError(f"{__file__} was imported: its folder was on the import path")\n')
    return folder


def untrusted_modules_imported(folder: Path) -> list[str]:
    """The modules of `write_untrusted_modules` that some process imported."""
    return sorted(path.stem for path in folder.glob("*.imported"))
