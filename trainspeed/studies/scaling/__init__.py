"""Finding 3: N ranks end to end, each reading its own data, against one; and the IO efficiency.

This package's face, read by the command line without torch: its name, its flags and the report
part of its rows; `runner()` is the study itself (`study.py`).
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import TYPE_CHECKING

from trainspeed.flags import (
    DEFAULT_INT_RANGE,
    Range,
    machine_cpus,
    positive_int,
    thread_count,
)

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart

NAME = "scaling"
HELP = "finding 3: N ranks end to end with their own data loading against one rank; the IO efficiency"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="self-play shards; made when missing (default: OUT/scaling_data)")
    parser.add_argument("--size", default=None, help="Mahjong size (default tiny)")
    parser.add_argument("--target", default=None, help="target of every rank (default cpu:eager:fp32)")
    parser.add_argument("--ranks", default=None, help="rank counts, 1 among them (default 1,2)")
    parser.add_argument("--batch-sizes", default=None, help="per-device batch sizes, e.g. 256,1024,4096")
    parser.add_argument("--steps", type=positive_int, default=None, help="steps per run")
    parser.add_argument("--repeats", type=positive_int, default=None, help="repeats of every configuration")
    parser.add_argument("--threads", type=thread_count, default=None, help="torch threads per rank (default 1)")
    parser.add_argument("--num-workers", type=Range(0, machine_cpus, why_high=" processes, more than this machine's CPUs").parser(int), default=None, help="loader workers per rank (default 1)")
    parser.add_argument("--timing-warmup-steps", type=DEFAULT_INT_RANGE.parser(int), default=None,
                        help="steps left out of the steady-state samples/s (default 5)")


def report_part() -> "ReportPart":
    """The report's part for this study's rows (imported when a report or a plot reads them)."""
    from trainspeed.studies.scaling.report import PART

    return PART


def runner() -> ModuleType:
    from trainspeed.studies.scaling import study

    return study


__all__ = ["NAME", "HELP", "report_part", "add_arguments", "runner"]
