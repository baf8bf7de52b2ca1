"""`trainspeed report`: one self-contained HTML page of every result file and run directory given."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainspeed.atomic import check_writable_directory

EPILOG = """\
reads (each row recognised by its fields; extra fields are kept):
  bench rows (trainspeed bench, benchmarks/*), remote bench rows, mahjong-eval rows,
  batch-size study rows, run directories (summary.json + metrics.jsonl) or folders of them
example:
  trainspeed report results/*.jsonl runs/mahjong --out report.html
"""


def add_report_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="one self-contained HTML page (figures inline, sortable tables) of result files and run directories",
        description="Read result rows and run directories; write one HTML page that opens offline.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("results", nargs="*", type=Path, metavar="RESULTS",
                        help="result files (JSONL or JSON) and run directories")
    parser.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML file (default: report.html)")
    parser.add_argument("--title", default="trainspeed report", help="the page's title")
    parser.add_argument("--baseline", action="append", default=[], metavar="TARGET",
                        help="target the throughput ratios are taken to; repeat it to give a preference order, "
                        "each workload takes the first it has rows of (default: cuda:eager:fp32, else the first "
                        "eager fp32 target, else the first eager one)")
    parser.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    from trainspeed.report.inputs import read_inputs
    from trainspeed.report.page import write_report

    inputs = read_inputs(args.results)
    check_writable_directory(args.out.parent, f"--out {args.out}")
    write_report(inputs, args.out, args.title, args.baseline)
    print(f"report: {args.out} ({inputs.count} rows and runs from {len(inputs.files)} inputs)")
    return 0
