"""Finding 1: one device's training throughput against the study's baseline, per batch size.

The study timed forward + backward + update on one TPU core and one GPU in eager mode, the batch
already on the device, at batch sizes 2^k, and plotted the ratio of their samples/s against
log2(batch). This study runs the same sweep with `trainspeed bench` over the targets this machine
has (eager and compiled, fp32 and bf16, XLA where torch_xla is installed), every configuration
with the batch kept on the device and copied from the host each step (`--feed device,host`), all
in one bench run, so every ratio pairs rows measured side by side. Writes OUT/throughput.jsonl.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from trainspeed.bench.ratios import format_table, ratio_table
from trainspeed.bench.results import ResultRow, check_results_file
from trainspeed.bench.sweep import run_sweep
from trainspeed.errors import UsageError
from trainspeed.studies.common import COMMAND_START_S, Progress, no_progress
from trainspeed.studies.face import preset_settings
from trainspeed.studies.throughput.config import PRESETS, ROWS_FILE, ThroughputConfig
from trainspeed.targets import available_targets, target_family
from trainspeed.workloads import get_workload, resolve_size

PREFERRED = {
    "cuda": ("cuda:eager:fp32", "cuda:eager:bf16", "cuda:compile:bf16", "xla:lazy:bf16"),
    "cpu": ("cpu:eager:fp32", "cpu:compile:fp32", "xla:lazy:fp32", "cpu:eager:bf16"),
}
"""The targets the study compares where each is available: on a GPU host the study's baseline (one
GPU, eager fp32) and its faster modes, on a CPU the same modes of the host's own device."""


def default_targets() -> tuple[str, ...]:
    available = {name for name, reason in available_targets().items() if reason is None}
    device = "cuda" if "cuda:eager:fp32" in available else "cpu"
    return tuple(name for name in PREFERRED[device] if name in available)


def units(config: ThroughputConfig) -> int:
    return len(config.targets) * len(config.batch_sizes) * len(config.feeds)


def estimate_s(config: ThroughputConfig) -> float:
    """Seconds: per configuration a first step, the warm-up and the windows (a step of ~1 ms per
    sample at the tiny size on a CPU core), and ~30 s of compilation for each compiling target."""
    per_step = [batch * 1e-3 for batch in config.batch_sizes]
    sweep = sum(max(config.min_window_s, step) * config.windows + step * (config.warmup_steps + 2)
                for step in per_step) * len(config.feeds) * len(config.targets)
    compiling = sum(1 for target in config.targets if ":compile:" in target or target.startswith("xla:"))
    return COMMAND_START_S + sweep + 30 * compiling * len(config.batch_sizes)


def run(config: ThroughputConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    bench = config.bench_config(command)

    def on_configuration(target: str, batch_size: int, finished: bool) -> None:
        if finished:
            progress(1, f"throughput: {target} at batch {batch_size}")

    rows = run_sweep(bench, on_progress=on_configuration)
    print(format_table(ratio_table(rows)), flush=True)
    return [bench.out]


def _with_targets(config: ThroughputConfig) -> ThroughputConfig:
    """The config with the study's targets available here where it names none."""
    return config if config.targets else dataclasses.replace(config, targets=default_targets())


def preset_config(preset: str, out: Path) -> ThroughputConfig:
    return _with_targets(ThroughputConfig(out=str(out), **PRESETS[preset]))  # type: ignore[arg-type]


def config_from_args(args: argparse.Namespace, out: Path) -> ThroughputConfig:
    config = _with_targets(ThroughputConfig(out=str(out), **preset_settings(ThroughputConfig, PRESETS, args)))
    check(config)
    return config


def rows_files(config: ThroughputConfig) -> dict[Path, tuple[str, ...]]:
    """The file of rows the study appends to (its bench's), and the kinds of row it holds."""
    return {Path(config.out) / ROWS_FILE: (ResultRow.KIND,)}


def check(config: ThroughputConfig) -> None:
    """Every setting checked as `trainspeed bench` checks its flags, before anything runs."""
    if not config.targets:
        raise UsageError("throughput study: no target is available here; see `trainspeed info`")
    bench = config.bench_config("check")
    resolve_size(get_workload(bench.workload), bench.size)
    for target in bench.targets:
        target_family(target)
    check_results_file(bench.out)
