"""The trainer's rows: a run's summary (`summary.json`, and the last row of `metrics.jsonl`), and
the rows of `metrics.jsonl` (a `train` row per logged window, a `val` row per validation, a
`batch-switch` row per switch of a batch schedule).

A run directory is read through `trainspeed.train.runs`, by the report and the studies, which import
no torch, so this module imports none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trainspeed.atomic import atomic_write_text
from trainspeed.errors import UsageError
from trainspeed.gradients.rows import NoiseScaleReading
from trainspeed.machine import Machine
from trainspeed.rows import (
    KIND,
    VERSION,
    Batch,
    Loss,
    NonNegative,
    Positive,
    Provenance,
    Source,
    record_kind,
    row_record,
)

SUMMARY_FILE = "summary.json"
CONFIG_FILE = "train_config.json"
METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class BatchSwitchRecord:
    """One `kind: batch-switch` row: a batch schedule's switch (`trainspeed.train.batch_schedule`),
    written once the new batch settled (with the compilations its first steps made)."""

    KIND: ClassVar[str] = "batch-switch"
    SCHEMA_VERSION: ClassVar[int] = 1

    step: int
    """The first step at the new batch."""
    samples: int
    """Samples trained before it: where the new batch starts."""
    from_global_batch: Batch
    to_global_batch: Batch
    batch_size_per_device: Batch
    """The new per-device batch (all its micro-batches)."""
    micro_batches: Batch
    """Equal slices each device's batch is stepped over (1: none), one optimizer step in all."""
    lr_before: NonNegative
    lr_after: NonNegative
    lr_scaling: str
    """The rule the peak LR follows the batch by (none, linear, sqrt), from `reference_batch`."""
    reference_batch: int | None
    reason: str
    """`schedule` (an explicit schedule's entry) or `auto` (the noise scale's readings)."""
    b_simple: float | None = None
    """auto: the reading's B_simple (moving average; None where it was not resolved)."""
    b_simple_lower: float | None = None
    """auto: a lower bound of an unresolved reading, where the meter gives one."""
    resolved: bool | None = None
    calibration: float | None = None
    """auto: c of B_crit = c x B_simple at these samples (1 without --critical-batch rows)."""
    critical_batch: float | None = None
    """auto: c x B_simple (None where it was not resolved: larger than any batch tried)."""
    critical_batch_low: float | None = None
    """auto: c x the reading's lower confidence bound on B_simple (about 97.7%, one-sided:
    `NoiseScaleReading.confident_lower`), what a confident jump goes to at most (None: unknown, or a
    row written before auto jumped)."""
    confident: bool | None = None
    """auto: True where that bound took the batch (one reading, possibly several doublings), False
    where readings in a row agreeing to double did; None: an explicit schedule, or an older row."""
    timed: bool | None = None
    """auto: True where step times chose the batch (the least time to the same progress); None: an
    explicit schedule, or an older row."""
    timed_by: str | None = None
    """auto: whose step times those were: `run` (measured in the run, `--auto-step-times run`) or
    `bench` (`--bench-jsonl`); None where none chose, or an older row (whose were the bench's)."""
    step_times: list[list[Positive]] | None = None
    """auto with `--auto-step-times run`: the run's points of t(B) when it read, [global batch,
    median seconds per step] ascending (`BatchPlan.step_times`); from two on they decide."""
    compilations: int = 0
    """Graphs the target compiled in the steps that settled the new batch (its first
    `--timing-warmup-steps`, at least one; 0 where it compiles none, or the shapes were compiled
    before)."""
    compilations_total: int = 0
    """Graphs compiled by this invocation of the run up to that step."""
    last_step: int | None = None
    """The step after which the row was written: the last that settled the new batch. A resume
    from a checkpoint before it drops the row with the other rows logged after that checkpoint, and
    writes it again (the checkpoint carries the switch); None in rows written before it was kept."""

    def line(self) -> str:
        why = "the schedule" if self.reason == "schedule" else (
            f"auto: B_simple {'unresolved' if not self.resolved else format(self.b_simple, ',.4g')}"
            f" x {self.calibration:.3g}"
            + (f", at least {self.critical_batch_low:,.4g} at 97.7%" if self.confident and self.critical_batch_low
               else "")
            + (f", the least time by the {'run' if self.timed_by == 'run' else 'bench'}'s step times" if self.timed
               else ""))
        return (f"train: global batch {self.from_global_batch} -> {self.to_global_batch} at step {self.step} "
                f"({self.samples:,} samples; {self.batch_size_per_device}/device in {self.micro_batches} micro-batch(es)), "
                f"LR {self.lr_before:.3g} -> {self.lr_after:.3g} ({self.lr_scaling}), by {why}")


