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
    from trainspeed.bench.results import read_rows
    from trainspeed.cli.report import check_output
    from trainspeed.report.eval_plot import plot_batch_size_study, plot_mahjong_eval
    from trainspeed.report.inputs import read_inputs
    from trainspeed.report.plot import plot_results

    stem = args.out or args.results.with_suffix("")
    if args.out is not None and args.out.is_dir():
        raise UsageError(f"--out {args.out} is a directory; give a stem, e.g. {args.out / 'bench'} "
                         "(writes bench.png and bench.svg)")
    for suffix in (".png", ".svg"):
        check_output(stem.with_suffix(suffix), {args.results.resolve()})
    inputs = read_inputs([args.results])
    studies = inputs.batch_size  # a study's file holds its evaluations' rows too
    evaluations = [read.row for read in inputs.evals] if not studies else []
    if evaluations or studies:
        if args.baseline or args.run_id:
            raise UsageError(f"{args.results} holds {'batch-size study' if studies else 'eval mahjong'} rows: "
                             "--baseline and --run-id are for bench rows")
        paths = plot_batch_size_study([r.row for r in studies], stem) if studies else plot_mahjong_eval(evaluations, stem)
        print("\n".join(str(p) for p in paths))
        return 0
    rows = read_rows(args.results)
    if args.run_id:
        rows = [row for row in rows if row.run_id == args.run_id]
        if not rows:
            raise UsageError(f"no rows with run id {args.run_id} in {args.results}")
    if args.baseline and args.baseline not in {name for row in rows for name in (row.target, row.series)}:
        raise UsageError(f"--baseline {args.baseline} has no rows in {args.results}")
    paths = plot_results(rows, stem, args.baseline)
    print("\n".join(str(p) for p in paths))
    return 0
