"""The bench's figures, one function per figure, each returning a matplotlib Figure.

They follow the study's conventions: batch size on a log2 axis, a whisker from the slowest to the
fastest timed window on every point, an `invalid` row (a compilation inside a timed window) as a
hollow marker off the line, never as a normal point. A ratio point is drawn only where the row's
own run measured the baseline.
"""

from __future__ import annotations

import math
from typing import Callable

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from trainspeed.bench.mfu import peaks_said
from trainspeed.bench.ratios import RatioTable
from trainspeed.report.figures import COLOURS, label_batch_axis, panels, samples_axis

GIB = 2**30
INVALID_LABEL = "hollow: invalid (compiled inside a timed window)"
Point = tuple[int, float, float, float, bool]
"""(batch size, value, slowest window, fastest window, invalid)."""


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
        whiskers = [[p[1] - p[2] for p in chosen], [p[3] - p[1] for p in chosen]]
        axes.errorbar([math.log2(p[0]) for p in chosen], [p[1] for p in chosen], yerr=whiskers, color=color,
                      marker="o", capsize=3, elinewidth=1, linestyle="none" if invalid else linestyle,
                      markerfacecolor="none" if invalid else color, label=None if invalid else label)


def _finish_batch_axes(axes: Axes, batch_sizes: list[int], has_invalid: bool) -> None:
    label_batch_axis(axes, batch_sizes)
    axes.grid(True, alpha=0.3)
    if has_invalid:
        axes.plot([], [], "o", color="grey", markerfacecolor="none", label=INVALID_LABEL)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)


def _has_invalid(table: RatioTable) -> bool:
    return any(table.status(s, b) == "invalid" for s in table.targets for b in table.batch_sizes)


def draw_ratio(axes: Axes, table: RatioTable, title: str) -> None:
    """The study's figure: throughput ratio to the baseline of the same run against log2(batch size)."""
    for index, series in enumerate(table.targets):
        points = _points(table, series, table.ratio, table.ratio_spread, table.ratio_invalid)
        _draw(axes, points, COLOURS[index % len(COLOURS)], series, "--" if series == table.baseline else "-")
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set(ylabel=f"throughput ratio to {table.baseline} (same run)", title=title)
    _finish_batch_axes(axes, table.batch_sizes, _has_invalid(table))


def draw_samples(axes: Axes, table: RatioTable, title: str) -> None:
    """Absolute samples/s of the median window, whiskers from the slowest to the fastest."""
    invalid = lambda series, batch: table.status(series, batch) == "invalid"  # noqa: E731
    for index, series in enumerate(table.targets):
        _draw(axes, _points(table, series, table.samples_per_s, table.spread, invalid),
              COLOURS[index % len(COLOURS)], series, "-")
    axes.set(ylabel="samples/s (median window; whiskers: slowest to fastest)", title=title)
    samples_axis(axes)
    _finish_batch_axes(axes, table.batch_sizes, _has_invalid(table))


def ratio_figure(table: RatioTable, workload: str) -> Figure:
    figure, (axes,) = panels(1, (9, 4.6))
    draw_ratio(axes, table, f"{workload}: training throughput vs {table.baseline}")
    return figure


def bench_figure(table: RatioTable, workload: str) -> Figure:
    """`trainspeed plot`'s figure: the study's ratio figure beside absolute samples/s."""
    figure, (ratio_axes, samples_axes) = panels(2, (13, 5))
    draw_ratio(ratio_axes, table, f"Training throughput vs {table.baseline} ({workload})")
    draw_samples(samples_axes, table, "Absolute throughput")
    return figure


def plausible_mfu(mfu: float | None) -> float | None:
    """An MFU above 100% is no MFU: a peak below the achieved rate cannot be a peak (the bench
    refuses such a peak; rows written before it did may still carry one)."""
    return mfu if mfu is not None and mfu <= 1.0 else None