@dataclass(frozen=True)
class SwitchEntry:
    """One switch in a run's summary."""

    step: int
    samples: int
    from_global_batch: Batch
    to_global_batch: Batch


@dataclass(frozen=True)
class ScheduleSummary:
    """A run's batch schedule: what it was given, where it started and ended, every switch."""

    schedule: str
    """`auto`, or the schedule's entries (`64@0,128@20000`)."""
    start_global_batch: Batch
    final_global_batch: Batch
    switches: list[SwitchEntry]
    max_batch_per_device: int | None
    """The memory cap it stepped past in micro-batches (auto: stopped below)."""
    compilations: int
    """Graphs the target compiled in this invocation."""

    def line(self) -> str:
        path = " -> ".join([str(self.start_global_batch)] + [f"{entry.to_global_batch} (from {entry.samples:,} samples)"
                                                             for entry in self.switches])
        return (f"batch schedule {self.schedule}: global batch {path}; {len(self.switches)} switch(es), "
                f"{self.compilations} compilation(s) in this invocation")


@dataclass(frozen=True)
class RunSummary:
    """One invocation of a run (`summary.json`, and the last row of `metrics.jsonl`)."""

    KIND: ClassVar[str] = "train-summary"
    SCHEMA_VERSION: ClassVar[int] = 1

    workload: str
    size: str
    target: str
    world_size: Batch
    batch_size_per_device: Batch
    global_batch: Batch
    synthetic_data: bool
    num_workers: int
    threads: int | None
    first_step: int
    last_step: int
    samples: int
    wall_s: Positive
    """Host time from the first to the last step, all ranks, less `paused_s`."""
    paused_s: NonNegative | None
    """Validation passes and checkpoints between steps (not training, so not in `wall_s`); None only
    in summaries converted from files that did not record it."""
    end_to_end_samples_per_s: NonNegative
    """All samples of this invocation over the wall time from the first to the last step, all ranks."""
    steady_samples_per_s: Positive | None
    """The same after the first `timing_warmup_steps` steps (None when the run is shorter)."""
    samples_per_s_per_device: NonNegative
    step_time_s: Positive
    data_wait_fraction: NonNegative
    data_wait_fraction_worst_rank: NonNegative
    steady_data_wait_fraction: NonNegative | None
    """Data wait over the steady-state steps only (the loader's start-up left out), mean over ranks."""
    h2d_s_per_step: NonNegative
    final_loss: Loss | None
    """The last logged window's loss (None: the run logged no window)."""
    validation: dict[str, Loss] | None
    """The workload's validation metrics at the last step (None: no validation ran)."""
    bench_samples_per_s: Positive | None
    io_efficiency: NonNegative | None
    stopped_by_signal: bool
    torch_version: str
    learning_rates: dict | None = None
    """How the peak LR of each optimizer came about (`trainspeed.train.lr_schedule.LearningRates`):
    the LR given (--lr or the workload's), the scaling rule, reference and global batch, the peak."""
    workload_module: str | None = None
    """The workload's identity (`trainspeed.workloads.identity`): module, version, definition hash."""
    workload_version: str | None = None
    workload_sha256: str | None = None
    cpu_s_per_wall_s: NonNegative | None = None
    """Rank 0's process CPU seconds per wall second from its first to its last step (its loader
    workers are processes of their own and not counted)."""
    machine: Machine | None = None
    """Rank 0's machine, with the load average at the first and the last step."""
    time_to_target: TimeToTargetRecord | None = None
    """The run's `--until` goal: when it was first met, or the best value while it was not."""
    noise_scale: dict[str, float] | None = None
    """Each trained network's gradient noise scale B_simple over the last quarter of the run's steps,
    where its |G|^2 is resolved there (`noise_scale_readings` has the others' lower bounds). In
    summaries written before the meter kept a standard error, every network's, not assessed."""
    startup_s: NonNegative | None = None
    """Seconds from the `trainspeed train` command's start to the first step (`trainspeed.train.startup`):
    imports, the model, the data, the ranks; the first compilation is in the first step."""
    noise_scale_readings: dict[str, NoiseScaleReading] | None = None
    """Each network's noise scale over the last quarter as a reader may act on it: a value where
    resolved, else a lower bound, with the standard error of |G|^2 (`trainspeed.gradients.rows`).
    None where not measured, and in summaries written before (`last_quarter_noise_scale`)."""
    init_from: InitFrom | None = None
    """The checkpoint of another run this run started from (`--init-from`; None: from the workload's
    own initialisation)."""
    batch_schedule: ScheduleSummary | None = None
    """The run's batch schedule (None: a fixed batch); `global_batch` and `batch_size_per_device`
    are then the last step's, `samples` this invocation's at every batch."""
    data: dict | None = None
    """What the run read (`trainspeed.data.sources.DataSource`): its format, path, file count, a
    content fingerprint and what it covers, and the bad samples its loaders skipped in this
    invocation, all ranks (`--bad-samples skip`); None for synthetic data."""
    diverged_at_step: int | None = None
    """The first step whose training loss was not finite (NaN or infinite): the run diverged there
    and stopped at `last_step`, the first logged window, checkpoint or validation after it, without
    validating or checkpointing weights that loss stepped (`trainspeed.train.loop`). A goal it had
    counts as not reached. None: every loss was a number."""

    @property
    def diverged(self) -> bool:
        return self.diverged_at_step is not None

    def last_quarter_noise_scale(self) -> dict[str, NoiseScaleReading]:
        """Each network's noise scale over the last quarter; a summary written before readings
        were assessed gives its values as not assessed (`resolved` None)."""
        if self.noise_scale_readings is not None:
            return dict(self.noise_scale_readings)
        return {name: NoiseScaleReading(value, None, None) for name, value in (self.noise_scale or {}).items()}

    def noise_scale_text(self) -> str | None:
        """`policy 1,951` or `policy > 265 (unresolved: ...)` per network; None where not measured."""
        readings = self.last_quarter_noise_scale()
        return ", ".join(f"{name} {reading.text()}" for name, reading in readings.items()) or None

    def provenance(self, command: str) -> Provenance:
        """The provenance of a row about this run, written by `command`: the run's workload and machine."""
        return Provenance(command=command, workload_module=self.workload_module,
                          workload_version=self.workload_version, workload_sha256=self.workload_sha256,
                          machine=self.machine)

    def write(self, run_dir: Path) -> Path:
        path = Path(run_dir) / SUMMARY_FILE
        atomic_write_text(path, json.dumps(row_record(self), indent=2, sort_keys=True) + "\n")
        return path

    def lines(self) -> list[str]:
        """The human summary printed at the end of a run."""
        text = [
            f"trained {self.workload}/{self.size} on {self.target} x{self.world_size}: steps {self.first_step}..{self.last_step}, "
            f"global batch {self.global_batch} ({self.batch_size_per_device}/device)",
            f"end-to-end {self.end_to_end_samples_per_s:,.1f} samples/s over {self.wall_s:.1f} s"
            + (f"; steady {self.steady_samples_per_s:,.1f} samples/s" if self.steady_samples_per_s else ""),
            f"step {self.step_time_s * 1e3:.1f} ms, data wait {self.data_wait_fraction:.1%} "
            f"(worst rank {self.data_wait_fraction_worst_rank:.1%}"
            + (f", steady {self.steady_data_wait_fraction:.1%}" if self.steady_data_wait_fraction is not None else "")
            + f"), H2D {self.h2d_s_per_step * 1e3:.2f} ms/step, "
            f"loss {'–' if self.final_loss is None else format(self.final_loss, '.4f')}",
        ]
        if self.diverged:
            text.append(f"diverged: the training loss was not finite at step {self.diverged_at_step}; the run stopped "
                        f"at step {self.last_step}, its weights neither validated nor checkpointed (a smaller --lr "
                        "may train)")
        if self.data and self.data.get("skipped"):
            text.append(f"data: {self.data['skipped']:,} unreadable samples skipped (--bad-samples skip)")
        if self.validation:
            text.append("validation: " + ", ".join(f"{name} {value:.4g}" for name, value in self.validation.items()))
        if self.init_from is not None:
            text.append(self.init_from.line())
        if self.time_to_target is not None:
            text.append(self.time_to_target.line())
        if self.batch_schedule is not None:
            text.append(self.batch_schedule.line())
        noise = self.noise_scale_text()
        if noise:
            text.append(f"gradient noise scale B_simple (last quarter): {noise}")
        if self.io_efficiency is not None:
            text.append(
                f"IO efficiency {self.io_efficiency:.3f} (per device {self.samples_per_s_per_device:,.1f} "
                f"vs bench {self.bench_samples_per_s:,.1f} samples/s)"
            )
        return text


