"""Finding 2: the same training step run in this process and behind `trainspeed serve` over a link.

This package's face, read by the command line without torch: its name and its flags; `runner()`
is the study itself (`study.py`).
"""

from __future__ import annotations

import argparse
from types import ModuleType

NAME = "remote"
HELP = "finding 2: local vs remote (trainspeed serve) over loopback and emulated links, per batch size"

from trainspeed.flags import Range, positive_int, thread_count


def report_part() -> None:
    """Its rows are bench rows: the bench's part of the report shows them."""
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--links", default=None, help="comma list of loopback and RATE/RTT (tc spelling), "
                        "default loopback,1gbit/0.2ms,100mbit/1ms")
    parser.add_argument("--emulation", default=None, help="auto (namespaces and tc where possible, else in the "
                        "client; the default) or client")
    parser.add_argument("--feed", default=None, help="host, device or host,device (default host,device)")
    parser.add_argument("--target", default=None, help="the local baseline and what every server serves "
                        "(default cpu:eager:fp32)")
    parser.add_argument("--size", default=None, help="Mahjong size (default tiny)")
    parser.add_argument("--batch-sizes", default=None, help="range 2^6..2^13 or list 64,512,2048")
    parser.add_argument("--threads", type=thread_count, default=None, help="torch threads of the client and each server (default 1)")
    parser.add_argument("--windows", type=positive_int, default=None, help="timed windows per configuration (default 3)")
    parser.add_argument("--min-window-s", type=Range(0, 3600, low_open=True, why_high=" s").parser(float), default=None, help="seconds each window lasts at least")
    parser.add_argument("--min-steps-per-window", type=positive_int, default=None, help="steps each window holds at least "
                        "(default 4: pipelining overlaps steps only inside a window)")
    parser.add_argument("--rounds", type=positive_int, default=None, help="sweeps over every batch size and link (default 1)")
    parser.add_argument("--lock", default=None, help="a file every bench run holds with flock (a shared machine)")


def runner() -> ModuleType:
    from trainspeed.studies.remote import study

    return study