def throughput_figure(table: RatioTable, workload: str) -> Figure:
    """Absolute samples/s and, where rows have it, MFU; its axis says which peak it divides by."""
    rows = list(table.newest.values())
    has_mfu = any(plausible_mfu(r.mfu) is not None for r in rows)
    figure, axes_list = panels(2 if has_mfu else 1, (13 if has_mfu else 9, 4.6))
    draw_samples(axes_list[0], table, f"{workload}: absolute throughput")
    if has_mfu:
        mfu_axes = axes_list[1]
        for index, series in enumerate(table.targets):
            colour = COLOURS[index % len(COLOURS)]
            own = sorted((r for (s, _), r in table.newest.items()
                          if s == series and r.is_measured and plausible_mfu(r.mfu) is not None),
                         key=lambda r: r.batch_size)
            for hollow in (False, True):
                chosen = [r for r in own if (r.status == "invalid") == hollow]
                if chosen:
                    mfu_axes.plot([math.log2(r.batch_size) for r in chosen], [r.mfu for r in chosen], marker="o",
                                  color=colour, linestyle="none" if hollow else "-",
                                  markerfacecolor="none" if hollow else colour, label=None if hollow else series)
        mfu_axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        mfu_axes.set_ylim(bottom=0)
        peak = peaks_said(r.peak_tflops_source for r in rows if plausible_mfu(r.mfu) is not None)
        mfu_axes.set(ylabel=f"MFU (achieved / {peak.removeprefix('the ')})",
                     title=f"{workload}: model FLOPs utilisation (none above 100%)")
        _finish_batch_axes(mfu_axes, table.batch_sizes, _has_invalid(table))
    return figure


def memory_figure(table: RatioTable, workload: str) -> Figure:
    """Peak device memory per series against batch size; an `oom` row is a red cross on the top
    edge, a `skipped` one (a smaller batch already ran out) a grey tick; the dotted line between
    the largest batch that fit and the first that did not is the series' OOM boundary."""
    rows = list(table.newest.values())
    figure, (axes,) = panels(1, (9, 4.6))
    top = 1.15 * (max((r.peak_memory_bytes or 0) / GIB for r in rows) or 1.0)
    for index, series in enumerate(table.targets):
        colour = COLOURS[index % len(COLOURS)]
        own = sorted((r for (s, _), r in table.newest.items() if s == series), key=lambda r: r.batch_size)
        fit = [r for r in own if r.status in ("ok", "invalid") and r.peak_memory_bytes is not None]
        if fit:
            axes.plot([math.log2(r.batch_size) for r in fit], [r.peak_memory_bytes / GIB for r in fit],
                      marker="o", color=colour, label=series)
        oom = [r for r in own if r.status == "oom"]
        skipped = [r for r in own if r.status == "skipped"]
        if oom:
            axes.plot([math.log2(r.batch_size) for r in oom], [top] * len(oom), "x", color="#d62728",
                      markersize=10, markeredgewidth=2, clip_on=False)
            fitted = [r.batch_size for r in own if r.status in ("ok", "invalid") and r.batch_size < oom[0].batch_size]
            if fitted:
                axes.axvline((math.log2(max(fitted)) + math.log2(oom[0].batch_size)) / 2, color=colour,
                             linestyle=":", linewidth=1.2)
        if skipped:
            axes.plot([math.log2(r.batch_size) for r in skipped], [top] * len(skipped), "|", color="grey",
                      markersize=10, clip_on=False)
    if any(r.status == "oom" for r in rows):
        axes.plot([], [], "x", color="#d62728", label="out of memory (oom row)")
        axes.plot([], [], ":", color="grey", label="OOM boundary")
    if any(r.status == "skipped" for r in rows):
        axes.plot([], [], "|", color="grey", label="skipped (a smaller batch ran out)")
    axes.set_ylim(0, top * 1.05)
    axes.set(ylabel="peak device memory (GiB)", title=f"{workload}: peak memory and the OOM boundary")
    _finish_batch_axes(axes, table.batch_sizes, False)
    return figure


def first_step_figure(table: RatioTable, workload: str) -> Figure:
    """The first step alone (it includes torch.compile's or XLA's compilation) per batch size."""
    figure, (axes,) = panels(1, (9, 4.6))
    for index, series in enumerate(table.targets):
        own = sorted((r for (s, _), r in table.newest.items() if s == series and r.first_step_s is not None),
                     key=lambda r: r.batch_size)
        if own:
            axes.plot([math.log2(r.batch_size) for r in own], [r.first_step_s for r in own], marker="o",
                      color=COLOURS[index % len(COLOURS)], label=series)
    samples_axis(axes)
    axes.set(ylabel="first step (s, includes compilation)", title=f"{workload}: first-step (compile) time")
    _finish_batch_axes(axes, table.batch_sizes, False)
    return figure