@dataclass(frozen=True)
class InitFrom:
    """Where a run started from another run's checkpoint (`--init-from`): the networks and optimizer
    states it loaded were that run's at `step`, after `samples` of its samples; its steps, batch,
    learning rate, seed and data order are its own (`trainspeed.train.init_from`)."""

    run_dir: str
    """The run the checkpoint belongs to."""
    checkpoint: str
    """The checkpoint file."""
    step: int
    samples: int
    """The samples that run had trained at `step`."""
    global_batch: Batch
    """That run's global batch at `step`."""

    def line(self) -> str:
        return (f"started from {self.checkpoint} (step {self.step}, {self.samples:,} samples at global batch "
                f"{self.global_batch} of {self.run_dir})")


@dataclass(frozen=True)
class WindowRecord:
    """One `kind: train` row of metrics.jsonl (all ranks reduced)."""

    KIND: ClassVar[str] = "train"
    SCHEMA_VERSION: ClassVar[int] = 1

    step: int
    epoch: int
    loss: Loss
    lr: NonNegative
    samples_per_s: NonNegative
    step_time_s: NonNegative
    data_wait_s_per_step: NonNegative
    data_wait_fraction: NonNegative
    data_wait_fraction_worst_rank: NonNegative
    h2d_s_per_step: NonNegative
    elapsed_s: NonNegative
    """Training seconds of this invocation up to this row."""
    run_train_s: NonNegative | None = None
    """Training seconds of the whole run up to this row, every invocation before it included (a
    resume reads the rows a killed invocation logged after its checkpoint to count what it lost)."""
    run_wall_s: NonNegative | None = None
    """The same with validation and checkpoint pauses."""
    samples: int | None = None
    """Samples the run trained up to this row (None in rows written before runs recorded them)."""
    global_batch: Batch | None = None
    """The global batch of the window's steps (a batch schedule closes a window at each switch)."""
    holds_switch: bool = False
    """The window holds steps that settle a batch schedule's new batch (its compilations): they are
    kept out of the steady-state samples/s."""
    compilations: int = 0
    """Graphs the target compiled in the window's steps, on rank 0 (0 where it compiles none)."""


