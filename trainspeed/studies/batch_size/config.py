"""The batch-size study's settings and presets (read by the command line without torch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.flags import (
    DEFAULT_INT_RANGE,
    NON_NEGATIVE_INTS,
    POSITIVE,
    POSITIVE_INTS,
    PROCESSES,
    THREADS,
    WINDOW_S,
    WORKERS,
    Range,
    flag_field,
)
from trainspeed.studies.common import FACTOR_LIST

FRAMINGS = ("equal samples", "equal steps", "equal wall time")


@dataclass(frozen=True)
class BatchSizeConfig:
    data: str = flag_field(help="self-play shards; made when missing", default_text="OUT/batch_size_data")
    """Self-play shards; made here (`trainspeed data mahjong-selfplay`) when missing."""
    out: str
    size: str = flag_field("tiny", help="Mahjong size")
    target: str = flag_field("cpu:eager:fp32", help="target of every run and evaluation")
    nproc: int = flag_field(1, help="ranks of every run", value_range=PROCESSES)
    """Ranks per run; the global batch is nproc x the per-device batch."""
    threads: int = flag_field(1, help="torch threads per rank and per evaluation worker", value_range=THREADS)
    num_workers: int = flag_field(1, help="loader workers per rank", value_range=WORKERS)
    parallel_runs: int = flag_field(2, help="trainings at once, each in a warm process that trains run after run",
                                    value_range=PROCESSES)
    """Trainings at once (each nproc x threads cores)."""
    batches: tuple[int, ...] = flag_field((256, 1024, 8192), read=POSITIVE_INTS, help="global batches")
    samples: int = flag_field(524288, help="samples seen by every run", value_range=POSITIVE)
    """Samples seen by every run (equal for every batch)."""
    base_lr: float = flag_field(1e-3, help="peak LR at the reference batch", value_range=Range(0, 10, low_open=True))
    """Peak LR at the reference batch; batch b starts from base_lr x sqrt(b / reference_batch)."""
    reference_batch: int = flag_field(256, help="the batch --base-lr is for; a batch b starts from base_lr x "
                                      "sqrt(b / this)", value_range=POSITIVE)
    lr_factors: tuple[float, ...] = flag_field((0.5, 1.0, 2.0), read=FACTOR_LIST,
                                               help="multiples of the square-root-scaled LR")
    """Multiples of the square-root-scaled LR tried at every batch, on the tuning seed."""
    tuning_seed: int = flag_field(0, help="the seed the learning rate is tuned on", value_range=DEFAULT_INT_RANGE)
    seeds: tuple[int, ...] = flag_field((0, 1, 2, 3, 4), read=NON_NEGATIVE_INTS, help="training seeds")
    """Training seeds at every batch's best LR (the tuning seed's run is reused)."""
    warmup_samples: int = flag_field(32768, help="LR warm-up, in samples", value_range=DEFAULT_INT_RANGE)
    checkpoints: int = flag_field(32, help="evenly spaced checkpoints kept per run", value_range=POSITIVE)
    """Evenly spaced checkpoints per run (the equal-steps and equal-wall-time framings read them)."""
    val_samples: int | None = flag_field(8192, help="cap on validation samples per pass", value_range=POSITIVE)
    """Cap on validation samples per pass (a multiple of every batch); None: the whole split."""
    bench_min_window_s: float = flag_field(0.5, help="seconds each timed window of the throughput bench lasts at least",
                                           value_range=WINDOW_S)
    """The bench's `--min-window-s`: the equal-wall-time framing reads the samples/s it measures."""
    eval_games: int = flag_field(600, help="duplicate games per evaluated policy against the rule-based agent",
                                 value_range=POSITIVE)
    eval_seed: int = flag_field(0, help="the evaluation's seed: which deals", value_range=DEFAULT_INT_RANGE)
    eval_workers: int = flag_field(2, help="processes per evaluation", value_range=PROCESSES)
    eval_batch_games: int = flag_field(64, help="games played at once per evaluation worker", value_range=POSITIVE)
    head_to_head_games: int = flag_field(400, help="duplicate games per seed of the largest batch against the "
                                         "smallest", value_range=POSITIVE)
    runs_dir: str = flag_field("", help="where the runs and evaluations go", default_text="OUT/batch_size_runs")
    """Where the runs and their evaluations go (default: OUT/batch_size_runs)."""
    make_data_games: int = flag_field(1000, help="self-play games made when --data is missing", value_range=POSITIVE)
    data_seed: int = flag_field(1, help="seed of those games", value_range=DEFAULT_INT_RANGE)
    assumed_game_rank_sd: float = 1.12
    assumed_within_deal_correlation: float = flag_field(
        0.2, help="the power plan's within-deal correlation, from -1/3 (four games of a deal cannot all disagree "
        "more) to 1", value_range=Range(-1 / 3, 1))
    assumed_seed_sd: float = flag_field(0.03, help="the power plan's seed-to-seed sd of mean rank, 0 to 3",
                                        value_range=Range(0, 3))
    """The power plan's assumptions; the results report the spreads they measured instead."""

    @property
    def equal_steps(self) -> int:
        """Steps of the largest batch: the step at which every run is compared at equal steps."""
        return self.samples // max(self.batches)

    @property
    def runs(self) -> Path:
        return Path(self.runs_dir) if self.runs_dir else Path(self.out) / "batch_size_runs"

    def steps(self, batch: int) -> int:
        return self.samples // batch

    def checkpoint_every(self, batch: int) -> int:
        return max(1, self.steps(batch) // self.checkpoints)

    def check(self) -> None:
        for flag, value, least in (("--nproc", self.nproc, 1), ("--threads", self.threads, 1),
                                   ("--num-workers", self.num_workers, 0), ("--samples", self.samples, 1),
                                   ("--parallel-runs", self.parallel_runs, 1), ("--checkpoints", self.checkpoints, 1),
                                   ("--reference-batch", self.reference_batch, 1), ("--warmup-samples", self.warmup_samples, 0),
                                   ("--eval-workers", self.eval_workers, 1), ("--eval-batch-games", self.eval_batch_games, 1),
                                   ("--make-data-games", self.make_data_games, 1)):
            if value < least:
                raise UsageError(f"batch-size study: {flag} must be at least {least}, got {value}")
        if not 0 < self.base_lr < float("inf"):
            raise UsageError(f"batch-size study: --base-lr must be a positive number, got {self.base_lr}")
        if not WINDOW_S.holds(self.bench_min_window_s):
            raise UsageError(f"batch-size study: --bench-min-window-s must be a positive number of seconds up to "
                             f"{WINDOW_S.top:g}, got {self.bench_min_window_s}")
        if len(self.batches) < 2:
            raise UsageError("batch-size study: --batches needs at least two global batches to compare")
        for batch in self.batches:
            if batch % self.nproc or self.samples % batch:
                raise UsageError(f"batch-size study: global batch {batch} must divide --samples {self.samples} "
                                 f"and be divisible by --nproc {self.nproc}")
        for batch in self.batches:
            if self.equal_steps % self.checkpoint_every(batch):
                raise UsageError(f"batch-size study: batch {batch} keeps a checkpoint every "
                                 f"{self.checkpoint_every(batch)} steps, which misses the equal-steps step "
                                 f"{self.equal_steps}; choose --samples a multiple of the largest batch x --checkpoints")
            if self.val_samples is not None and self.val_samples % batch:
                raise UsageError(f"batch-size study: --val-samples {self.val_samples} must be a multiple of batch {batch}")
        if self.tuning_seed not in self.seeds:
            raise UsageError(f"batch-size study: the tuning seed {self.tuning_seed} must be one of --seeds")
        for flag, games in (("--eval-games", self.eval_games), ("--head-to-head-games", self.head_to_head_games)):
            if games % 4 or games < 8:
                raise UsageError(f"batch-size study: {flag} {games} must be a multiple of 4, at least 8 (two deals)")


PRESETS = {
    "smoke": dict(batches=(32, 64), samples=512, lr_factors=(1.0,), seeds=(0, 1), warmup_samples=64, checkpoints=2,
                  eval_games=8, head_to_head_games=8, eval_workers=1, eval_batch_games=8, make_data_games=22,
                  val_samples=64, parallel_runs=1, bench_min_window_s=0.05),
    "quick": dict(batches=(256, 2048), samples=65536, lr_factors=(1.0, 2.0), seeds=(0, 1), warmup_samples=4096,
                  checkpoints=8, eval_games=200, head_to_head_games=80, make_data_games=200, val_samples=4096),
    "full": dict(),
}
"""The study's settings per preset; `full` is the committed study's."""


