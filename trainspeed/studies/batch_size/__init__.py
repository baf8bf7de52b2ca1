"""Finding 4: does a larger global batch train a stronger Mahjong policy? The batch-size study.

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
    process_count,
    seed_value,
    thread_count,
)

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart

NAME = "batch-size"
HELP = ("finding 4: does a larger global batch train a stronger policy (power first, LR tuned per batch, "
        "equal samples, steps and wall time, head to head)")


WORKERS = Range(0, machine_cpus, why_high=" processes, more than this machine's CPUs")
SCALAR_FLAGS = {
    "size": (str, "Mahjong size (default tiny)"),
    "target": (str, "target of every run and evaluation (default cpu:eager:fp32)"),
    "nproc": (process_count, "ranks of every run (default 1)"),
    "threads": (thread_count, "torch threads per rank and per evaluation worker (default 1)"),
    "num_workers": (WORKERS.parser(int), "loader workers per rank (default 1)"),
    "parallel_runs": (process_count, "trainings at once (default 2)"),
    "samples": (positive_int, "samples seen by every run"),
    "base_lr": (Range(0, 10, low_open=True).parser(float), "peak LR at the reference batch (default 1e-3)"),
    "reference_batch": (positive_int, "the batch base_lr is for; a batch b starts from base_lr x sqrt(b / this) (default 256)"),
    "tuning_seed": (seed_value, "the seed the learning rate is tuned on (default 0)"),
    "warmup_samples": (DEFAULT_INT_RANGE.parser(int), "LR warm-up, in samples"),
    "checkpoints": (positive_int, "evenly spaced checkpoints kept per run"),
    "val_samples": (positive_int, "cap on validation samples per pass"),
    "eval_games": (positive_int, "duplicate games per evaluated policy against the rule-based agent"),
    "head_to_head_games": (positive_int, "duplicate games per seed of the largest batch against the smallest"),
    "eval_seed": (seed_value, "the evaluation's seed: which deals (default 0)"),
    "eval_workers": (process_count, "processes per evaluation (default 2)"),
    "eval_batch_games": (positive_int, "games played at once per evaluation worker (default 64)"),
    "runs_dir": (str, "where the runs and evaluations go (default OUT/batch_size_runs)"),
    "make_data_games": (positive_int, "self-play games made when --data is missing"),
    "data_seed": (seed_value, "seed of those games (default 1)"),
    "assumed_within_deal_correlation": (Range(-1 / 3, 1).parser(float),
                                        "the power plan's within-deal correlation, from -1/3 (four games of a deal "
                                        "cannot all disagree more) to 1 (default 0.2)"),
    "assumed_seed_sd": (Range(0, 3).parser(float), "the power plan's seed-to-seed sd of mean rank, 0 to 3 (default 0.03)"),
}
"""The study's settings that are one value each, as flags (None: the preset's)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="self-play shards; made when missing (default: OUT/batch_size_data)")
    for name, (kind, help) in SCALAR_FLAGS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None, help=help)
    parser.add_argument("--batches", default=None, help="global batches, e.g. 256,1024,8192")
    parser.add_argument("--lr-factors", default=None, help="multiples of the square-root-scaled LR, e.g. 0.5,1,2")
    parser.add_argument("--seeds", default=None, help="training seeds, e.g. 0,1,2,3,4")


def report_part() -> "ReportPart":
    """The report's part for this study's rows (imported when a report or a plot reads them)."""
    from trainspeed.studies.batch_size.report import PART

    return PART


def runner() -> ModuleType:
    from trainspeed.studies.batch_size import study

    return study


__all__ = ["NAME", "HELP", "report_part", "SCALAR_FLAGS", "add_arguments", "runner"]
