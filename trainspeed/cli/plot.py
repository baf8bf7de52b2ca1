"""`trainspeed plot`: the study's figure from a bench results JSONL, or the strength figure from a
`trainspeed eval mahjong` results JSONL, or the batch-size study's figure from its rows."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainspeed.errors import UsageError


def add_plot_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plot", help="plot a results JSONL: ratio vs log2(batch) and samples/s; "
                                   "for eval mahjong rows, mean rank and the share of each rank per row; "
                                   "for a batch-size study, validation, time and strength per global batch")
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="output stem: STEM.png and STEM.svg (default: beside RESULTS)")
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--run-id", default=None, help="only rows of this run (default: newest row per config)")
    parser.set_defaults(handler=run_plot)


def run_plot(args: argparse.Namespace) -> int:
    from trainspeed.cli.report import check_output
    from trainspeed.kinds import plot, read_inputs
    from trainspeed.report.part import PlotRequest

    stem = args.out or args.results.with_suffix("")
    if args.out is not None and args.out.is_dir():
        raise UsageError(f"--out {args.out} is a directory; give a stem, e.g. {args.out / 'bench'} "
                         "(writes bench.png and bench.svg)")
    for suffix in (".png", ".svg"):
        check_output(stem.with_suffix(suffix), {args.results.resolve()})
    inputs = read_inputs([args.results])
    paths = plot(inputs, PlotRequest(results=args.results, stem=stem, baseline=args.baseline, run_id=args.run_id))
    print("\n".join(str(p) for p in paths))
    return 0
