"""When the `trainspeed train` command started, so a run can say how long it took to reach its
first step: the interpreter and its imports, building the model, opening the data, starting and
joining the ranks. A plan adds it to the time to a goal; it differs with the device count."""

from __future__ import annotations

import os
import time

import psutil

STARTED_AT_VARIABLE = "TRAINSPEED_TRAIN_STARTED_AT"
"""The command's start (seconds since the epoch), handed to the ranks it starts."""


def command_started_at() -> float:
    """The start of the command this process belongs to: its launcher's, where one handed it down."""
    handed = os.environ.get(STARTED_AT_VARIABLE)
    if handed:
        try:
            return float(handed)
        except ValueError:
            pass
    return psutil.Process().create_time()


def hand_down(env: dict[str, str]) -> None:
    """Give the processes started with `env` this command's start."""
    env[STARTED_AT_VARIABLE] = repr(command_started_at())


def seconds_since_start() -> float:
    return max(0.0, time.time() - command_started_at())
