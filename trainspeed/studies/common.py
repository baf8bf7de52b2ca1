"""What every study shares: its row of record, the trainspeed commands it runs, its progress.

A study runs the package's own commands (`trainspeed bench`, `train`, `eval`, `serve`, `data`) in
child processes of this Python, so each measurement gets a fresh process (its own threads, its own
compiled graphs, its own peak memory) and the study measures nothing with code of its own.
"""

from __future__ import annotations

import datetime
from typing import Callable

from dataclasses import dataclass

from trainspeed.errors import UsageError
from trainspeed.flags import Range, comma_list
from trainspeed.subcommands import (  # noqa: F401 (the studies' own names for them)
    CommandFailed,
    child_environment,
    run_trainspeed,
    shown,
    trainspeed_argv,
)

PRESETS = ("smoke", "quick", "full")
"""smoke: seconds per study, what the test suite runs; quick: minutes on a 2-core CPU (the
default); full: the settings of the measurements committed under docs/results."""
DEFAULT_PRESET = "quick"

COMMAND_START_S = 20.0
"""Seconds a trainspeed command takes to start on a busy 2-core CPU (importing torch and the rest),
which the studies' estimates add per command they run."""

Progress = Callable[[int, str], None]
"""Called with (units of work just finished, what is running now)."""


def no_progress(units: int, what: str) -> None:
    """The progress hook of a study run on its own without a bar."""


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


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


StudyFailed = CommandFailed
"""A command a study ran failed (or what it wrote says the study cannot go on); the study stops
and says which and why."""


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
