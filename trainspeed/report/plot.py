"""The study's figure: throughput ratio to a baseline vs batch size (log2), plus absolute samples/s.

Every point shows the spread of its timed windows as a whisker from the slowest to the fastest
window (on the ratio panel: those windows over the baseline's median), so a difference smaller than
the spread is visibly within the noise. An `invalid` row (a compilation inside a timed window) is a
hollow marker off the line, never a normal point.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, selectable, smaller
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from trainspeed.atomic import atomic_path  # noqa: E402
from trainspeed.bench.ratios import RatioTable, ratio_table  # noqa: E402
from trainspeed.bench.results import ResultRow  # noqa: E402
from trainspeed.errors import UsageError  # noqa: E402

INVALID_LABEL = "hollow: invalid (compiled inside a timed window)"
Point = tuple[int, float, float, float, bool]
"""(batch size, value, slowest window, fastest window, invalid)."""


def readable_number(value: float, _position: object = None) -> str:
    """Tick text for samples/s: 1,000 not 10^3; small rates keep their digits."""
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:g}"
    return f"{value:.2g}"


def _points(table: RatioTable, series: str, value: Callable[[str, int], float | None],
            spread: Callable[[str, int], tuple[float, float] | None], invalid: Callable[[str, int], bool]) -> list[Point]:
    points = []
    for batch_size in table.batch_sizes:
        y = value(series, batch_size)
        if y is None:
            continue
        low, high = spread(series, batch_size) or (y, y)
        points.append((batch_size, y, min(low, y), max(high, y), invalid(series, batch_size)))
    return points


def _draw(axes: Axes, points: list[Point], color: str, label: str, linestyle: str) -> None:
    """Valid points as a line with whiskers; invalid ones as hollow markers with whiskers, unjoined."""
    for invalid in (False, True):
        chosen = [p for p in points if p[4] == invalid]
        if not chosen:
            continue
        xs = [math.log2(p[0]) for p in chosen]
        ys = [p[1] for p in chosen]
        whiskers = [[p[1] - p[2] for p in chosen], [p[3] - p[1] for p in chosen]]
        axes.errorbar(
            xs, ys, yerr=whiskers, color=color, marker="o", capsize=3, elinewidth=1,
            linestyle="none" if invalid else linestyle,
            markerfacecolor="none" if invalid else color,
            label=None if invalid else label,
        )


def _label_batch_axis(axes: Axes, batch_sizes: list[int]) -> None:
    powers = sorted({b.bit_length() - 1 for b in batch_sizes if b & (b - 1) == 0})
    if len(powers) == len(batch_sizes):  # every batch size is 2^k: a tick each, written out
        axes.set_xticks(powers, [str(2**k) for k in powers])
    else:
        axes.xaxis.set_major_formatter(FuncFormatter(lambda k, _: f"{2**k:,.0f}"))
    axes.set_xlabel("batch size (log2 scale)")


def build_figure(rows: list[ResultRow], baseline: str | None = None) -> Figure:
    """The figure of `rows` (newest row per configuration), not yet written anywhere."""
    measured = [row for row in rows if row.is_measured]
    if not measured:
        raise UsageError("no measured rows to plot (every row is oom, skipped or error)")
    table = ratio_table(rows, baseline)
    workloads = sorted({f"{row.workload} {row.size}" for row in measured})
    figure, (ratio_axes, absolute_axes) = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def invalid(series: str, batch_size: int) -> bool:
        return table.status.get((series, batch_size)) == "invalid"

    def ratio_invalid(series: str, batch_size: int) -> bool:
        return invalid(series, batch_size) or invalid(table.baseline, batch_size)

    for index, series in enumerate(table.targets):
        color = colors[index % len(colors)]
        style = "--" if series == table.baseline else "-"
        ratio_points = _points(table, series, table.ratio, table.ratio_spread, ratio_invalid)
        _draw(ratio_axes, ratio_points, color, series, style)
        absolute_points = _points(
            table, series, lambda s, b: table.samples_per_s.get((s, b)), lambda s, b: table.spread.get((s, b)), invalid
        )
        _draw(absolute_axes, absolute_points, color, series, "-")
    ratio_axes.axhline(1.0, color="grey", linewidth=0.8)
    ratio_axes.set(
        ylabel=f"throughput ratio to {table.baseline}",
        title=f"Training throughput vs {table.baseline} ({', '.join(workloads)})",
    )
    absolute_axes.set(ylabel="samples/s (median window; whiskers: slowest to fastest)", title="Absolute throughput")
    absolute_axes.set_yscale("log")
    absolute_axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    absolute_axes.yaxis.set_major_formatter(FuncFormatter(readable_number))
    absolute_axes.yaxis.set_minor_formatter(NullFormatter())
    has_invalid = any(status == "invalid" for status in table.status.values())
    for axes in (ratio_axes, absolute_axes):
        _label_batch_axis(axes, table.batch_sizes)
        axes.grid(True, alpha=0.3)
        if has_invalid:
            axes.plot([], [], "o", color="grey", markerfacecolor="none", label=INVALID_LABEL)
        axes.legend(fontsize=9)
    return figure


def save_figure(figure: Figure, out_stem: Path, dpi: int = 120) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg, each atomically, and close the figure; returns the paths."""
    written = []
    for suffix in (".png", ".svg"):
        path = out_stem.with_suffix(suffix)
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format=suffix[1:], dpi=dpi)
        written.append(path)
    plt.close(figure)
    return written


def plot_results(rows: list[ResultRow], out_stem: Path, baseline: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; returns the paths written."""
    return save_figure(build_figure(rows, baseline), out_stem)
