"""`trainspeed data bench DATA --workload W --workers 1,2,4`: is the device fed?

For each worker count, the rank's loader reads `DATA` where it lies, as `trainspeed train` would
(the workload's `open_dataset`: decoding, crop and augmentation on the loader's workers), and its
samples/s is timed after the first batch (the workers' start-up). Beside it stands the samples/s a
training step of the workload consumes at the same batch: from a bench rows file (`--bench-rows`,
the fastest measured row of the workload, size and batch), or else from a quick bench of the step
on `--target` (a few short windows, the host feed: each step copies its batch as training does).
The rows (`trainspeed.bench.data_feed_report.DataBenchRow`) say how many workers keep the step fed.

Everything that can be refused is refused before anything is measured: the data (opened as the
workload opens it), the workload and its size, the rows files.
"""

from __future__ import annotations

import datetime
import gc
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import torch

from trainspeed.atomic import check_writable_directory
from trainspeed.bench.config import TimingPlan
from trainspeed.bench.data_feed_report import DataBenchRow
from trainspeed.bench.feed import make_feed
from trainspeed.bench.results import read_rows
from trainspeed.bench.timing import time_training
from trainspeed.data.base import LoaderConfig
from trainspeed.data.sources import detect_format
from trainspeed.errors import UsageError
from trainspeed.machine import Machine
from trainspeed.rows import append_row
from trainspeed.targets import get_target
from trainspeed.user_json import check_rows_file
from trainspeed.workloads import get_workload, resolve_size
from trainspeed.workloads.base import Workload

QUICK_PLAN = TimingPlan(warmup_steps=2, windows=3, min_window_s=0.3)
"""The quick bench of the step: a few short windows, enough to tell a fed device from a starved one."""


@dataclass(frozen=True)
class DataBenchConfig:
    data: Path
    workload: str
    size: str | None = None
    workers: list[int] = field(default_factory=lambda: [1, 2, 4])
    batch_size: int = 32
    batches: int = 20
    """Batches timed per worker count, after the first."""
    bench_rows: Path | None = None
    target: str = "cpu:eager:fp32"
    """Where the quick bench times the step (without --bench-rows)."""
    out: Path = Path("results/data_bench.jsonl")
    seed: int = 0
    bad_samples: str = "refuse"
    threads: int = 1
    """torch threads of the step (and of a loader with 0 workers), as `trainspeed train` sets them
    per rank; each loader worker runs one."""
    command: str | None = None

    def __post_init__(self) -> None:
        if not self.workers or min(self.workers) < 0:
            raise UsageError("--workers: give worker counts of 0 or more, e.g. --workers 1,2,4")
        if self.batch_size < 1 or self.batches < 1:
            raise UsageError("--batch-size and --batches must be at least 1")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def step_from_rows(path: Path, workload: Workload, size: str, batch_size: int) -> float:
    """The fastest measured samples/s of the workload at this size and batch in a bench rows file."""
    try:
        rows = read_rows(path)
    except UsageError as error:
        raise UsageError(f"--bench-rows: {error}") from None
    matching = [row.samples_per_s for row in rows if row.workload == workload.name and row.size == size
                and row.batch_size == batch_size and row.is_measured and row.samples_per_s is not None]
    if not matching:
        have = sorted({f"{row.workload} {row.size} batch {row.batch_size}" for row in rows if row.is_measured})
        raise UsageError(f"--bench-rows {path}: no measured row of {workload.name} {size} at batch {batch_size}"
                         f" (it has {', '.join(have[:5]) or 'none'}); bench that batch, or drop --bench-rows "
                         "for a quick bench")
    return max(matching)


def quick_step(config: DataBenchConfig, workload: Workload, size: str) -> float:
    """Samples/s of the workload's training step on `config.target`, each step fed a host batch."""
    target = get_target(config.target)
    trainable = target.build(workload, size, config.seed)
    feed = make_feed("host", target, workload, size, config.batch_size, config.seed)
    timing = time_training(target, trainable, feed.next_batch, QUICK_PLAN)
    del trainable, feed
    target.free_memory()
    return config.batch_size / timing.median_step_s


