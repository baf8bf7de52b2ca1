"""The time-to-target study's rows: its settings, every run, every global batch and the fit of
S(B) (one JSONL file, one study id). Torch-free: the report and `trainspeed plan` read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Callable, ClassVar

from trainspeed.machine import Machine
from trainspeed.rows import (
    INTERVAL,
    Batch,
    Length,
    NonNegative,
    NonNegativeInterval,
    Positive,
    PositiveInterval,
    is_finite,
)
from trainspeed.studies.time_to_target.config import TimeToTargetConfig

ROWS_FILE = "time_to_target.jsonl"
DRAW = Length("a pair [S_min, E_min]", 2, 2)


@dataclass(frozen=True)
class TimeToTargetSettingsRow:
    """The study's settings, the goal, and the learning rate every factor multiplies."""

    KIND: ClassVar[str] = "time-to-target-study-config"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    settings: TimeToTargetConfig
    workload: str
    size: str
    """The size the runs trained (the workload's default resolved)."""
    until: str
    metric: str
    base_lr: Positive
    """Peak LR at the reference batch; a run at batch B and factor f trains at base_lr x f x sqrt(B / reference)."""
    base_lr_from: str
    """"--base-lr", or "workload" (its optimizer's own LR)."""
    reference_batch: Batch
    command: str
    total_s: NonNegative
    workload_module: str | None = None
    workload_version: str | None = None
    workload_sha256: str | None = None
    machine: Machine | None = None


@dataclass(frozen=True)
class TimeToTargetRunRow:
    """One run to the goal: where it crossed (interpolated between the validations that bracket
    the crossing), or that it did not within its budget; its time, and its noise scale near the goal."""

    KIND: ClassVar[str] = "time-to-target-study-run"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    run: str
    run_dir: str
    purpose: str
    """"lr sweep" (seed 0, one of the factors tried) or "seed" (another seed at the batch's best factor)."""
    target: str
    nproc: Batch
    global_batch: Batch
    lr_factor: Positive
    peak_lr: Positive
    seed: int
    max_samples: int
    reached: bool
    outcome: str
    """"reached at N samples", "not reached within N samples (best value x)" or "not reached:
    diverged at step N"."""
    steps: Positive | None
    """Steps to the goal, interpolated between the bracketing validations (None: not reached)."""
    samples: Positive | None
    validated_step: int | None
    """The first validation that met the goal."""
    value: float | None
    best_value: float | None
    train_s: NonNegative
    """Training seconds to the crossing (or the whole run), pauses left out."""
    wall_s: NonNegative
    """Seconds from the first step to the crossing (or to the end), validations included."""
    validations: int
    """Validations up to the crossing (or the end)."""
    command_s: NonNegative
    """The whole `trainspeed train` command: start-up, the steps, the stop checkpoint and shutdown."""
    b_simple: float | None
    """B_simple (moving average) of the last noise-scale window at or before the crossing, where
    its |G|^2 is resolved (`trainspeed.gradients.rows`); None otherwise."""
    noise_scale_method: str | None
    end_to_end_samples_per_s: NonNegative
    command: str
    machine: Machine | None = None
    b_simple_lower: NonNegative | None = None
    """Where that window is unresolved: its lower bound on B_simple (`b_simple` is None)."""
    diverged_at_step: int | None = None
    """The first step whose training loss was not finite, where the run diverged (it stopped
    there, not reached); None: it did not (and in rows written before runs recorded it)."""


def seeds_min_max(steps: list[float], batch: int) -> tuple[list[float], list[float]]:
    """The smallest and the largest of the seeds' steps to the goal, and of their samples."""
    low, high = min(steps), max(steps)
    return [low, high], [low * batch, high * batch]


