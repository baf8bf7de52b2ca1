"""What every study shares: its row of record, the trainspeed commands it runs, its progress.

A study runs the package's own commands (`trainspeed bench`, `train`, `eval`, `serve`, `data`) in
child processes of this Python, so each measurement gets a fresh process (its own threads, its own
compiled graphs, its own peak memory) and the study measures nothing with code of its own.
"""

from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from dataclasses import dataclass

import trainspeed
from trainspeed.errors import UsageError
from trainspeed.flags import Range, comma_list
from trainspeed.safe_path import isolated_environment

PRESETS = ("smoke", "quick", "full")
"""smoke: seconds per study, what the test suite runs; quick: minutes on a 2-core CPU (the
default); full: the settings of the measurements committed under docs/results."""
DEFAULT_PRESET = "quick"
PACKAGE_ROOT = Path(trainspeed.__file__).resolve().parents[1]

COMMAND_START_S = 20.0
"""Seconds a trainspeed command takes to start on a busy 2-core CPU (importing torch and the rest),
which the studies' estimates add per command they run."""

Progress = Callable[[int, str], None]
"""Called with (units of work just finished, what is running now)."""


def no_progress(units: int, what: str) -> None:
    """The progress hook of a study run on its own without a bar."""


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment with this trainspeed first on the path, so a child runs the same
    code, and nothing from the working directory on it (`trainspeed.safe_path`)."""
    env = isolated_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
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
    user meant); an exit code outside `ok` is the study's failure, with the command's last lines."""
    started = time.monotonic()
    result = subprocess.run([*prefix, *trainspeed_argv(*args)], env=isolated_environment(env or child_environment()),
                            capture_output=True, text=True)
    if not quiet and result.stdout.strip():
        print(result.stdout.rstrip(), flush=True)
    if result.returncode not in ok:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-3:]
        raise StudyFailed(f"`{shown(*args)}` failed (exit {result.returncode} after "
                          f"{time.monotonic() - started:.0f} s): {' / '.join(last)}")
    return result


@dataclass(frozen=True)
class RunSpec:
    """One training of a study that sweeps the learning rate per global batch: its batch, its
    multiple of the batch's scaled learning rate, its seed, and the run directory name they make."""

    batch: int
    lr_factor: float
    seed: int

    @property
    def name(self) -> str:
        return f"b{self.batch}-lr{self.lr_factor:g}-s{self.seed}"


class StudyFailed(Exception):
    """A command a study ran failed; the study stops and says which and why."""


def check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise UsageError(f"--preset {preset!r}: choose one of {', '.join(PRESETS)}")
    return preset


MAX_FACTOR = 1000.0
"""The largest multiple a list of factors takes (of a learning rate, say): beyond it a run learns
nothing, and the arithmetic that follows may overflow."""
FACTOR_LIST = comma_list(float, Range(0, MAX_FACTOR, low_open=True), what=f"positive numbers up to {MAX_FACTOR:g}",
                         example="0.5,1,2")
"""A flag's list of factors (`--lr-factors`)."""
