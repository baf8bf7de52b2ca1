"""List the configurations of a bench results file whose newest row ran without a core of its own.

On a shared machine another job can hold the core a `--threads 1` measurement needs; the row then
shows it: `cpu_s_per_wall_s` (process CPU seconds per wall second in the timed windows) falls
below 1 while its samples/s fall with it. This prints one line per such configuration,
`TARGET BATCH FEED`, so a shell loop can measure exactly those again (the newest row of a
configuration is the one tables and plots use):

    python benchmarks/starved_rows.py docs/results/bench_cpu_feed_mahjong_tiny.jsonl --below 0.9

Rows without the field (written before it existed) and unmeasured rows are not listed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.bench.ratios import latest_rows  # noqa: E402
from trainspeed.bench.results import ResultRow, read_rows  # noqa: E402
from trainspeed.errors import UsageError  # noqa: E402


def starved(rows: list[ResultRow], below: float) -> list[ResultRow]:
    """Newest measured rows whose process got less than `below` CPU seconds per wall second."""
    return [
        row for row in latest_rows(rows)
        if row.is_measured and row.cpu_s_per_wall_s is not None and row.cpu_s_per_wall_s < below
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--below", type=float, default=0.9, help="CPU seconds per wall second (default: 0.9)")
    args = parser.parse_args(argv)
    try:
        rows = read_rows(args.results)
    except UsageError as error:
        print(f"starved_rows: error: {error}", file=sys.stderr)
        return 2
    for row in starved(rows, args.below):
        print(row.target, row.batch_size, row.feed or "device")
    return 0


if __name__ == "__main__":
    sys.exit(main())
