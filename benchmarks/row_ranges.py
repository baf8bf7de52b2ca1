"""The ranges the results pages quote, printed from a bench results file, so no row is left out.

    python benchmarks/row_ranges.py docs/results/bench_cpu_mahjong_tiny.jsonl [--baseline cpu:eager:fp32]
        [--from-batch 256]

Per series (the target, and the feed where host-fed), over the newest row of each batch size at or
above `--from-batch`: the ratio to the baseline of the row's own run (`trainspeed.bench.ratios`),
CPU seconds per wall second, and the slowest and fastest window's samples/s; a row whose run has
no baseline is counted, not guessed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.bench.ratios import ratio_table  # noqa: E402
from trainspeed.bench.results import read_rows  # noqa: E402


def _span(values: list[float], form: str) -> str:
    if not values:
        return "-"
    low, high = form.format(min(values)), form.format(max(values))
    return low if low == high else f"{low} - {high}"


def ranges(path: Path, baseline: str | None, from_batch: int) -> list[str]:
    table = ratio_table(read_rows(path), baseline)
    lines = [f"{path.name}: ratio to {table.baseline} in the same run, batch {from_batch} and up"]
    for series in table.targets:
        rows = [table.row(series, batch) for batch in table.batch_sizes if batch >= from_batch]
        measured = [row for row in rows if row is not None and row.is_measured]
        ratios = [table.row_ratio(row) for row in measured if table.row_ratio(row) is not None]
        cpu = [row.cpu_s_per_wall_s for row in measured if row.cpu_s_per_wall_s is not None]
        windows = [rate for row in measured for rate in (row.samples_per_s_min, row.samples_per_s_max) if rate]
        unpaired = len(measured) - len(ratios)
        lines.append(f"  {series}: ratio {_span(ratios, '{:.2f}')} over {len(ratios)} batch sizes"
                     + (f" ({unpaired} without a baseline in their run)" if unpaired else "")
                     + f"; CPU s per wall s {_span(cpu, '{:.2f}')}; windows {_span(windows, '{:,.0f}')} samples/s")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--from-batch", type=int, default=0)
    args = parser.parse_args(argv)
    for path in args.results:
        print("\n".join(ranges(path, args.baseline, args.from_batch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
