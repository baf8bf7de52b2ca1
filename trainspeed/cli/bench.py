"""`trainspeed bench`: flags -> BenchConfig -> sweep -> rows, CSV, ratio table, plot."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from trainspeed.bench.config import (
    BATCH_SIZE_LIST,
    FEED_LIST,
    NOISE_SCALE_LIST,
    TARGET_LIST,
    BenchConfig,
)
from trainspeed.flags import WORKLOAD_HELP, add_flag, config_from_flags, thread_count
from trainspeed.user_json import check_rows_file

if TYPE_CHECKING:
    from trainspeed.bench.results import ResultRow


def add_bench_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="time training steps per target and batch size (batch on the device, or copied from the host)",
        description="Sweep batch sizes on each target; append result rows to JSONL (+CSV), print ratios, plot.",
    )
    add_flag(parser, "--workload", BenchConfig, "workload", WORKLOAD_HELP)
    add_flag(parser, "--size", BenchConfig, "size", "workload size (default: the workload's default size, mahjong tiny); a library model "
             "takes PRESET[,key=value...], e.g. tiny,res=96 (docs/workloads.md)")
    add_flag(parser, "--targets", BenchConfig, "targets", "comma list of device:mode:precision", type=TARGET_LIST)
    add_flag(parser, "--batch-sizes", BenchConfig, "batch_sizes",
             "range 2^6..2^14 or list 64,256,1024 (each at most 2^40)", type=BATCH_SIZE_LIST)
    add_flag(parser, "--baseline", BenchConfig, "baseline", "target the ratios are taken to (default: the first)")
    add_flag(parser, "--out", BenchConfig, "out", "JSONL file rows are appended to")
    add_flag(parser, "--warmup-steps", BenchConfig, "plan.warmup_steps", "untimed steps after the first")
    add_flag(parser, "--windows", BenchConfig, "plan.windows", "timed windows; the median is reported")
    add_flag(parser, "--min-window-s", BenchConfig, "plan.min_window_s", "seconds each window lasts at least")
    add_flag(parser, "--min-steps-per-window", BenchConfig, "plan.min_steps_per_window",
             "steps every window holds at least (a pipelined remote target overlaps steps only inside a window)")
    add_flag(parser, "--max-steps-per-window", BenchConfig, "plan.max_steps_per_window",
             "cap on steps per window (a row says steps_capped when it left a window short)")
    add_flag(parser, "--feed", BenchConfig, "feeds",
             "device: one batch kept on the device; host: each step copies a host batch to the device; "
             "device,host: both, back to back for each target and batch size",
             type=FEED_LIST)
    add_flag(parser, "--noise-scale", BenchConfig, "noise_scale",
             "on: each step also measures the gradient noise scale as one rank of `trainspeed train` does; "
             "off,on: both, back to back, to read the meter's cost as a ratio", type=NOISE_SCALE_LIST)
    add_flag(parser, "--peak-tflops", BenchConfig, "peak_tflops", "peak for MFU (default: measured)")
    add_flag(parser, "--threads", BenchConfig, "threads", "torch CPU threads (recorded in every row)",
             type=thread_count)
    add_flag(parser, "--seed", BenchConfig, "seed", "seed of the model and the synthetic batch")
    add_flag(parser, "--run-id", BenchConfig, "run_id",
             "the rows' run id (default: a fresh one); ratios pair only rows of one run, so give commands "
             "measured as one comparison the same id")
    parser.add_argument("--no-plot", action="store_true", help="do not write OUT.png/OUT.svg")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    """The command: exit code 1 where a configuration ended in an error row."""
    rows = bench_rows(args)
    return 1 if any(row.status == "error" for row in rows) else 0


def bench_rows(args: argparse.Namespace) -> list["ResultRow"]:
    """Run the sweep the flags describe, print and write what the command does, and return its rows
    (`trainspeed.bench` returns them to a Python caller)."""
    from tqdm.auto import tqdm

    from trainspeed.bench.ratios import format_table, ratio_table
    from trainspeed.bench.results import ResultRow, read_rows, write_csv
    from trainspeed.bench.sweep import run_sweep

    config = dataclasses.replace(config_from_flags(BenchConfig, args), command=args.command_line)
    check_rows_file(config.out, f"--out {config.out}", kinds=(ResultRow.KIND,))
    total = len(config.targets) * len(config.batch_sizes) * len(config.feeds) * len(config.noise_scale)
    bars: list[tqdm] = []
    """The bar starts with the first configuration: a size refused before it is one line, no bar."""

    def on_progress(target: str, batch_size: int, finished: bool) -> None:
        if not bars:
            bars.append(tqdm(total=total, disable=args.no_progress, unit="config", file=sys.stderr))
        if finished:
            bars[0].update(1)
        else:
            bars[0].set_description(f"{target} batch {batch_size}")

    try:
        rows = run_sweep(config, on_progress=on_progress)
    finally:
        for bar in bars:
            bar.close()
    baseline = config.baseline or config.targets[0]
    print(format_table(ratio_table(rows, baseline)))
    all_rows = read_rows(config.out)
    write_csv(config.out.with_suffix(".csv"), all_rows)
    print(f"rows appended to {config.out} (CSV: {config.out.with_suffix('.csv')})")
    if not args.no_plot and any(row.is_measured for row in rows):
        from trainspeed.bench.report import plot_results

        paths = plot_results(rows, config.out.with_suffix(""), baseline)
        print("plot: " + ", ".join(str(p) for p in paths))
    errors = [row for row in rows if row.status == "error"]
    for row in errors:
        print(f"error: {row.target} batch {row.batch_size}: {row.error}", file=sys.stderr)
    return rows
