"""The critical-batch study's settings and presets (read by the command line without torch)."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

from trainspeed.flags import POSITIVE, PROCESSES, THREADS, WORKERS, CommaList, Range, comma_list, flag_field
from trainspeed.rows import Batch, Positive
from trainspeed.studies.common import MAX_FACTOR

AT_STEPS = re.compile(r"(\d+)steps?")
METRIC = re.compile(r"(?:val/)?([A-Za-z0-9_.\-]+)\s*(<=|>=)")
"""--metric: a validation metric and the direction in which it is better, `loss<=` or `val/accuracy>=`."""
"""A branch point given as a step of the base run: `40steps` (`1step`)."""
DEFAULT_BRANCH_STEPS = 8
"""Steps of the largest branch batch that a branch trains where --branch-samples is not given."""


@dataclass(frozen=True)
class BranchPoint:
    """Where on the base run branches start, as given: a fraction of its samples or one of its steps."""

    fraction: float | None = None
    step: int | None = None

    def text(self) -> str:
        return f"{self.step}steps" if self.step is not None else f"{self.fraction:g}"


def branch_point(text: str) -> BranchPoint:
    """One item of --at: a fraction of the base run's samples in (0, 1], or a step `NSTEPS` (>= 1)."""
    steps = AT_STEPS.fullmatch(text)
    if steps is not None:
        step = int(steps[1])
        if not 1 <= step <= POSITIVE.top:
            raise argparse.ArgumentTypeError(f"{text!r}: a step from 1 to {POSITIVE.top:.0f}")
        return BranchPoint(step=step)
    try:
        fraction = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a fraction nor a step such as 40steps") from None
    if not 0 < fraction <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} lies outside (0, 1]: a fraction of the base run's samples")
    return BranchPoint(fraction=fraction)


def judged_metric(text: str) -> str:
    """--metric as given, checked for its form: NAME<= (lower is better) or NAME>= (higher is better)."""
    if METRIC.fullmatch(text.strip()) is None:
        raise argparse.ArgumentTypeError(f"{text!r}: write NAME<= (lower is better) or NAME>= (higher is better), "
                                         "e.g. loss<= or val/accuracy>=")
    return text.strip()


def metric_and_op(text: str) -> tuple[str, str]:
    """The metric's name and direction of a --metric `judged_metric` accepted."""
    match = METRIC.fullmatch(text)
    assert match is not None
    return match[1], match[2]


def _at_item(text: str) -> str:
    return branch_point(text).text()


AT_LIST = CommaList(_at_item, what="fractions of the base run's samples in (0, 1], or its steps written NSTEPS",
                    example="0.25,0.5,0.75 or 40steps,80steps", distinct=True)
"""--at: each point as `BranchPoint.text` writes it (`0.5`, `40steps`), so the settings row reads as given."""
FACTORS = comma_list(float, Range(0, MAX_FACTOR, low_open=True), what=f"positive numbers up to {MAX_FACTOR:g}",
                     example="1,2,4,8,16", sort=True)
"""--factors: multiples of the base run's global batch, sorted, each once."""


