"""The critical-batch study's rows: its settings (with the samples it spent), every branch, and
every point's critical batch (one JSONL file, one study id). Torch-free: the report reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from trainspeed.machine import Machine
from trainspeed.rows import Batch, Length, Loss, NonNegative, Positive
from trainspeed.studies.critical_batch.config import CriticalBatchConfig

ROWS_FILE = "critical_batch.jsonl"
POINT = Length("a pair [samples, B_simple]", 2, 2)
PAIR = Length("a pair [smallest, largest]", 2, 2)


@dataclass(frozen=True)
class CriticalBatchSettingsRow:
    """The study's settings, its base run, how every branch was made and judged, and the samples
    the study spent (beside those `study time-to-target` spent on the same workload, where given)."""

    KIND: ClassVar[str] = "critical-batch-study-config"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    settings: CriticalBatchConfig
    base_run: str
    workload: str
    size: str
    base_target: str
    base_nproc: Batch
    base_global_batch: Batch
    base_steps: int
    """The base run's last step."""
    base_samples: int
    """The samples of the base run up to its last step."""
    target: str
    """The target of every branch."""
    nproc: Batch
    metric: str
    """The validation metric judged (--metric, else the base run's --until goal's, else `loss`)."""
    op: str
    """`<=` (lower is better) or `>=` (higher is better)."""
    lr_rule: str
    """The base run's LR scaling rule, which gives each branch's LR from the base run's at its point."""
    branch_samples: Batch
    b_simple_curve: Annotated[list[Annotated[list[float], POINT]], Length("a list of [samples, B_simple]", 0)]
    """The base run's resolved B_simple (moving average) per logged window, as [samples, B_simple]."""
    branch_runs: int
    samples_spent: int
    """Samples every branch trained, added up (validation not counted): what the study cost beyond the base run."""
    fraction_of_base_run: NonNegative
    """samples_spent / base_samples: what the study cost beside the run it measured."""
    time_to_target_rows: str | None
    """The rows of `study time-to-target` given with --compare-study (None: none given)."""
    time_to_target_samples: int | None
    """Samples the runs of that study trained, added up (each to the validation that met its goal, or its budget)."""
    fraction_of_time_to_target: NonNegative | None
    """samples_spent / time_to_target_samples."""
    total_s: NonNegative
    command: str
    workload_module: str | None = None
    workload_version: str | None = None
    workload_sha256: str | None = None
    machine: Machine | None = None
    branch_processes: int | None = None
    """The processes this study started to train its branches, each trained one after another in
    one of them (0: every branch was finished already; None: rows written before branches shared
    processes, one process each)."""


@dataclass(frozen=True)
class CriticalBatchBranchRow:
    """One branch: from the base run's checkpoint at `step`, `samples` more at batch B x `factor`
    and its own seed, at a constant LR; its validation metric at the end."""

    KIND: ClassVar[str] = "critical-batch-branch"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    run: str
    run_dir: str
    step: int
    """The base run's step the branch started from."""
    samples_at_step: int
    factor: Positive
    global_batch: Batch
    target: str
    nproc: Batch
    seed: int
    lr: Positive
    """The branch's constant learning rate: the base run's at `step` x the rule's factor."""
    lr_rule: str
    steps: int
    samples: int
    metric: str
    value: Loss
    """The metric at the branch's end (NaN where the branch diverged)."""
    wall_s: Positive
    command: str
    machine: Machine | None = None


@dataclass(frozen=True)
class CriticalBatchRow:
    """One point of the base run: each factor's branches' metric, the tolerance and the rule that
    gave it, which factors match, the critical batch, and the base run's B_simple there."""

    KIND: ClassVar[str] = "critical-batch"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    at: str
    """The point as --at gave it (`0.5`, `40steps`)."""
    step: int
    """The step of the checkpoint at or just before it, which the branches start from."""
    samples: int
    """The base run's samples at `step`."""
    fraction: Positive
    """samples / the base run's samples."""
    base_global_batch: Batch
    lr_at_step: Positive
    """The base run's learning rate at `step`, which the rule scales per factor."""
    lr_rule: str
    metric: str
    op: str
    factors: list[Positive]
    global_batches: list[Batch]
    lrs: list[Positive]
    values: list[list[Loss]]
    """Per factor, each seed's metric (NaN: that branch diverged)."""
    means: list[Loss]
    sds: list[Loss | None]
    min_max: list[Annotated[list[Loss], PAIR]]
    worse_by: list[Loss]
    """Per factor, its mean minus the factor-1 mean in the worse direction (negative: better)."""
    matches: list[bool]
    tolerance: NonNegative | None
    """None where a factor-1 branch diverged (there is nothing to compare with)."""
    tolerance_rule: str
    critical_batch: Batch | None
    """None where a factor-1 branch diverged."""
    critical_factor: Positive | None
    critical_at_least: bool
    """True where the largest factor still matched: the critical batch is at least `critical_batch`."""
    critical_text: str
    """`640`, `at least 1,024`, or why it is unknown."""
    b_simple: float | None
    """The base run's B_simple (moving average) in the last window logged at or before `step`; None
    where it was not resolved there (`b_simple_note` says why) or not measured."""
    b_simple_step: int | None
    b_simple_note: str
    branch_runs: int
    samples_spent: int
    factors_not_trained: list[Positive] = field(default_factory=list)
    """Factors past the first above 1 that did not match: their branches cannot change the critical
    batch, so the study did not train them (empty in rows written before it climbed factor by factor)."""
