"""A BenchConfig's own `trainspeed bench` command (`bench_command`, generated from bench's flag
table): bench's parser reads it back into an equal config, so the plan's measurements run benches
built from configs, never from lists of flags of their own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.flags import bench_command, config_of_command
from trainspeed.cli import build_parser
from trainspeed.errors import UsageError
from trainspeed.flags import config_from_flags

CONFIGS = {
    "defaults": BenchConfig(),
    "a plan's measurement": BenchConfig(workload="mahjong", size="tiny", targets=["cpu:compile:fp32"],
                                        batch_sizes=[16, 64], out=Path("plan/bench.jsonl"), threads=1,
                                        plan=TimingPlan(windows=3, min_window_s=0.25)),
    "every list and option": BenchConfig(workload="timm:resnet18", size="tiny,res=96",
                                         targets=["cpu:eager:fp32", "xla:lazy:fp32"], batch_sizes=[2, 4096],
                                         baseline="xla:lazy:fp32", feeds=["device", "host"], noise_scale=["off", "on"],
                                         peak_tflops=1.5, seed=3, run_id="-id", out=Path("-out.jsonl"),
                                         plan=TimingPlan(warmup_steps=0, max_steps_per_window=7,
                                                         min_steps_per_window=2)),
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_bench_s_own_parser_reads_a_config_s_command_back_into_that_config(config: BenchConfig) -> None:
    command = bench_command(config)
    args = build_parser().parse_args(command)
    assert args.command == "bench" and args.no_plot and args.no_progress
    assert dataclasses.replace(config_from_flags(BenchConfig, args), command=None) == config  # the command line sets it
    assert config_of_command(command) == config


def test_a_command_names_what_it_measures_and_where_it_writes() -> None:
    assert bench_command(BenchConfig(), plot=True, progress=True) == [
        "bench", "--workload", "mahjong", "--targets", "cpu:eager:fp32,cpu:compile:fp32,xla:lazy:fp32",
        "--batch-sizes", "64,128,256,512,1024", "--out", "results/bench.jsonl"]


def test_a_command_that_is_no_bench_or_holds_a_help_is_one_error() -> None:
    for command in (["train", "--steps", "1"], ["bench", "--help"], ["bench", "--no-such-flag"]):
        with pytest.raises(UsageError):
            config_of_command(command)


def test_the_peak_flags_help_says_the_default_is_the_chips_nominal_peak_else_the_measured_one(capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert ("--peak-tflops PEAK_TFLOPS peak for MFU (default: the chip's nominal peak in the target's precision "
            "where known") in shown and "else the matmul peak measured on the device" in shown
