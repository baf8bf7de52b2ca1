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

import trainspeed
from trainspeed.errors import UsageError

PRESETS = ("smoke", "quick", "full")
"""smoke: seconds per study, what the test suite runs; quick: minutes on a 2-core CPU (the
default); full: the settings of the measurements committed under docs/results."""
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
    """This process's environment with this trainspeed first on the path, so a child runs the same code."""
    env = dict(os.environ)
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
    result = subprocess.run([*prefix, *trainspeed_argv(*args)], env=env or child_environment(),
                            capture_output=True, text=True)
    if not quiet and result.stdout.strip():
        print(result.stdout.rstrip(), flush=True)
    if result.returncode not in ok:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-3:]
        raise StudyFailed(f"`{shown(*args)}` failed (exit {result.returncode} after "
                          f"{time.monotonic() - started:.0f} s): {' / '.join(last)}")
    return result


class StudyFailed(Exception):
    """A command a study ran failed; the study stops and says which and why."""


def check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise UsageError(f"--preset {preset!r}: choose one of {', '.join(PRESETS)}")
    return preset


def positive_ints(text: str, flag: str) -> tuple[int, ...]:
    from trainspeed.flags import INT_FLAG_MAX

    try:
        values = tuple(int(item) for item in text.split(",") if item.strip())
    except ValueError:
        raise UsageError(f"{flag} {text!r}: give positive integers separated by commas, e.g. 256,1024") from None
    if not values or min(values) <= 0 or max(values) > INT_FLAG_MAX:
        raise UsageError(f"{flag} {text!r}: give positive integers up to 2^31-1 separated by commas, e.g. 256,1024")
    return values


def non_negative_ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(item) for item in text.split(",") if item.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 0 or max(values) > 2**31 - 1:
        raise UsageError(f"{flag} {text!r}: give integers from 0 to 2^31-1 separated by commas, e.g. 0,1")
    return values


MAX_FACTOR = 1000.0
"""The largest multiple a list of factors takes (of a learning rate, say): beyond it a run learns
nothing, and the arithmetic that follows may overflow."""


def positive_floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(item) for item in text.split(",") if item.strip())
    except ValueError:
        raise UsageError(f"{flag} {text!r}: give positive numbers separated by commas, e.g. 0.5,1,2") from None
    if not values or not all(0 < value <= MAX_FACTOR for value in values):
        raise UsageError(f"{flag} {text!r}: give positive numbers up to {MAX_FACTOR:g} separated by commas, e.g. 0.5,1,2")
    return values


def check_mahjong_settings(study: str, size: str, targets: tuple[str, ...] | list[str], *, served: bool = False) -> None:
    """The Mahjong size and the targets a study's commands get, checked as `trainspeed train`,
    `bench` and `serve` check them, so a bad one is one line before the study writes anything
    (`served`: every server serves the target, which must then be a local one)."""
    from trainspeed.targets import target_family
    from trainspeed.workloads import get_workload, resolve_size

    try:
        resolve_size(get_workload("mahjong"), size)
        for target in targets:
            if served and target.split(":", 1)[0] == "remote":
                raise UsageError(f"--target {target}: every server serves it, so it must be a local target "
                                 "(cpu, cuda, xla ...), not a remote one")
            target_family(target)
    except UsageError as error:
        raise UsageError(f"{study} study: {error}") from None


def data_ready(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds a finished shard set (one a killed writer left unfinished does not:
    the study makes it again, and the writer completes it)."""
    from trainspeed.data.shards import load_index

    try:
        load_index(Path(folder))
    except UsageError:
        return False
    return True


def check_study_data(study: str, data: str, games: int, seed: int) -> None:
    """A Mahjong study's `--data`: a finished set of Mahjong shards, or a folder the study's
    `trainspeed data mahjong-selfplay` may make one in (new, empty, or its own unfinished set of the
    same settings), checked before the study writes anything: never a run directory or another
    writer's dataset."""
    from trainspeed.data.shards import load_index
    from trainspeed.workloads.mahjong.data.selfplay import SelfPlayConfig, check_out
    from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA

    try:
        if data_ready(data):
            found = load_index(Path(data))["format"]
            if found != MAHJONG_SCHEMA.format_name:
                raise UsageError(f"--data {data} holds a {found!r} dataset, not Mahjong shards; give a folder "
                                 "of Mahjong shards or a new one for the study to make")
            return
        check_out(SelfPlayConfig(games=games, out=Path(data), seed=seed, progress=False), what="--data")
    except UsageError as error:
        raise UsageError(f"{study} study: {error}") from None



def selfplay_workers() -> str:
    """Processes the studies' `trainspeed data mahjong-selfplay` plays with: two, or one on a
    machine with one CPU (the command takes no more processes than the machine has)."""
    from trainspeed.flags import machine_cpus

    return str(min(2, machine_cpus()))
