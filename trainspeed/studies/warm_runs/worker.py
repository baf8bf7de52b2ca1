"""A process that trains a study's runs one after another: a warm `trainspeed train`.

A study's run (a critical-batch branch, a batch-size run) trains a few hundred steps; started as a
command of its own, much of its time went to starting: the interpreter, torch and the package
imported, the workload module loaded. This process pays that once and then trains each run it is
handed exactly as `trainspeed train` trains it (`trainspeed.train.launch.launch`: every check, the
run directory, its lock, `--resume`, the loop, the summary; a run of several ranks starts its
ranks as the command does), so a run's folder is the one its command would have made.

Its conversation with the study (`runner.py`), one JSON line each way, never pickle:

- in, on stdin: `{"config": TEXT}`, the run's settings as `TrainConfig.to_json` writes them;
- out, on the stdout it started with: `{"exit": CODE, "error": TEXT or null, "pid": PID}`, the
  exit code `trainspeed train` would have had (0, 2 for bad settings, 128 + a signal after a stop,
  1 for a failure) and, where it is not 0, why in one line.

What the trainings print goes to stderr. The process ends at the end of its input, and with the
study: its parent's death stops the run it trains as a SIGTERM does (a checkpoint, then out).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from typing import TextIO

from trainspeed.errors import UsageError

WORKER_MODULE = "trainspeed.studies.warm_runs.worker"
STOPPED_BEFORE_TRAINING = 128 + signal.SIGINT


@dataclass(frozen=True)
class Reply:
    """What became of one run: `trainspeed train`'s exit code for it, why where it is not 0,
    and the process that trained it."""

    exit: int
    error: str | None
    pid: int

    def line(self) -> str:
        return json.dumps(asdict(self))


def request_line(config_json: str) -> str:
    """The line that hands a worker one run."""
    return json.dumps({"config": config_json})


def read_reply(line: str) -> Reply:
    """A worker's reply; ValueError for a line that is not one."""
    raw = json.loads(line)
    if not (isinstance(raw, dict) and isinstance(raw.get("exit"), int) and isinstance(raw.get("pid"), int)
            and (raw.get("error") is None or isinstance(raw.get("error"), str))):
        raise ValueError(f"not a worker's reply: {line[:200]!r}")
    return Reply(exit=raw["exit"], error=raw["error"], pid=raw["pid"])


def train_run(line: str) -> Reply:
    """One request: its settings read as data, then trained as `trainspeed train` would."""
    from trainspeed.train.config import TrainConfig
    from trainspeed.train.launch import launch
    from trainspeed.train.startup import STARTED_AT_VARIABLE

    pid = os.getpid()
    try:
        raw = json.loads(line)
        text = raw.get("config") if isinstance(raw, dict) else None
        if not isinstance(text, str):
            raise UsageError(f"not a run's settings: {line[:200]!r}")
        config = TrainConfig.from_json(text, "the run's settings")
        # The run's start-up time (`startup_s`) counts from here, as a command's counts from its start.
        os.environ[STARTED_AT_VARIABLE] = repr(time.time())
        return Reply(exit=launch(config), error=None, pid=pid)
    except UsageError as error:
        return Reply(exit=2, error=str(error), pid=pid)
    except Exception as error:  # noqa: BLE001 (a crash of one run is its reply; the study stops on it)
        traceback.print_exc()
        return Reply(exit=1, error=f"{type(error).__name__}: {error}", pid=pid)


def serve(requests: TextIO, replies: TextIO) -> None:
    """Each request in turn, its reply written before the next is read."""
    for line in requests:
        if line.strip():
            replies.write(train_run(line).line() + "\n")
            replies.flush()


def main() -> int:
    from trainspeed.train.lifecycle import die_with_parent

    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # what a training prints never mixes with a reply
    die_with_parent(signal.SIGTERM)
    try:
        serve(sys.stdin, replies)
    except KeyboardInterrupt:
        return STOPPED_BEFORE_TRAINING
    return 0


if __name__ == "__main__":
    from trainspeed.process_end import end_process

    end_process(main())
