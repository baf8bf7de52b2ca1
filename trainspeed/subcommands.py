"""trainspeed's own commands run in child processes: the studies' benches, trainings and
evaluations, and the plan's check runs.

Each runs in a fresh process of this Python, in this directory (a relative path means what the
user meant), with this trainspeed first on its import path and nothing from the working folder
on it (`trainspeed.safe_path`), so each measurement has its own threads, compiled graphs and peak
memory, and the caller measures nothing with code of its own.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

from trainspeed.own_code import IMPORT_ROOT
from trainspeed.safe_path import isolated_environment


class CommandFailed(Exception):
    """A command run in a child process failed; whoever ran it stops and says which and why."""


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment with this trainspeed first on the path, so a child runs the same
    code, and nothing from the working directory on it (`trainspeed.safe_path`)."""
    env = isolated_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def trainspeed_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainspeed", *args]


def shown(*args: str) -> str:
    """A command as a user would type it (`trainspeed ...`), for rows and logs."""
    return shlex.join(["trainspeed", *args])


def run_trainspeed(*args: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None,
                   quiet: bool = True, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    """Run one trainspeed command to its end (in this directory, so relative paths mean what the
    user meant); an exit code outside `ok` is CommandFailed, with the command's last lines."""
    started = time.monotonic()
    result = subprocess.run([*prefix, *trainspeed_argv(*args)], env=isolated_environment(env or child_environment()),
                            capture_output=True, text=True)
    if not quiet and result.stdout.strip():
        print(result.stdout.rstrip(), flush=True)
    if result.returncode not in ok:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-3:]
        raise CommandFailed(f"`{shown(*args)}` failed (exit {result.returncode} after "
                            f"{time.monotonic() - started:.0f} s): {' / '.join(last)}")
    return result
