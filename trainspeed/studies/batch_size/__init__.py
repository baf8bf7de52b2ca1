"""Finding 4: does a larger global batch train a stronger Mahjong policy? The batch-size study.

This package's face, read by the command line without torch: its name, its flags and the report
part of its rows; `runner()` is the study itself (`study.py`).
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart

NAME = "batch-size"
HELP = ("finding 4: does a larger global batch train a stronger policy (power first, LR tuned per batch, "
        "equal samples, steps and wall time, head to head)")


SCALAR_FLAGS = {
    "size": (str, "Mahjong size (default tiny)"),
    "target": (str, "target of every run and evaluation (default cpu:eager:fp32)"),
    "nproc": (int, "ranks of every run (default 1)"),
    "threads": (int, "torch threads per rank and per evaluation worker (default 1)"),
    "num_workers": (int, "loader workers per rank (default 1)"),
    "parallel_runs": (int, "trainings at once (default 2)"),
    "samples": (int, "samples seen by every run"),
    "base_lr": (float, "peak LR at the reference batch (default 1e-3)"),
    "reference_batch": (int, "the batch base_lr is for; a batch b starts from base_lr x sqrt(b / this) (default 256)"),
    "tuning_seed": (int, "the seed the learning rate is tuned on (default 0)"),
    "warmup_samples": (int, "LR warm-up, in samples"),
    "checkpoints": (int, "evenly spaced checkpoints kept per run"),
    "val_samples": (int, "cap on validation samples per pass"),
    "eval_games": (int, "duplicate games per evaluated policy against the rule-based agent"),
    "head_to_head_games": (int, "duplicate games per seed of the largest batch against the smallest"),
    "eval_seed": (int, "the evaluation's seed: which deals (default 0)"),
    "eval_workers": (int, "processes per evaluation (default 2)"),
    "eval_batch_games": (int, "games played at once per evaluation worker (default 64)"),
    "runs_dir": (str, "where the runs and evaluations go (default OUT/batch_size_runs)"),
    "make_data_games": (int, "self-play games made when --data is missing"),
    "data_seed": (int, "seed of those games (default 1)"),
    "assumed_within_deal_correlation": (float, "the power plan's within-deal correlation (default 0.2)"),
    "assumed_seed_sd": (float, "the power plan's seed-to-seed sd of mean rank (default 0.03)"),
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
