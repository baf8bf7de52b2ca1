"""The run summary: end-to-end samples/s, where the time went, quality, and the IO efficiency.

IO efficiency = (steady-state train samples/s per device) / (bench samples/s of the same workload,
size, target and per-device batch). The bench measures the step alone (no data IO, no gradient
all-reduce), so 1.0 means reading data and synchronising ranks cost nothing. The same ratio against
a `--synthetic-data` run of this loop isolates the data IO alone (benchmarks/bench_train_scaling.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from trainspeed.atomic import atomic_write_text
from trainspeed.bench.environment import Machine
from trainspeed.bench.results import read_rows
from trainspeed.errors import UsageError
from trainspeed.rows import parse_row, read_records, row_record

SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class RunSummary:
    """One invocation of a run (`summary.json`, and the last row of `metrics.jsonl`)."""

    KIND: ClassVar[str] = "train-summary"
    SCHEMA_VERSION: ClassVar[int] = 1

    workload: str
    size: str
    target: str
    world_size: int
    batch_size_per_device: int
    global_batch: int
    synthetic_data: bool
    num_workers: int
    threads: int | None
    first_step: int
    last_step: int
    samples: int
    wall_s: float
    """Host time from the first to the last step, all ranks, less `paused_s`."""
    paused_s: float | None
    """Validation passes and checkpoints between steps (not training, so not in `wall_s`); None only
    in summaries converted from files that did not record it."""
    end_to_end_samples_per_s: float
    """All samples of this invocation over the wall time from the first to the last step, all ranks."""
    steady_samples_per_s: float | None
    """The same after the first `timing_warmup_steps` steps (None when the run is shorter)."""
    samples_per_s_per_device: float
    step_time_s: float
    data_wait_fraction: float
    data_wait_fraction_worst_rank: float
    steady_data_wait_fraction: float | None
    """Data wait over the steady-state steps only (the loader's start-up left out), mean over ranks."""
    h2d_s_per_step: float
    final_loss: float
    validation: dict[str, float] | None
    """The workload's validation metrics at the last step (None: no validation ran)."""
    bench_samples_per_s: float | None
    io_efficiency: float | None
    stopped_by_signal: bool
    torch_version: str
    learning_rates: dict | None = None
    """How the peak LR of each optimizer came about (`trainspeed.train.lr_schedule.LearningRates`):
    the LR given (--lr or the workload's), the scaling rule, reference and global batch, the peak."""
    workload_module: str | None = None
    """The workload's identity (`trainspeed.workloads.identity`): module, version, definition hash."""
    workload_version: str | None = None
    workload_sha256: str | None = None
    cpu_s_per_wall_s: float | None = None
    """Rank 0's process CPU seconds per wall second from its first to its last step (its loader
    workers are processes of their own and not counted)."""
    machine: Machine | None = None
    """Rank 0's machine, with the load average at the first and the last step."""

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
            f"loss {self.final_loss:.4f}",
        ]
        if self.validation:
            text.append("validation: " + ", ".join(f"{name} {value:.4g}" for name, value in self.validation.items()))
        if self.io_efficiency is not None:
            text.append(
                f"IO efficiency {self.io_efficiency:.3f} (per device {self.samples_per_s_per_device:,.1f} "
                f"vs bench {self.bench_samples_per_s:,.1f} samples/s)"
            )
        return text


def read_summary(path: Path) -> RunSummary:
    """A run's `summary.json`; UsageError naming the file when it holds no run summary."""
    records = read_records(path)
    if len(records) != 1:
        raise UsageError(f"{path}: not a run summary (one JSON object)")
    summary, _ = parse_row(RunSummary, *records[0])
    return summary


def bench_samples_per_s(path: str | Path, workload: str, size: str, target: str, batch_size: int) -> float:
    """The bench's samples/s for one configuration (the newest matching `ok` row)."""
    try:
        rows = read_rows(Path(path))
    except UsageError as error:
        raise UsageError(f"train: --bench-jsonl: {error}") from None
    matching = [
        row for row in rows
        if (row.workload, row.size, row.target, row.batch_size, row.status) == (workload, size, target, batch_size, "ok")
    ]
    if not matching:
        raise UsageError(
            f"train: --bench-jsonl {path} has no ok row for {workload}/{size} on {target} at batch {batch_size}; "
            "run `trainspeed bench` for that configuration first"
        )
    return float(matching[-1].samples_per_s)
