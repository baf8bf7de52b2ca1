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
import time
from pathlib import Path

from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.rows import append_row
from trainspeed.studies.checks import (
    check_mahjong_settings,
    check_study_data,
    data_ready,
    selfplay_workers,
)
from trainspeed.studies.common import (
    COMMAND_START_S,
    Progress,
    no_progress,
    run_trainspeed,
)
from trainspeed.studies.face import preset_settings
from trainspeed.studies.scaling.config import PRESETS, ScalingConfig
from trainspeed.studies.scaling.rows import (
    DATA_KINDS,
    ROWS_FILE,
    ScalingRunRow,
    io_efficiency,
)
from trainspeed.train.config import LaunchConfig, TrainConfig
from trainspeed.train.flags import train_command
from trainspeed.train.runs import read_run_summary

BENCH_FILE = "scaling_bench.jsonl"
DATA_SEED = 0
"""The seed of the self-play data the study makes when its --data has none."""


def units(config: ScalingConfig) -> int:
    return 1 + len(config.batch_sizes) * (1 + config.repeats * len(config.ranks) * len(DATA_KINDS))


def estimate_s(config: ScalingConfig) -> float:
    """Seconds on a 2-core CPU at the tiny size: a command's start, ~10 s more for torchrun's ranks,
    ~1,500 samples/s per rank, ~15 s per bench, ~1 game/s of self-play data."""
    runs = sum(COMMAND_START_S + 10 * (ranks > 1) + config.steps * batch * ranks / 1500
               for batch in config.batch_sizes for ranks in config.ranks)
    data = 0 if data_ready(config.data) else COMMAND_START_S + config.make_data_games
    return data + (COMMAND_START_S + 15) * len(config.batch_sizes) + config.repeats * len(DATA_KINDS) * runs


def _make_data(config: ScalingConfig) -> None:
    if data_ready(config.data):
        return
    run_trainspeed("data", "mahjong-selfplay", "--games", str(config.make_data_games), "--workers", selfplay_workers(),
                   "--out", config.data, "--seed", str(DATA_SEED), "--no-progress")


def run_config(config: ScalingConfig, batch: int, ranks: int, data: str, run_dir: Path, bench: Path) -> TrainConfig:
    """The TrainConfig of one run: `ranks` ranks at `batch` per device, on the study's data or on
    synthetic batches (the same loop without data IO), its IO efficiency against `bench`."""
    synthetic = data == "synthetic"
    return TrainConfig(
        workload="mahjong", size=config.size, data=None if synthetic else config.data, synthetic_data=synthetic,
        target=config.target, launch=LaunchConfig(nproc=ranks), batch_size_per_device=batch, steps=config.steps,
        threads=config.threads, num_workers=config.num_workers, timing_warmup_steps=config.timing_warmup_steps,
        log_every=max(1, config.steps // 3), bench_jsonl=str(bench), out_dir=str(run_dir), progress=False)


def check_processes(config: ScalingConfig) -> None:
    """A rank count is a count of processes, at most the CPUs, for a target of one process per device;
    for a target that drives every device from one process (xla:*, jax:*) it counts devices."""
    from trainspeed.flags import machine_cpus
    from trainspeed.targets import target_family

    if max(config.ranks) > machine_cpus() and target_family(config.target).data_parallel != "spmd":
        raise UsageError(f"scaling study: --ranks {max(config.ranks)} is more processes than this machine's "
                         f"{machine_cpus()} CPUs")


def run(config: ScalingConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    config.check()
    check_processes(config)
    out = Path(config.out)
    rows_path, bench_path, runs = out / ROWS_FILE, out / BENCH_FILE, out / "scaling_runs"
    study_id = f"scaling-{int(time.time())}"
    _make_data(config)
    progress(1, "scaling: benchmarking the step")
    for batch in config.batch_sizes:
        run_trainspeed("bench", "--workload", "mahjong", "--size", config.size, "--targets", config.target,
                       "--batch-sizes", str(batch), "--threads", str(config.threads), "--run-id", study_id,
                       "--min-window-s", f"{config.bench_min_window_s:g}", "--out", str(bench_path), "--no-plot",
                       "--no-progress")
        progress(1, f"scaling: bench at batch {batch}")
    rows: list[ScalingRunRow] = []
    for repeat in range(config.repeats):
        for batch in config.batch_sizes:
            for ranks in config.ranks:
                for data in DATA_KINDS:
                    run_dir = runs / f"{study_id}-r{repeat}-b{batch}-n{ranks}-{data}"
                    run_trainspeed(*train_command(run_config(config, batch, ranks, data, run_dir, bench_path)))
                    row = ScalingRunRow.from_summary(read_run_summary(run_dir), study_id=study_id,
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


def preset_config(preset: str, out: Path) -> ScalingConfig:
    return ScalingConfig(out=str(out), data=str(out / "scaling_data"), **PRESETS[preset])  # type: ignore[arg-type]


def config_from_args(args: argparse.Namespace, out: Path) -> ScalingConfig:
    settings = {"data": str(out / "scaling_data"), **preset_settings(ScalingConfig, PRESETS, args)}
    config = ScalingConfig(out=str(out), **settings)  # type: ignore[arg-type]
    check(config)
    return config


def rows_files(config: ScalingConfig) -> dict[Path, tuple[str, ...]]:
    """The files of rows the study appends to (its own, its benches'), and the kinds of row each holds."""
    return {Path(config.out) / ROWS_FILE: (ScalingRunRow.KIND,), Path(config.out) / BENCH_FILE: (ResultRow.KIND,)}


def check(config: ScalingConfig) -> None:
    """Every setting, and the size, target and data its commands get, before anything is written."""
    config.check()
    check_processes(config)
    check_mahjong_settings("scaling", config.size, (config.target,))
    check_study_data("scaling", config.data, config.make_data_games, DATA_SEED)