def _min_max_of_version_1(record: dict[str, Any]) -> dict[str, Any]:
    """Version 1 held, as `steps_ci95` and `samples_ci95`, a percentile bootstrap of the mean over
    the seeds, which with 3 seeds or fewer ends exactly at the seeds' smallest and largest steps and
    is no 95% interval of the mean. Version 2 holds the smallest and largest as what they are,
    computed again here from the row's own steps per seed (a field of the wrong type is left for the
    reader to name)."""
    upgraded = {key: value for key, value in record.items() if key not in ("steps_ci95", "samples_ci95")}
    steps, batch = record.get("steps_per_seed"), record.get("global_batch")
    known = (record.get("steps_mean") is not None and isinstance(steps, list) and bool(steps)
             and all(is_finite(value) for value in steps) and is_finite(batch))
    upgraded["steps_min_max"], upgraded["samples_min_max"] = seeds_min_max(steps, batch) if known else (None, None)
    return upgraded


@dataclass(frozen=True)
class TimeToTargetBatchRow:
    """One global batch: its learning-rate sweep (extended while the best factor lay at an edge)
    and its seeds' steps to the goal at the best factor."""

    KIND: ClassVar[str] = "time-to-target-study-batch"
    SCHEMA_VERSION: ClassVar[int] = 2
    OLDER_VERSIONS: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: _min_max_of_version_1}

    study_id: str
    global_batch: Batch
    best_lr_factor: Positive | None
    """None: no factor reached the goal within the budget."""
    peak_lr: Positive | None
    lr_sweep: dict[str, Positive | None]
    """Samples to the goal of seed 0 per factor tried (None: not reached)."""
    best_at_edge: bool
    """True when the best factor is still the smallest or largest tried (the extensions ran out)."""
    extensions: int
    seeds: list[int]
    reached: int
    """Seeds that met the goal within the budget."""
    outcome: str
    steps_per_seed: list[Positive | None]
    steps_mean: Positive | None
    steps_min_max: PositiveInterval | None
    """The smallest and the largest of the seeds' steps (None unless every seed reached the goal): the
    spread of what was measured, not a 95% interval of the mean. Over the 2 or 3 seeds a study runs,
    a t interval of the mean reaches 12.7 (2 seeds) or 4.3 (3 seeds) standard errors to each side,
    below zero steps where the seeds differ much, and a percentile bootstrap ends at these two values."""
    samples_mean: Positive | None
    samples_min_max: PositiveInterval | None
    b_simple: float | None
    """Median over seeds of B_simple near the goal, where every seed's is resolved."""
    wall_s_mean: NonNegative | None
    b_simple_lower: NonNegative | None = None
    """Where some seed's is unresolved: the median over seeds of each one's value or lower bound,
    a lower bound on the median (`trainspeed.gradients.rows.median_reading`)."""


@dataclass(frozen=True)
class TimeToTargetFitRow:
    """S(B) = S_min (1 + B_crit / B) over the batches every seed of which met the goal, with
    bootstrap intervals over seeds, beside the noise scale measured near the goal."""

    KIND: ClassVar[str] = "time-to-target-study-fit"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    workload: str
    size: str
    until: str
    batches: list[Batch]
    """The batches fitted."""
    left_out: list[str]
    """Each batch not fitted, and why (not every seed reached the goal)."""
    s_min: NonNegative
    s_min_ci95: NonNegativeInterval
    e_min: NonNegative
    e_min_ci95: NonNegativeInterval
    b_crit: NonNegative | None
    """E_min / S_min; None (unbounded) where the steps fell as fast as perfect scaling at every batch fitted."""
    b_crit_ci95: Annotated[list[NonNegative | None], INTERVAL]
    """None for a bound that is unbounded."""
    draws: Annotated[list[Annotated[list[NonNegative], DRAW]], Length("a list of one or more draws", 1)]
    """[S_min, E_min] of some bootstrap refits, for intervals on the steps at other batches."""
    bootstrap_draws: Batch
    b_simple: float | None
    """Median B_simple near the goal over every fitted batch's seeds, where every one is resolved."""
    b_simple_per_batch: dict[str, float | None]
    relative_rms: NonNegative
    """Root mean square of (fitted - measured) / measured over the fitted batches' means."""
    workload_module: str | None = None
    workload_version: str | None = None
    workload_sha256: str | None = None
    b_simple_lower: NonNegative | None = None
    """Where some seed's is unresolved: a lower bound on that median, as a batch's `b_simple_lower`."""
