"""The study's figure: throughput ratio to a baseline vs log2(batch size), plus absolute samples/s."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, selectable, smaller
import matplotlib.pyplot as plt  # noqa: E402

from trainspeed.atomic import atomic_path  # noqa: E402
from trainspeed.bench.ratios import RatioTable, ratio_table  # noqa: E402
from trainspeed.bench.results import ResultRow  # noqa: E402
from trainspeed.errors import UsageError  # noqa: E402


def _series(table: RatioTable, target: str, values) -> tuple[list[int], list[float]]:
    points = [(b, values(target, b)) for b in table.batch_sizes]
    points = [(b.bit_length() - 1, v) for b, v in points if v is not None]
    return [x for x, _ in points], [y for _, y in points]


def plot_results(rows: list[ResultRow], out_stem: Path, baseline: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; returns the paths written."""
    measured = [row for row in rows if row.is_measured]
    if not measured:
        raise UsageError("no measured rows to plot (every row is oom, skipped or error)")
    table = ratio_table(rows, baseline)
    workloads = sorted({f"{row.workload} {row.size}" for row in measured})
    figure, (ratio_axes, absolute_axes) = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True)
    for target in table.targets:
        xs, ys = _series(table, target, table.ratio)
        if xs:
            style = "--" if target == table.baseline else "-"
            ratio_axes.plot(xs, ys, style, marker="o", label=target)
        xs, ys = _series(table, target, lambda t, b: table.samples_per_s.get((t, b)))
        if xs:
            absolute_axes.plot(xs, ys, marker="o", label=target)
    ratio_axes.axhline(1.0, color="grey", linewidth=0.8)
    ratio_axes.set(
        xlabel="log2(batch size)",
        ylabel=f"throughput ratio to {table.baseline}",
        title=f"Training throughput vs {table.baseline} ({', '.join(workloads)})",
    )
    absolute_axes.set(xlabel="log2(batch size)", ylabel="samples/s (median of timed windows)", title="Absolute throughput")
    absolute_axes.set_yscale("log")
    for axes in (ratio_axes, absolute_axes):
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=9)
        axes.xaxis.get_major_locator().set_params(integer=True)
    written = []
    for suffix in (".png", ".svg"):
        path = out_stem.with_suffix(suffix)
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format=suffix[1:], dpi=120)
        written.append(path)
    plt.close(figure)
    return written
