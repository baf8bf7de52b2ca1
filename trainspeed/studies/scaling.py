"""Finding 3: N ranks end to end, each reading its own data, against one; and the IO efficiency.

For every per-device batch size the study runs, interleaved (so a machine's load drifts hit every
configuration alike), `trainspeed train` for each rank count with real data and with synthetic
data (`--synthetic-data`: the same loop without data IO), after one `trainspeed bench` of the same
target and batch. Every rank gets the same threads and loader workers.

IO efficiency is read two ways, per device and from steady-state samples/s:
  vs synthetic: real-data run / synthetic-data run of the same loop (the cost of data IO alone);
  vs bench:     real-data run / bench samples/s (data IO + gradient all-reduce + the loop, and on
                a machine with few cores also the CPU that ranks and loader workers share).
Writes OUT/scaling.jsonl (one row per training run) and OUT/scaling_bench.jsonl (the bench rows);
the runs stay in OUT/scaling_runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

from trainspeed.bench.environment import Machine
from trainspeed.errors import UsageError
from trainspeed.rows import append_row
from trainspeed.studies.common import COMMAND_START_S, Progress, no_progress, now, positive_ints, run_trainspeed
from trainspeed.train.summary import SUMMARY_FILE, RunSummary, read_summary

NAME = "scaling"
HELP = "finding 3: N ranks end to end with their own data loading against one rank; the IO efficiency"
ROWS_FILE = "scaling.jsonl"
BENCH_FILE = "scaling_bench.jsonl"
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
            workload_module=summary.workload_module, workload_version=summary.workload_version,
            workload_sha256=summary.workload_sha256, run_dir=run_dir, timestamp=now(), command=command,
            cpu_s_per_wall_s=summary.cpu_s_per_wall_s, machine=summary.machine,
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


@dataclass(frozen=True)
class ScalingConfig:
    out: str
    data: str
    """Self-play shards of the workload; made (`trainspeed data mahjong-selfplay`) when missing."""
    size: str = "tiny"
    target: str = "cpu:eager:fp32"
    ranks: tuple[int, ...] = (1, 2)
    batch_sizes: tuple[int, ...] = (256, 1024, 4096)
    """Per-device batch sizes."""
    steps: int = 30
    repeats: int = 2
    threads: int = 1
    num_workers: int = 1
    timing_warmup_steps: int = 5
    make_data_games: int = 150

    def check(self) -> None:
        if 1 not in self.ranks:
            raise UsageError(f"scaling study: --ranks {','.join(map(str, self.ranks))} must include 1, "
                             "the run every other is compared with")
        if self.steps <= self.timing_warmup_steps:
            raise UsageError(f"scaling study: --steps {self.steps} must exceed the {self.timing_warmup_steps} "
                             "timing warm-up steps")
        for flag, value, least in (("--repeats", self.repeats, 1), ("--threads", self.threads, 1),
                                   ("--num-workers", self.num_workers, 0), ("--timing-warmup-steps", self.timing_warmup_steps, 0)):
            if value < least:
                raise UsageError(f"scaling study: {flag} must be at least {least}, got {value}")


PRESETS = {
    "smoke": dict(ranks=(1, 2), batch_sizes=(32,), steps=4, repeats=1, timing_warmup_steps=1, make_data_games=22),
    "quick": dict(batch_sizes=(256, 1024), steps=20, repeats=1, make_data_games=60),
    "full": {},
}


def units(config: ScalingConfig) -> int:
    return 1 + len(config.batch_sizes) * (1 + config.repeats * len(config.ranks) * len(DATA_KINDS))


def estimate_s(config: ScalingConfig) -> float:
    """Seconds on a 2-core CPU at the tiny size: a command's start, ~10 s more for torchrun's ranks,
    ~1,500 samples/s per rank, ~15 s per bench, ~1 game/s of self-play data."""
    runs = sum(COMMAND_START_S + 10 * (ranks > 1) + config.steps * batch * ranks / 1500
               for batch in config.batch_sizes for ranks in config.ranks)
    data = 0 if (Path(config.data) / "index.json").exists() else COMMAND_START_S + config.make_data_games
    return data + (COMMAND_START_S + 15) * len(config.batch_sizes) + config.repeats * len(DATA_KINDS) * runs


def _make_data(config: ScalingConfig) -> None:
    if (Path(config.data) / "index.json").exists():
        return
    run_trainspeed("data", "mahjong-selfplay", "--games", str(config.make_data_games), "--workers", "2",
                   "--out", config.data, "--seed", "0", "--no-progress")


def _train_args(config: ScalingConfig, batch: int, ranks: int, data: str, run_dir: Path, bench: Path) -> list[str]:
    source = ["--synthetic-data"] if data == "synthetic" else ["--data", config.data]
    return ["train", "--workload", "mahjong", "--size", config.size, *source, "--target", config.target,
            "--nproc", str(ranks), "--batch-size-per-device", str(batch), "--steps", str(config.steps),
            "--threads", str(config.threads), "--num-workers", str(config.num_workers),
            "--timing-warmup-steps", str(config.timing_warmup_steps), "--log-every", str(max(1, config.steps // 3)),
            "--bench-jsonl", str(bench), "--out", str(run_dir), "--no-progress"]


def run(config: ScalingConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    config.check()
    out = Path(config.out)
    rows_path, bench_path, runs = out / ROWS_FILE, out / BENCH_FILE, out / "scaling_runs"
    study_id = f"scaling-{int(time.time())}"
    _make_data(config)
    progress(1, "scaling: benchmarking the step")
    for batch in config.batch_sizes:
        run_trainspeed("bench", "--workload", "mahjong", "--size", config.size, "--targets", config.target,
                       "--batch-sizes", str(batch), "--threads", str(config.threads), "--run-id", study_id,
                       "--out", str(bench_path), "--no-plot", "--no-progress")
        progress(1, f"scaling: bench at batch {batch}")
    rows: list[ScalingRunRow] = []
    for repeat in range(config.repeats):
        for batch in config.batch_sizes:
            for ranks in config.ranks:
                for data in DATA_KINDS:
                    run_dir = runs / f"{study_id}-r{repeat}-b{batch}-n{ranks}-{data}"
                    args = _train_args(config, batch, ranks, data, run_dir, bench_path)
                    run_trainspeed(*args)
                    row = ScalingRunRow.from_summary(read_summary(run_dir / SUMMARY_FILE), study_id=study_id,
                                                     repeat=repeat, run_dir=str(run_dir), command=command)
                    append_row(rows_path, row)
                    rows.append(row)
                    progress(1, f"scaling: {ranks} rank(s), batch {batch}/device, {data} data")
    for batch in config.batch_sizes:
        for ranks in config.ranks:
            efficiency = io_efficiency(rows, batch, ranks)
            print(f"scaling: batch {batch}/device, {ranks} rank(s): IO efficiency vs synthetic "
                  + (f"{efficiency:.3f}" if efficiency else "-"), flush=True)
    return [rows_path, bench_path]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="self-play shards; made when missing (default: OUT/scaling_data)")
    parser.add_argument("--size", default=None, help="Mahjong size (default tiny)")
    parser.add_argument("--target", default=None, help="target of every rank (default cpu:eager:fp32)")
    parser.add_argument("--ranks", default=None, help="rank counts, 1 among them (default 1,2)")
    parser.add_argument("--batch-sizes", default=None, help="per-device batch sizes, e.g. 256,1024,4096")
    parser.add_argument("--steps", type=int, default=None, help="steps per run")
    parser.add_argument("--repeats", type=int, default=None, help="repeats of every configuration")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per rank (default 1)")
    parser.add_argument("--num-workers", type=int, default=None, help="loader workers per rank (default 1)")
    parser.add_argument("--timing-warmup-steps", type=int, default=None,
                        help="steps left out of the steady-state samples/s (default 5)")


def preset_config(preset: str, out: Path) -> ScalingConfig:
    return ScalingConfig(out=str(out), data=str(out / "scaling_data"), **PRESETS[preset])  # type: ignore[arg-type]


def config_from_args(args: argparse.Namespace, out: Path) -> ScalingConfig:
    values: dict[str, object] = dict(PRESETS[args.preset])
    for name in ("size", "target", "steps", "repeats", "threads", "num_workers", "timing_warmup_steps"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.ranks is not None:
        values["ranks"] = positive_ints(args.ranks, "--ranks")
    if args.batch_sizes is not None:
        values["batch_sizes"] = positive_ints(args.batch_sizes, "--batch-sizes")
    config = ScalingConfig(out=str(out), data=args.data or str(out / "scaling_data"), **values)  # type: ignore[arg-type]
    config.check()
    return config
