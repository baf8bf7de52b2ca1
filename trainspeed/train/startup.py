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
    return process_started_at()


def process_started_at() -> float:
    """This process's start on the wall clock, from its age on the kernel's boot clock.

    psutil's `create_time` adds the start (clock ticks since boot) to the boot time, which the
    kernel gives in whole seconds and which drifts from the wall clock as the machine runs: a
    process a few milliseconds old can be a second older by it, which a start-up time measures.
    Where /proc or the boot clock is not there, psutil's."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            after_name = stat.read().rsplit(")", 1)[1].split()
        start_ticks = int(after_name[19])  # field 22, starttime; the fields after the name start at 3
        age_s = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - max(0.0, age_s)
    except (OSError, ValueError, IndexError, AttributeError):
        return psutil.Process().create_time()


def hand_down(env: dict[str, str]) -> None:
    """Give the processes started with `env` this command's start."""
    env[STARTED_AT_VARIABLE] = repr(command_started_at())


def seconds_since_start() -> float:
    return max(0.0, time.time() - command_started_at())
