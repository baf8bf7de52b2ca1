"""Finding 1: one device's training throughput against the study's baseline, per batch size.

This package's face, read by the command line without torch: its name and its flags; `runner()`
is the study itself (`study.py`).
"""

from __future__ import annotations

import argparse
from types import ModuleType

NAME = "throughput"
HELP = "finding 1: samples/s of each target over the baseline's per batch size (device- and host-fed)"

from trainspeed.flags import WORKLOAD_HELP, Range, positive_int, thread_count


def report_part() -> None:
    """Its rows are bench rows: the bench's part of the report shows them."""
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", default=None, help=WORKLOAD_HELP + " (default mahjong)")
    parser.add_argument("--size", default=None, help="the workload's size (default tiny)")
    parser.add_argument("--targets", default=None, help="comma list (default: the study's targets available here)")
    parser.add_argument("--batch-sizes", default=None, help="range 2^6..2^12 or list 64,256,1024")
    parser.add_argument("--feed", default=None, help="device, host or device,host (default device,host)")
    parser.add_argument("--windows", type=positive_int, default=None, help="timed windows per configuration")
    parser.add_argument("--min-window-s", type=Range(0, 3600, low_open=True, why_high=" s").parser(float), default=None, help="seconds each window lasts at least")
    parser.add_argument("--threads", type=thread_count, default=None, help="torch CPU threads (default 1)")


def runner() -> ModuleType:
    from trainspeed.studies.throughput import study

    return study
