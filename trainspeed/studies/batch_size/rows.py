"""The batch-size study's rows: its settings and plan, every run, every global batch, every
batch's strength per framing, and each comparison with its verdict (one JSONL file, one study id)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trainspeed.evaluate.power import PowerPlan
from trainspeed.machine import Machine
from trainspeed.studies.batch_size.config import BatchSizeConfig

ROWS_FILE = "batch_size.jsonl"
EVEN_RANK = 2.5


@dataclass(frozen=True)
class BatchSizeSettingsRow:
    """The study's settings, its power plan, each batch's samples/s on one device, and its times."""

    KIND: ClassVar[str] = "batch-size-config"
    SCHEMA_VERSION: ClassVar[int] = 2

    study_id: str
    settings: BatchSizeConfig
    equal_steps: int
    power: PowerPlan
    """The minimum detectable difference planned before anything ran, from the assumed spreads."""
    samples_per_s: dict[str, float]
    """Per global batch (as text): the median samples/s of one bench run on one device."""
    throughput_run_id: str
    command: str
    train_s: float
    eval_s: float
    total_s: float
    machine: Machine | None = None


@dataclass(frozen=True)
class BatchSizeRunRow:
    """One training run: its validation curve, time and checkpoints."""

    KIND: ClassVar[str] = "batch-size-run"
    SCHEMA_VERSION: ClassVar[int] = 2

    study_id: str
    run: str
    run_dir: str
    global_batch: int
    nproc: int
    batch_size_per_device: int
    lr_factor: float
    peak_lr: float
    train_seed: int
    steps: int
    warmup_steps: int
    samples: int
    checkpoint_every: int
    val_loss: float
    val_accuracy: float
    majority_baseline: float
    val_samples: float
    equal_steps: int
    equal_steps_samples: int
    equal_steps_val_loss: float
    equal_steps_val_accuracy: float
    curve: list[list[float]]
    """[samples seen, validation loss, validation accuracy] at every validation."""
    train_wall_s: float
    """The run's wall time from its first to its last step, plus its pauses."""
    end_to_end_samples_per_s: float
    command: str
    workload_module: str | None = None
    workload_version: str | None = None
    workload_sha256: str | None = None
    machine: Machine | None = None


@dataclass(frozen=True)
class BatchSizeBatchRow:
    """One global batch: the learning-rate sweep on the tuning seed, and validation over the seeds."""

    KIND: ClassVar[str] = "batch-size-batch"
    SCHEMA_VERSION: ClassVar[int] = 2

    study_id: str
    global_batch: int
    best_lr_factor: float
    peak_lr: float
    steps: int
    seeds: list[int]
    lr_sweep: dict[str, float]
    """Final validation loss of the tuning seed per LR factor."""
    val_loss: float
    val_loss_per_seed: list[float]
    val_accuracy: float
    val_accuracy_per_seed: list[float]
    majority_baseline: float
    equal_steps_val_loss: float
    equal_steps_val_accuracy: float
    train_wall_s: float


@dataclass(frozen=True)
class BatchSizeStrengthRow:
    """One global batch in one framing: its seeds' policies against three rule-based agents, the
    same deals for every policy of the study."""

    KIND: ClassVar[str] = "batch-size-strength"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    framing: str
    global_batch: int
    samples: int
    """Samples each policy had trained on."""
    step: int
    seeds: list[int]
    games_per_seed: int
    mean_rank: float
    mean_rank_ci95: list[float]
    """Over seeds and deals (crossed bootstrap)."""
    mean_rank_per_seed: list[float]
    seed_sd: float | None
    """Spread of the seeds' mean ranks (their sd, each over the same deals)."""
    within_deal_correlation: list[float | None]
    eval_ids: list[str]


@dataclass(frozen=True)
class BatchSizeComparisonRow:
    """The largest batch against another in one framing: the difference in mean rank (largest minus
    other: below zero, the largest batch played better), over seeds and deals."""

    KIND: ClassVar[str] = "batch-size-comparison"
    SCHEMA_VERSION: ClassVar[int] = 2

    study_id: str
    framing: str
    """One of FRAMINGS, or "head to head" (the largest batch's policies against three copies of the
    other's, where the difference is mean rank minus 2.5)."""
    global_batch: int
    versus_batch: int
    mean_rank_difference: float
    ci95: list[float]
    minimum_detectable_difference: float
    """2.80 standard errors of the difference: what this comparison could detect with 80% power."""
    seeds: int
    deals: int
    verdict: str
    """On "the larger batch plays stronger": "supported" (the interval is below 0), "contradicted"
    (above 0) or "inconclusive at a minimum detectable difference of x ranks"."""