@dataclass(frozen=True)
class EvalRecord:
    """One `kind: val` row of metrics.jsonl: the step and the workload's metrics, whatever their
    names (the row holds them beside `step`, as TensorBoard's `val/<name>` scalars do)."""

    KIND: ClassVar[str] = "val"
    SCHEMA_VERSION: ClassVar[int] = 1

    step: int
    metrics: dict[str, float]

    def as_row(self) -> dict[str, Any]:
        return {KIND: self.KIND, VERSION: self.SCHEMA_VERSION, "step": self.step, **self.metrics}

    @classmethod
    def from_row(cls, record: dict[str, Any], source: Source) -> "EvalRecord":
        kind, version = record_kind(record, source)
        if (kind, version) != (cls.KIND, cls.SCHEMA_VERSION):
            raise UsageError(f"{source}: a {kind} row of schema_version {version} where a {cls.KIND} row of "
                             f"version {cls.SCHEMA_VERSION} belongs")
        step = record.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            raise UsageError(f"{source}: val row: field step must be an integer, not {step!r}")
        metrics = {name: value for name, value in record.items() if name not in (KIND, VERSION, "step")}
        wrong = [name for name, value in metrics.items()
                 if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool))]
        if wrong:
            raise UsageError(f"{source}: val row: metric {wrong[0]} must be a number, not {metrics[wrong[0]]!r}")
        return cls(step=step, metrics={name: float(value) for name, value in metrics.items() if value is not None})


