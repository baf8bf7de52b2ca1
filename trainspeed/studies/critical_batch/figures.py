"""The critical-batch study's figure: the critical batch against the base run's samples, with the
base run's B_simple on the same axes (Merrill et al.'s picture: near 0 early, growing, then level)."""

from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from trainspeed.report.figures import COLOURS, compact_number, plt
from trainspeed.studies.critical_batch.rows import CriticalBatchRow, CriticalBatchSettingsRow

LABEL_CHARS_FOR_TWO_COLUMNS = 60
"""Legend labels up to this long fit two to a row of the figure's width at its legend's font size."""


def study_lines(axes, label: str, colour: str, header: CriticalBatchSettingsRow, points: Sequence[CriticalBatchRow]) -> None:
    """One study on the axes: every batch tried (filled where it matched), the critical batch per
    point (a triangle where it is only a lower bound), B_simple of the base run and at each point."""
    for row in points:
        for batch, matched in zip(row.global_batches, row.matches):
            axes.plot(row.samples, batch, "o", markersize=4, color="grey" if matched else "none",
                      markeredgecolor="grey", alpha=0.7)
    known = sorted((row for row in points if row.critical_batch is not None), key=lambda row: row.samples)
    if known:
        axes.plot([row.samples for row in known], [row.critical_batch for row in known], "-", color=colour, linewidth=1.5,
                  label=f"{label}: critical batch")
        for row in known:
            axes.plot(row.samples, row.critical_batch, "^" if row.critical_at_least else "s", color=colour, markersize=8)
        if any(row.critical_at_least for row in known):
            axes.plot([], [], "^", color=colour, label=f"{label}: at least this (the largest batch tried matched)")
    if header.b_simple_curve:
        axes.plot([sample for sample, _ in header.b_simple_curve], [value for _, value in header.b_simple_curve], "-.",
                  color=colour, alpha=0.6, linewidth=1, label=f"{label}: B_simple of the base run")
    resolved = [row for row in points if row.b_simple is not None and row.b_simple_step is not None]
    if resolved:  # each where its window ended, at or before its point: on the curve, not beside it
        axes.plot([row.b_simple_step * row.base_global_batch for row in resolved], [row.b_simple for row in resolved],
                  "x", color=colour, markersize=7, label=f"{label}: B_simple the branch points take")
    axes.axhline(header.base_global_batch, color=colour, linestyle=":", linewidth=1,
                 label=f"{label}: the base run's batch {header.base_global_batch}")


def critical_batch_figure(studies: Sequence[tuple[str, CriticalBatchSettingsRow, Sequence[CriticalBatchRow]]]) -> Figure:
    """Every study given (label, settings row, point rows) on one panel."""
    figure, axes = plt.subplots(figsize=(9, 5.6), layout="constrained")
    for number, (label, header, points) in enumerate(studies):
        study_lines(axes, label, COLOURS[number % len(COLOURS)], header, points)
    axes.plot([], [], "o", color="grey", markersize=4, label="a batch tried that matched the base batch")
    axes.plot([], [], "o", color="none", markeredgecolor="grey", markersize=4, label="a batch tried that did not")
    axes.set_yscale("log", base=2)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
    axes.set_xlim(left=0)
    axes.set_xlabel("samples of the base run at the branch point")
    axes.set_ylabel("global batch (log scale)")
    axes.set_title("The critical batch along the run, beside B_simple")
    axes.grid(True, which="major", alpha=0.3)
    handles, labels = axes.get_legend_handles_labels()
    shown = dict(zip(labels, handles))  # one entry per label: a study run twice draws the same lines twice
    columns = 2 if max(map(len, shown), default=0) <= LABEL_CHARS_FOR_TWO_COLUMNS else 1  # a long workload name
    figure.legend(list(shown.values()), list(shown), loc="outside lower center", ncol=columns, fontsize=7)
    return figure
