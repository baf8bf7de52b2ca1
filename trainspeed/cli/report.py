"""`trainspeed report`: one self-contained HTML page of every result file and run directory given."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from trainspeed.atomic import check_writable_directory
from trainspeed.errors import UsageError

if TYPE_CHECKING:
    from trainspeed.report.inputs import ReportInputs

EPILOG = """\
reads (each row by the reader of its kind; extra fields are kept):
  bench rows (trainspeed bench, the studies, benchmarks/*), remote bench rows, data bench rows,
  mahjong-eval rows, scaling and batch-size study rows, the scripts' measurements, run directories
  (summary.json + metrics.jsonl), or folders of them (trainspeed study all --out DIR)
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
                        help="result files (JSONL or JSON), run directories, folders of them")
    parser.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML file (default: report.html)")
    parser.add_argument("--title", default="trainspeed report", help="the page's title")
    parser.add_argument("--baseline", action="append", default=[], metavar="TARGET",
                        help="target the throughput ratios are taken to; repeat it to give a preference order, "
                        "each workload takes the first it has rows of (default: cuda:eager:fp32, else the first "
                        "eager fp32 target, else the first eager one)")
    parser.set_defaults(handler=run_report)


def check_output(out: Path, read: set[Path], flag: str = "--out") -> None:
    """An output is a file of its own: not a directory, and none of the files just read."""
    if out.is_dir():
        raise UsageError(f"{flag} {out} is a directory; name the HTML file, e.g. {out / 'report.html'}")
    if out.resolve() in read:
        raise UsageError(f"{flag} {out} is one of the inputs; write the page to another file")
    check_writable_directory(out.parent, f"{flag} {out}")


def run_report(args: argparse.Namespace) -> int:
    report_inputs(args)
    return 0


def report_inputs(args: argparse.Namespace) -> "ReportInputs":
    """Write the page the flags describe and return what it was drawn from (`trainspeed.report`
    returns its rows to a Python caller)."""
    from trainspeed.kinds import read_inputs, write_report

    inputs = read_inputs(args.results)
    check_output(args.out, inputs.read)
    write_report(inputs, args.out, args.title, args.baseline)
    print(f"report: {args.out} ({inputs.count} rows and runs from {len(inputs.files)} inputs)")
    return inputs
