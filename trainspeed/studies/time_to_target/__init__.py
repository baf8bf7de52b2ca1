"""Steps and samples to a quality goal against the global batch: the time-to-target study.

This package's face, read by the command line without torch: its name, its flags and the report
part of its rows; `runner()` is the study itself (`study.py`).
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import TYPE_CHECKING

from trainspeed.flags import (
    DEFAULT_INT_RANGE,
    WORKLOAD_HELP,
    Range,
    machine_cpus,
    positive_int,
    process_count,
    thread_count,
)

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart

NAME = "time-to-target"
HELP = ("steps and samples to a validation goal against the global batch (LR tuned per batch, extended past "
        "edges), fitted with S(B) = S_min (1 + B_crit / B), beside the noise scale")

SCALAR_FLAGS = {
    "size": (str, "the workload's size (default: its default size)"),
    "target": (str, "target of every run (default cpu:eager:fp32)"),
    "nproc": (process_count, "ranks of every run (default 1)"),
    "threads": (thread_count, "torch threads per rank (default 1)"),
    "num_workers": (Range(0, machine_cpus, why_high=" processes, more than this machine's CPUs").parser(int),
                    "loader workers per rank (default 1)"),
    "parallel_runs": (process_count, "trainings at once (default 2)"),
    "seeds": (positive_int, "training seeds per batch, 0..N-1; seed 0 tunes the LR (default 3)"),
    "base_lr": (Range(0, 10, low_open=True).parser(float), "peak LR at the reference batch (default: the workload's)"),
    "reference_batch": (positive_int, "the batch --base-lr is for; batch B starts from base_lr x sqrt(B / this) "
                        "(default: the workload's reference batch, else the smallest global batch)"),
    "max_lr_extensions": (DEFAULT_INT_RANGE.parser(int), "more LR factors tried past an edge, at most (default 3)"),
    "max_samples": (positive_int, "budget of every run in samples: short of the goal by then is 'not reached'"),
    "eval_every_samples": (positive_int, "samples between validations (default 4096)"),
    "val_samples": (positive_int, "validation samples per pass, a multiple of every batch (default 2048)"),
    "warmup_samples": (DEFAULT_INT_RANGE.parser(int), "LR warm-up in samples; constant LR after it (default 4096)"),
    "noise_scale_micro_batches": (positive_int, "one rank: slices of each step the unbiased noise scale comes from "
                                  "(default 2; 1: the previous step's gradient)"),
    "runs_dir": (str, "where the runs go (default OUT/time_to_target_runs)"),
}
"""The study's settings that are one value each, as flags (None: the preset's)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", default="mahjong", help=WORKLOAD_HELP + " (default mahjong)")
    parser.add_argument("--data", default=None, help="the workload's dataset (its validation split measures the goal)")
    parser.add_argument("--until", default=None, help="the goal, e.g. 'val/accuracy>=0.8' or 'val/loss<=2.1'")
    for name, (kind, help) in SCALAR_FLAGS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None, help=help)
    parser.add_argument("--global-batches", default=None, help="global batches, e.g. 64,256,1024,4096")
    parser.add_argument("--lr-factors", default=None, help="multiples of the square-root-scaled LR tried first, e.g. 0.5,1,2")


def report_part() -> "ReportPart":
    """The report's part for this study's rows (imported when a report or a plot reads them)."""
    from trainspeed.studies.time_to_target.report import PART

    return PART


def runner() -> ModuleType:
    from trainspeed.studies.time_to_target import study

    return study


__all__ = ["NAME", "HELP", "SCALAR_FLAGS", "add_arguments", "report_part", "runner"]
