"""A command's start as a run measures its start-up from: a fresh process reads itself as started
within the time its parent saw it run, never before it was spawned (psutil's boot time is whole
seconds and drifts from the wall clock: on a machine up a while it made a new process a second
old). The kernel counts a process's start in clock ticks (10 ms where SC_CLK_TCK is 100), so its
age may read up to one tick long: two ticks are allowed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from trainspeed.train.startup import STARTED_AT_VARIABLE

READ_AT_START = "from trainspeed.train.startup import seconds_since_start; print(repr(seconds_since_start()))"


def test_a_new_process_is_as_old_as_its_parent_saw_it_run() -> None:
    env_without_handed_start = {key: value for key, value in os.environ.items()
                                if key != STARTED_AT_VARIABLE}
    before = time.monotonic()
    printed = subprocess.run([sys.executable, "-c", READ_AT_START], capture_output=True, text=True, check=True,
                             env=env_without_handed_start).stdout
    ran_s = time.monotonic() - before
    tick_s = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.0
    assert 0.0 < float(printed) <= ran_s + 2 * tick_s, (printed, ran_s)