@dataclass(frozen=True)
class CriticalBatchConfig:
    base_run: str = flag_field(name="--from", help="the base run's directory; it keeps its checkpoints (train "
                               "--checkpoint-every K --keep-checkpoints 0)")
    """The base run: every branch starts from one of its checkpoints."""
    out: str
    at: tuple[str, ...] = flag_field(("0.25", "0.5", "0.75"), read=AT_LIST,
                                     help="branch points: fractions of the base run's samples, or steps (40steps); "
                                     "each branches from the checkpoint at or just before it")
    factors: tuple[Positive, ...] = flag_field((1.0, 2.0, 4.0, 8.0), read=FACTORS,
                                               help="branch batches as multiples of the base run's global batch (1 is "
                                               "always trained: the reference)")
    branch_samples: int | None = flag_field(None, help="samples every branch trains, the same at every factor (a "
                                            "multiple of every branch batch)", value_range=POSITIVE,
                                            default_text=f"{DEFAULT_BRANCH_STEPS} steps of the largest branch batch")
    seeds: int = flag_field(3, help="seeds of the factor-1 branches per point, 0..N-1 (their spread sets the "
                            "tolerance; the other factors take --factor-seeds)", value_range=POSITIVE)
    factor_seeds: int | None = flag_field(None, help="seeds of each factor other than 1, 0..N-1, at most --seeds: "
                                          "fewer than the reference's trains fewer branches, and the "
                                          "tolerance's sqrt(2/seeds) becomes sqrt(1/seeds + 1/N)", value_range=POSITIVE,
                                          default_text="--seeds / sqrt(the factors other than 1), rounded up, at "
                                          "least 2 (or --seeds where it is smaller)")
    tolerance: Positive | None = flag_field(None, help="how much worse than the factor-1 branches a batch's metric "
                                            "may be and still match, in the metric's units",
                                            default_text="t(0.975) x the factor-1 seeds' standard deviation x "
                                            "sqrt(1/seeds + 1/factor-seeds)", value_range=Range(0, 1e9, low_open=True))
    metric: str | None = flag_field(None, help="the validation metric the branches are judged by and the direction "
                                    "it is better in: NAME<= or NAME>= (e.g. mean_loss<=)", read=judged_metric,
                                    default_text="the base run's --until goal's, else loss<=")
    workload: str | None = flag_field(None, help="the workload the base run must have trained (a check)",
                                      default_text="the base run's")
    data: str | None = flag_field(None, help="the dataset the branches train and validate on",
                                  default_text="the base run's")
    target: str | None = flag_field(None, help="target of every branch", default_text="the base run's")
    nproc: Batch | None = flag_field(None, help="ranks of every branch", value_range=PROCESSES,
                                     default_text="the base run's")
    threads: Batch | None = flag_field(None, help="torch threads per rank", value_range=THREADS,
                                       default_text="the base run's")
    num_workers: int | None = flag_field(None, help="loader workers per rank", value_range=WORKERS,
                                         default_text="the base run's")
    parallel_runs: int = flag_field(2, help="branches trained at once, each in a warm process that trains one "
                                    "branch after another", value_range=PROCESSES)
    val_samples: int | None = flag_field(None, help="validation samples of every branch, a multiple of every branch "
                                         "batch", value_range=POSITIVE, default_text="the whole validation split")
    compare_study: str | None = flag_field(None, help="a `study time-to-target` folder (or its rows) of the same "
                                           "workload and size: the samples this study spent are also given as a "
                                           "fraction of what that study spent", default_text="none: the samples "
                                           "spent are given as a fraction of the base run's only")
    runs_dir: str = flag_field("", help="where the branches go", default_text="OUT/critical_batch_runs")

    @property
    def runs(self) -> Path:
        return Path(self.runs_dir) if self.runs_dir else Path(self.out) / "critical_batch_runs"

    @property
    def points(self) -> tuple[BranchPoint, ...]:
        return tuple(branch_point(text) for text in self.at)

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.seeds))

    def seeds_of(self, factor: float) -> tuple[int, ...]:
        """The seeds a factor's branches train: --seeds at factor 1, the reference every other factor
        is compared with; --factor-seeds (by default `default_factor_seeds`) at every other factor.

        Every comparison is with the same factor-1 branches, so their mean and spread weigh in each
        one: the classic allocation for comparing several treatments with one control gives the
        control about sqrt(k) times the seeds of each of k treatments (Dunnett, 1955)."""
        if factor == 1.0 or self.factor_seeds is None:  # settings written before --factor-seeds: as many
            return self.seed_list
        return tuple(range(self.factor_seeds))

    @property
    def default_factor_seeds(self) -> int:
        """--factor-seeds where it is not given: the seeds of the reference over the square root of
        the factors compared with it (Dunnett's allocation, `seeds_of`), rounded up, and never fewer
        than 2 (a factor's mean of one seed is a single draw) or more than --seeds."""
        compared = len(self.all_factors) - 1
        if compared < 1:
            return self.seeds
        return min(self.seeds, max(2, math.ceil(self.seeds / math.sqrt(compared))))

    @property
    def all_factors(self) -> tuple[float, ...]:
        """The factors trained: those given, and 1 (the reference every other is compared with)."""
        return tuple(sorted({1.0, *self.factors}))


PRESETS: dict[str, dict] = {
    "smoke": dict(at=("0.5", "1"), factors=(1.0, 2.0), seeds=2, parallel_runs=1),
    "quick": dict(seeds=2),
    "full": dict(factors=(1.0, 2.0, 4.0, 8.0, 16.0)),
}
"""The study's settings per preset (the base run, --from, is always the user's)."""