def open_loader(config: DataBenchConfig, workload: Workload, size: str, workers: int):
    return workload.open_dataset(str(config.data), size, LoaderConfig(
        batch_size=config.batch_size, num_workers=workers, seed=config.seed, bad_samples=config.bad_samples))


@dataclass(frozen=True)
class LoaderTiming:
    samples: int
    batches: int
    seconds: float
    skipped: int


def check_one_batch(loader, config: DataBenchConfig) -> None:
    """UsageError where the data's training split (what the loader reads, as `train` does) holds
    no whole batch: the loader would yield nothing to time. The line gives the split's samples
    and the batch apart, and the batch that fits."""
    if len(loader) > 0:
        return
    samples = loader.num_samples
    fix = f"give --batch-size {samples} or less" if samples else "give data with training samples"
    raise UsageError(f"{config.data}: its training split holds {samples:,} sample{'s' if samples != 1 else ''}, "
                     f"fewer than one batch of {config.batch_size:,} (--batch-size); {fix}")


def time_loader(loader, batches: int) -> LoaderTiming:
    """Samples/s of `loader` over `batches` batches after its first, across epochs if it must
    (`check_one_batch` has made sure it yields one)."""
    epoch, samples, timed, started = 0, 0, 0, None
    while timed < batches:
        loader.set_epoch(epoch)
        for batch in loader:
            if started is None:  # the first batch waits for the workers to start
                started = time.perf_counter()
                continue
            samples += len(next(iter(batch.values())))
            timed += 1
            if timed == batches:
                break
        epoch += 1
    seconds = time.perf_counter() - started
    record = getattr(loader, "data_record", None)
    skipped = (record() or {}).get("skipped", 0) if record is not None else 0
    return LoaderTiming(samples, timed, seconds, int(skipped))


def check_out(path: Path) -> None:
    if path.is_dir():
        raise UsageError(f"--out {path} is a directory; name a rows file in it, e.g. {path / 'data_bench.jsonl'}")
    check_rows_file(path, f"--out {path}", kinds=(DataBenchRow.KIND,))
    check_writable_directory(path.parent, f"--out {path}")


def run_data_bench(config: DataBenchConfig, report=print) -> list[DataBenchRow]:
    """Time the loader per worker count beside the step (module docstring); rows appended to
    `config.out`, one whole line each."""
    data_format = detect_format(config.data)
    workload = get_workload(config.workload)
    size = resolve_size(workload, config.size)
    check_out(config.out)
    loader = open_loader(config, workload, size, 0)  # refuses bad data before anything is timed
    check_one_batch(loader, config)
    del loader
    torch.set_num_threads(config.threads)
    if config.bench_rows is not None:
        step, source = step_from_rows(config.bench_rows, workload, size, config.batch_size), str(config.bench_rows)
    else:
        step, source = quick_step(config, workload, size), f"quick bench on {config.target} (host feed)"
    report(f"step: {step:,.1f} samples/s ({source})")
    run_id = uuid.uuid4().hex[:12]
    rows = []
    for workers in config.workers:
        machine = Machine.at_start()
        loader = open_loader(config, workload, size, workers)
        timing = time_loader(loader, config.batches)
        del loader
        gc.collect()  # the persistent workers stop with their loader, before the next count starts its own
        row = DataBenchRow(
            run_id=run_id, timestamp=_now(), data=str(config.data), data_format=data_format, workload=workload.name,
            size=size, batch_size=config.batch_size, workers=workers,
            loader_samples_per_s=timing.samples / timing.seconds, loader_batches=timing.batches,
            loader_s=timing.seconds, step_samples_per_s=step, step_source=source, skipped=timing.skipped,
            command=config.command, machine=machine.at_end())
        append_row(config.out, row)
        rows.append(row)
        report(f"{workers} worker{'s' if workers != 1 else ''}: loader {row.loader_samples_per_s:,.1f} samples/s"
               f" ({'fed' if row.fed else 'starved'})")
    return rows