@dataclass(frozen=True)
class TimeToTargetRecord:
    """One `kind: time-to-target` row: the first validation that met `--until`, bracketed by the
    one before it; or, where the run ended short of it (`reached` false), its end and best value.
    Seconds are the run's over every invocation (`trainspeed.train.time_to_target`)."""

    KIND: ClassVar[str] = "time-to-target"
    SCHEMA_VERSION: ClassVar[int] = 1

    until: str
    metric: str
    reached: bool
    step: int
    """The crossing's step (not reached: the last step so far)."""
    samples: int
    value: float | None
    """The metric at the crossing (None: not reached)."""
    train_s: NonNegative
    """Training seconds to the crossing: the clock of samples/s, validation and checkpoints left out."""
    wall_s: NonNegative
    """The same with validation and checkpoint pauses: the seconds a user waited from the first step."""
    previous_step: int | None
    previous_samples: int | None
    previous_value: float | None
    previous_train_s: NonNegative | None
    previous_wall_s: NonNegative | None
    best_value: float | None
    best_step: int | None
    resumes: int
    """How often the run was resumed before this row."""
    lost_train_s: NonNegative
    """Training seconds of invocations killed after their last checkpoint (counted in `train_s`)."""
    lost_wall_s: NonNegative
    global_batch: Batch
    world_size: Batch
    target: str

    def crossing_samples(self, threshold: float) -> float | None:
        """The samples at which the metric met `threshold`, linear between the validation that met
        it and the one before (that validation's own samples where there is none before); None:
        not reached. Resolves the crossing finer than the validations' spacing."""
        if not self.reached or self.value is None:
            return None
        if self.previous_samples is None or self.previous_value is None or self.value == self.previous_value:
            return float(self.samples)
        share = (threshold - self.previous_value) / (self.value - self.previous_value)
        return self.previous_samples + min(1.0, max(0.0, share)) * (self.samples - self.previous_samples)

    def crossing_step(self, threshold: float) -> float | None:
        """The steps to the crossing, linear between the validation that met the goal and the one
        before in samples, as `crossing_samples` (a growing batch's steps are not its samples over
        one batch); None: not reached."""
        samples = self.crossing_samples(threshold)
        if samples is None:
            return None
        if self.previous_step is None or self.previous_samples is None or self.samples == self.previous_samples:
            return float(self.step)  # the crossing is that validation's own samples
        share = (samples - self.previous_samples) / (self.samples - self.previous_samples)
        return self.previous_step + share * (self.step - self.previous_step)

    def line(self) -> str:
        resumed = f"; resumed {self.resumes}x, {self.lost_wall_s:.1f} s redone" if self.resumes else ""
        if not self.reached:
            best = (f"best {self.best_value:.4g} at step {self.best_step}" if self.best_value is not None
                    else "no validation yet")
            return f"time to target {self.until}: not reached within {self.samples:,} samples ({best}){resumed}"
        before = (f"; the validation before, at step {self.previous_step}, had {self.previous_value:.4g}"
                  if self.previous_value is not None else "")
        return (f"time to target {self.until}: reached at step {self.step} ({self.samples:,} samples) with "
                f"{self.value:.4g} after {self.train_s:.1f} s of training, {self.wall_s:.1f} s with validation "
                f"and checkpoints{before}{resumed}")
