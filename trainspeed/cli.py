"""Command line: `trainspeed bench | plot | info | data ... | train`.

Every handler returns an exit code. Bad input raises UsageError, which becomes one line
`trainspeed: error: ...` and exit code 2 (argparse's own convention for usage errors).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from trainspeed.errors import UsageError

DEFAULT_CPU_TARGETS = "cpu:eager:fp32,cpu:compile:fp32,xla:lazy:fp32"

# Subcommands that live with their own concern: (module, registration function, parent command).
COMMAND_ROOMS = [
    ("trainspeed.workloads.mahjong.data.cli", "add_data_commands", "data"),
    ("trainspeed.workloads.stylegan3.cli", "add_images_command", "data"),
    ("trainspeed.train.cli", "add_train_command", None),
]


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def add_bench_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="time training steps (no data IO) per target and batch size",
        description="Sweep batch sizes on each target; append result rows to JSONL (+CSV), print ratios, plot.",
    )
    parser.add_argument("--workload", default="mahjong", help="mahjong, stylegan3, or package.module:factory")
    parser.add_argument("--size", default="tiny", help="workload size, e.g. tiny, small, base, large")
    parser.add_argument("--targets", default=DEFAULT_CPU_TARGETS, help="comma list of device:mode:precision")
    parser.add_argument("--batch-sizes", default="2^6..2^10", help="range 2^6..2^14 or list 64,256,1024")
    parser.add_argument("--baseline", default=None, help="target the ratios are taken to (default: the first)")
    parser.add_argument("--out", type=Path, default=Path("results/bench.jsonl"), help="JSONL file rows are appended to")
    parser.add_argument("--no-plot", action="store_true", help="do not write OUT.png/OUT.svg")
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--windows", type=int, default=5, help="timed windows; the median is reported")
    parser.add_argument("--min-window-s", type=_positive_float, default=0.5, help="seconds each window lasts at least")
    parser.add_argument("--peak-tflops", type=_positive_float, default=None, help="peak for MFU (default: measured)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (recorded in every row)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from trainspeed.bench.ratios import format_table, ratio_table
    from trainspeed.bench.results import read_rows, write_csv
    from trainspeed.bench.sweep import run_sweep
    from trainspeed.bench.timing import TimingPlan
    from trainspeed.config import BenchConfig, parse_batch_sizes

    config = BenchConfig(
        workload=args.workload,
        size=args.size,
        targets=[t for t in args.targets.split(",") if t.strip()],
        batch_sizes=parse_batch_sizes(args.batch_sizes),
        out=args.out,
        baseline=args.baseline,
        plan=TimingPlan(warmup_steps=args.warmup_steps, windows=args.windows, min_window_s=args.min_window_s),
        peak_tflops=args.peak_tflops,
        threads=args.threads,
        seed=args.seed,
    )
    total = len(config.targets) * len(config.batch_sizes)
    with tqdm(total=total, disable=args.no_progress, unit="config", file=sys.stderr) as bar:

        def on_progress(target: str, batch_size: int, finished: bool) -> None:
            if finished:
                bar.update(1)
            else:
                bar.set_description(f"{target} batch {batch_size}")

        rows = run_sweep(config, on_progress=on_progress)
    print(format_table(ratio_table(rows, config.baseline)))
    all_rows = read_rows(config.out)
    write_csv(config.out.with_suffix(".csv"), all_rows)
    print(f"rows appended to {config.out} (CSV: {config.out.with_suffix('.csv')})")
    if not args.no_plot and any(row.is_measured for row in rows):
        from trainspeed.report.plot import plot_results

        paths = plot_results(rows, config.out.with_suffix(""), config.baseline)
        print("plot: " + ", ".join(str(p) for p in paths))
    errors = [row for row in rows if row.status == "error"]
    for row in errors:
        print(f"error: {row.target} batch {row.batch_size}: {row.error}", file=sys.stderr)
    return 1 if errors else 0


def add_plot_command(subparsers) -> None:
    parser = subparsers.add_parser("plot", help="plot a results JSONL: ratio vs log2(batch) and samples/s")
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="output stem (default: beside RESULTS)")
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--run-id", default=None, help="only rows of this run (default: newest row per config)")
    parser.set_defaults(handler=run_plot)


def run_plot(args: argparse.Namespace) -> int:
    from trainspeed.bench.results import read_rows
    from trainspeed.report.plot import plot_results

    rows = read_rows(args.results)
    if args.run_id:
        rows = [row for row in rows if row.run_id == args.run_id]
        if not rows:
            raise UsageError(f"no rows with run id {args.run_id} in {args.results}")
    if args.baseline and args.baseline not in {row.target for row in rows}:
        raise UsageError(f"--baseline {args.baseline} has no rows in {args.results}")
    paths = plot_results(rows, args.out or args.results.with_suffix(""), args.baseline)
    print("\n".join(str(p) for p in paths))
    return 0


def add_info_command(subparsers) -> None:
    parser = subparsers.add_parser("info", help="targets usable on this machine, and why others are not")
    parser.set_defaults(handler=run_info)


def run_info(args: argparse.Namespace) -> int:
    import torch

    from trainspeed.bench.environment import Environment
    from trainspeed.targets import available_targets

    environment = Environment.capture()
    print(f"torch {environment.torch_version}, torch_xla {environment.torch_xla_version or 'not installed'}, "
          f"python {environment.python_version}, {torch.get_num_threads()} CPU threads")
    for name, reason in available_targets().items():
        print(f"  {name:<24} {'available' if reason is None else 'unavailable: ' + reason}")
    return 0


def _register_rooms(subparsers) -> None:
    data_parser = subparsers.add_parser("data", help="make, import, inspect and verify datasets")
    data_subparsers = data_parser.add_subparsers(dest="data_command", required=True, metavar="DATA_COMMAND")
    parents = {"data": data_subparsers, None: subparsers}
    for module_name, function_name, parent in COMMAND_ROOMS:
        getattr(importlib.import_module(module_name), function_name)(parents[parent])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainspeed", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_bench_command(subparsers)
    add_plot_command(subparsers)
    add_info_command(subparsers)
    _register_rooms(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as error:
        print(f"trainspeed: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trainspeed: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
