"""`trainspeed bench`: flags -> BenchConfig -> sweep -> rows, CSV, ratio table, plot."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from trainspeed.bench.config import BenchConfig
from trainspeed.flags import add_flags, config_from_flags
from trainspeed.user_json import check_rows_file

if TYPE_CHECKING:
    from trainspeed.bench.results import ResultRow


def add_bench_command(subparsers: argparse._SubParsersAction) -> None:
    from trainspeed.bench.flags import BENCH_FLAGS

    parser = subparsers.add_parser(
        "bench",
        help="time training steps per target and batch size (batch on the device, or copied from the host)",
        description="Sweep batch sizes on each target; append result rows to JSONL (+CSV), print ratios, plot.",
    )
    add_flags(parser, BenchConfig, BENCH_FLAGS)
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
    from trainspeed.bench.results import ResultRow

    config = dataclasses.replace(config_from_flags(BenchConfig, args), command=args.command_line)
    check_rows_file(config.out, f"--out {config.out}", kinds=(ResultRow.KIND,))
    if config.exported is not None:
        return _exported_rows(config, args)
    from tqdm.auto import tqdm

    from trainspeed.bench.sweep import run_sweep
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
    return _written(rows, config, config.baseline or config.targets[0], args)


def _exported_rows(config: BenchConfig, args: argparse.Namespace) -> list["ResultRow"]:
    """`--exported DIR`: the folder's steps on this machine's JAX device, with no torch imported."""
    from trainspeed.errors import UsageError
    from trainspeed.exported.bench import run_exported_bench

    defaults = BenchConfig()
    for flag, field in (("--targets", "targets"), ("--baseline", "baseline"), ("--data", "data"),
                        ("--noise-scale", "noise_scale"), ("--threads", "threads")):
        if getattr(config, field) != getattr(defaults, field):
            raise UsageError(f"bench --exported: {flag} does not apply; the folder holds one target's steps, "
                             "timed on this machine's JAX device")
    rows = run_exported_bench(config, batch_sizes_given=config.batch_sizes != defaults.batch_sizes)
    return _written(rows, config, rows[0].target if rows else "", args)


def _written(rows: list["ResultRow"], config: BenchConfig, baseline: str, args: argparse.Namespace) -> list["ResultRow"]:
    """Print the ratio table, write the CSV and the plot beside the rows, name the errors."""
    from trainspeed.bench.ratios import format_table, ratio_table
    from trainspeed.bench.results import read_rows, write_csv

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
