"""The time-to-target study's settings and presets (read by the command line without torch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.flags import (
    DEFAULT_INT_RANGE,
    POSITIVE,
    POSITIVE_INTS,
    PROCESSES,
    THREADS,
    WORKERS,
    WORKLOAD_HELP,
    Range,
    flag_field,
)
from trainspeed.rows import Batch, Positive
from trainspeed.studies.common import FACTOR_LIST

DEFAULT_WORKLOAD = "mahjong"
"""The workload the study trains unless --workload names another."""

LR_EDGE_FACTOR = 2.0
"""How far past an edge of the sweep the next factor tried lies (x2 above the largest, /2 below the smallest)."""


@dataclass(frozen=True)
class TimeToTargetConfig:
    workload: str = flag_field(help=WORKLOAD_HELP, default_text=DEFAULT_WORKLOAD)
    data: str = flag_field(help="the workload's dataset (its validation split measures the goal)")
    """The workload's dataset (its validation split is what the goal is measured on)."""
    until: str = flag_field(help="the goal, e.g. 'val/accuracy>=0.8' or 'val/loss<=2.1'")
    """The quality goal of every run, as `trainspeed train --until` takes it."""
    out: str
    size: str = flag_field("", help="the workload's size", default_text="its default size")
    """The workload's size ("": its default)."""
    target: str = flag_field("cpu:eager:fp32", help="target of every run")
    nproc: Batch = flag_field(1, help="ranks of every run", value_range=PROCESSES)
    threads: Batch = flag_field(1, help="torch threads per rank", value_range=THREADS)
    num_workers: int = flag_field(1, help="loader workers per rank", value_range=WORKERS)
    parallel_runs: int = flag_field(2, help="trainings at once", value_range=PROCESSES)
    """Trainings at once (each nproc x threads cores)."""
    global_batches: tuple[Batch, ...] = flag_field((32, 128, 512, 2048), read=POSITIVE_INTS, help="global batches")
    seeds: int = flag_field(3, help="training seeds per batch, 0..N-1; seed 0 tunes the LR", value_range=POSITIVE)
    """Training seeds per batch (0 .. seeds-1); seed 0 also tunes the learning rate."""
    base_lr: Positive | None = flag_field(None, help="peak LR at the reference batch", default_text="the workload's",
                                          value_range=Range(0, 10, low_open=True))
    """Peak LR at the reference batch (None: the workload's own optimizer LR)."""
    reference_batch: Batch | None = flag_field(None, help="the batch --base-lr is for; batch B starts from base_lr x "
                                               "sqrt(B / this)", value_range=POSITIVE,
                                               default_text="the workload's reference batch, else the smallest "
                                               "global batch")
    """The batch base_lr is for (None: the workload's reference batch, else the smallest global batch)."""
    lr_factors: tuple[Positive, ...] = flag_field((0.5, 1.0, 2.0), read=FACTOR_LIST,
                                                  help="multiples of the square-root-scaled LR tried first")
    """Multiples of the square-root-scaled LR tried first at every batch, on seed 0."""
    max_lr_extensions: int = flag_field(3, help="more LR factors tried past an edge, at most",
                                        value_range=DEFAULT_INT_RANGE)
    """How many more factors a batch's sweep tries past an edge while its best factor lies at one."""
    max_samples: int = flag_field(262144, help="budget of every run in samples: short of the goal by then is "
                                  "'not reached'", value_range=POSITIVE)
    """Each run's budget: a run that has not met the goal by then is "not reached within N samples"."""
    eval_every_samples: int = flag_field(4096, help="samples between validations", value_range=POSITIVE)
    """Samples between validations (the crossing is interpolated between the two that bracket it)."""
    val_samples: int | None = flag_field(2048, help="validation samples per pass, a multiple of every batch",
                                         value_range=POSITIVE)
    """Validation samples per pass (a multiple of every batch); None: the whole split."""
    warmup_samples: int = flag_field(4096, help="LR warm-up in samples; constant LR after it",
                                     value_range=DEFAULT_INT_RANGE)
    """Linear LR warm-up, in samples; the LR is constant after it, so steps to target do not depend
    on the budget (a cosine over max_samples would make them)."""
    noise_scale_micro_batches: int = flag_field(2, help="one rank: slices of each step the unbiased noise scale "
                                                "comes from (1: the previous step's gradient)", value_range=POSITIVE)
    """Slices of each one-rank step that the unbiased noise scale is measured from (1: the previous step's gradient)."""
    runs_dir: str = flag_field("", help="where the runs go", default_text="OUT/time_to_target_runs")
    """Where the runs go (default: OUT/time_to_target_runs)."""

    @property
    def runs(self) -> Path:
        return Path(self.runs_dir) if self.runs_dir else Path(self.out) / "time_to_target_runs"

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.seeds))

    def steps(self, batch: int) -> int:
        return self.max_samples // batch

    def check(self) -> None:
        for flag, value, least in (("--nproc", self.nproc, 1), ("--threads", self.threads, 1),
                                   ("--num-workers", self.num_workers, 0), ("--parallel-runs", self.parallel_runs, 1),
                                   ("--seeds", self.seeds, 1), ("--max-samples", self.max_samples, 1),
                                   ("--eval-every-samples", self.eval_every_samples, 1),
                                   ("--warmup-samples", self.warmup_samples, 0),
                                   ("--max-lr-extensions", self.max_lr_extensions, 0),
                                   ("--noise-scale-micro-batches", self.noise_scale_micro_batches, 1)):
            if value < least:
                raise UsageError(f"time-to-target study: {flag} must be at least {least}, got {value}")
        if self.base_lr is not None and not 0 < self.base_lr < float("inf"):
            raise UsageError(f"time-to-target study: --base-lr must be a positive number, got {self.base_lr}")
        if len(set(self.global_batches)) < 2:
            raise UsageError("time-to-target study: --global-batches needs at least two batches to fit S(B)")
        for batch in self.global_batches:
            if batch % self.nproc:
                raise UsageError(f"time-to-target study: global batch {batch} must be divisible by --nproc {self.nproc}")
            if self.max_samples < batch:
                raise UsageError(f"time-to-target study: --max-samples {self.max_samples} is less than one step of "
                                 f"batch {batch}")
            if self.val_samples is not None and self.val_samples % batch:
                raise UsageError(f"time-to-target study: --val-samples {self.val_samples} must be a multiple of batch "
                                 f"{batch}, so every batch validates on the same samples")
            micro = self.noise_scale_micro_batches
            if self.nproc == 1 and micro > 1 and (batch % micro or batch // micro < 2):
                raise UsageError(f"time-to-target study: --noise-scale-micro-batches {micro} must split batch {batch} "
                                 "into slices of two or more samples")


PRESETS: dict[str, dict] = {
    "smoke": dict(global_batches=(16, 32), seeds=2, lr_factors=(1.0,), max_lr_extensions=0, max_samples=1024,
                  eval_every_samples=256, val_samples=64, warmup_samples=64, parallel_runs=1),
    "quick": dict(global_batches=(32, 128, 512), seeds=2, max_samples=65536, eval_every_samples=2048),
    "full": dict(),
}
"""The study's settings per preset; `full` is the committed studies' (with their own --global-batches)."""
