"""The scaling study's rows: one per training run, and what a run is compared with (its own
study's runs only: the same configuration on one rank, and the same loop on synthetic data)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import ClassVar, Sequence

from trainspeed.machine import Machine
from trainspeed.studies.common import now
from trainspeed.train.rows import RunSummary

ROWS_FILE = "scaling.jsonl"
DATA_KINDS = ("real", "synthetic")


@dataclass(frozen=True)
class ScalingRunRow:
    """One training run of a scaling study. Fields are None only in rows converted from older
    files that did not record them."""

    KIND: ClassVar[str] = "scaling-run"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    """One invocation of the study: only its runs are compared with each other."""
    repeat: int
    data: str
    """"real" (the dataset) or "synthetic" (`--synthetic-data`: the same loop, no data IO)."""
    workload: str
    size: str
    target: str
    world_size: int
    batch_size_per_device: int
    steps: int | None
    threads_per_rank: int | None
    loader_workers_per_rank: int | None
    steady_samples_per_s: float | None
    """All ranks' samples/s after the timing warm-up steps."""
    end_to_end_samples_per_s: float | None
    samples_per_s_per_device: float | None
    data_wait_fraction: float | None
    data_wait_fraction_worst_rank: float | None
    steady_data_wait_fraction: float | None
    step_time_s: float | None
    h2d_s_per_step: float | None
    bench_samples_per_s: float | None
    """The bench's samples/s of the same workload, target and per-device batch, in this study."""
    workload_module: str | None = None
    workload_version: str | None = None
    workload_sha256: str | None = None
    run_dir: str | None = None
    timestamp: str | None = None
    command: str | None = None
    cpu_s_per_wall_s: float | None = None
    machine: Machine | None = None

    @property
    def global_batch(self) -> int:
        return self.world_size * self.batch_size_per_device

    @classmethod
    def from_summary(cls, summary: RunSummary, *, study_id: str, repeat: int, run_dir: str, command: str) -> "ScalingRunRow":
        return cls(
            study_id=study_id, repeat=repeat, data="synthetic" if summary.synthetic_data else "real",
            workload=summary.workload, size=summary.size, target=summary.target, world_size=summary.world_size,
            batch_size_per_device=summary.batch_size_per_device, steps=summary.last_step - summary.first_step,
            threads_per_rank=summary.threads, loader_workers_per_rank=summary.num_workers,
            steady_samples_per_s=summary.steady_samples_per_s,
            end_to_end_samples_per_s=summary.end_to_end_samples_per_s,
            samples_per_s_per_device=summary.samples_per_s_per_device,
            data_wait_fraction=summary.data_wait_fraction,
            data_wait_fraction_worst_rank=summary.data_wait_fraction_worst_rank,
            steady_data_wait_fraction=summary.steady_data_wait_fraction, step_time_s=summary.step_time_s,
            h2d_s_per_step=summary.h2d_s_per_step, bench_samples_per_s=summary.bench_samples_per_s,
            run_dir=run_dir, timestamp=now(), cpu_s_per_wall_s=summary.cpu_s_per_wall_s,
            **summary.provenance(command).fields_of(cls),
        )


def scaling_key(row: ScalingRunRow) -> tuple:
    """Runs with one key are repeats of one configuration of one study (the rank count last)."""
    return (row.study_id, row.workload, row.workload_sha256, row.size, row.target, row.batch_size_per_device,
            row.data, row.world_size)


def vs_one_rank(rows: Sequence[ScalingRunRow], row: ScalingRunRow) -> float | None:
    """End-to-end samples/s of `row`'s configuration over that of one rank (the study's N devices
    against one), medians of the repeats, both of `row`'s own study."""
    def rate(world_size: int) -> float | None:
        values = [r.end_to_end_samples_per_s for r in rows if scaling_key(r) == (*scaling_key(row)[:-1], world_size)
                  and r.end_to_end_samples_per_s is not None]
        return statistics.median(values) if values else None

    mine, one = rate(row.world_size), rate(1)
    return mine / one if mine and one else None


def has_more_ranks(rows: Sequence[ScalingRunRow], row: ScalingRunRow) -> bool:
    """Whether `row`'s study ran its configuration on more ranks than `row`'s, to compare with."""
    return any(scaling_key(other)[:-1] == scaling_key(row)[:-1] and other.world_size > row.world_size for other in rows)


def median_per_device(rows: Sequence[ScalingRunRow], batch: int, world_size: int, data: str) -> float | None:
    """The median per-device samples/s over the repeats of one configuration (None: not measured)."""
    values = [row.samples_per_s_per_device for row in rows
              if (row.batch_size_per_device, row.world_size, row.data) == (batch, world_size, data)
              and row.samples_per_s_per_device is not None]
    return statistics.median(values) if values else None


def io_efficiency(rows: Sequence[ScalingRunRow], batch: int, world_size: int) -> float | None:
    """Real-data per-device samples/s over synthetic-data per-device samples/s (medians of the
    repeats) of one study's rows: what reading the data cost."""
    real, synthetic = (median_per_device(rows, batch, world_size, data) for data in DATA_KINDS)
    return real / synthetic if real and synthetic else None
