"""The time-to-target study's figure, in the style of Shallue et al. (2019): steps to the goal
against the global batch on log-log axes, each seed a point, the perfect-scaling line through the
smallest batch, the fit S(B) = S_min (1 + B_crit / B) with its bootstrap band, B_crit marked with its
interval and B_simple beside it; and the samples to the goal against the batch."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from trainspeed.report.figures import COLOURS, compact_number, plt
from trainspeed.stats import StepsFit, percentile_band
from trainspeed.studies.time_to_target.rows import (
    TimeToTargetBatchRow,
    TimeToTargetFitRow,
    TimeToTargetRunRow,
)


def _band(fit: TimeToTargetFitRow, grid: np.ndarray, samples: bool) -> tuple[np.ndarray, np.ndarray]:
    draws = [StepsFit(s_min=s, e_min=e) for s, e in fit.draws]
    return percentile_band([[draw.samples(b) if samples else draw.steps(b) for b in grid] for draw in draws])


def study_panels(axes_pair: Sequence, label: str, colour: str, batches: Sequence[TimeToTargetBatchRow],
                 seeds: Sequence[TimeToTargetRunRow], fit: TimeToTargetFitRow | None) -> None:
    """One study's points and lines on (steps axes, samples axes)."""
    steps_axes, samples_axes = axes_pair
    for run in seeds:
        if run.steps is not None:
            steps_axes.plot(run.global_batch, run.steps, "o", color=colour, alpha=0.45, markersize=4)
            samples_axes.plot(run.global_batch, run.samples, "o", color=colour, alpha=0.45, markersize=4)
    measured = sorted((row for row in batches if row.steps_mean is not None), key=lambda row: row.global_batch)
    if measured:
        xs = [row.global_batch for row in measured]
        steps_axes.plot(xs, [row.steps_mean for row in measured], "s", color=colour, label=f"{label}: mean over seeds")
        samples_axes.plot(xs, [row.samples_mean for row in measured], "s", color=colour, label=f"{label}: mean")
        smallest = measured[0]
        grid = np.geomspace(min(row.global_batch for row in batches), max(row.global_batch for row in batches), 60)
        steps_axes.plot(grid, smallest.steps_mean * smallest.global_batch / grid, ":", color="grey",
                        label="perfect scaling from the smallest batch" if colour == COLOURS[0] else None)
    missed = [row for row in batches if row.steps_mean is None]
    for row in missed:
        steps_axes.annotate("not reached", (row.global_batch, steps_axes.get_ylim()[1]), color=colour,
                            fontsize=7, ha="center", va="top", rotation=90)
    if fit is None:
        return
    grid = np.geomspace(min(row.global_batch for row in batches) / 1.5, max(row.global_batch for row in batches) * 1.5, 80)
    model = StepsFit(s_min=fit.s_min, e_min=fit.e_min)
    low, high = _band(fit, grid, samples=False)
    steps_axes.plot(grid, [model.steps(b) for b in grid], "-", color=colour, label=f"{label}: fit S_min (1 + B_crit/B)")
    steps_axes.fill_between(grid, low, high, color=colour, alpha=0.12)
    low, high = _band(fit, grid, samples=True)
    samples_axes.plot(grid, [model.samples(b) for b in grid], "-", color=colour, label=f"{label}: fit E_min (1 + B/B_crit)")
    samples_axes.fill_between(grid, low, high, color=colour, alpha=0.12)
    shown = (grid[0] / 4, grid[-1] * 4)
    for axes in (steps_axes, samples_axes):
        if fit.b_crit is not None and shown[0] <= fit.b_crit <= shown[1]:
            axes.axvline(fit.b_crit, color=colour, linestyle="--", linewidth=1,
                         label=f"{label}: B_crit {fit.b_crit:,.0f}" if axes is steps_axes else None)
            low_crit, high_crit = fit.b_crit_ci95
            axes.axvspan(max(low_crit or fit.b_crit, grid[0]), min(high_crit or grid[-1], grid[-1]), color=colour,
                         alpha=0.06)
        elif axes is steps_axes:
            axes.plot([], [], "--", color=colour, label=f"{label}: B_crit {_crit_text(fit.b_crit)}, off the axes")
        if fit.b_simple is not None and shown[0] <= fit.b_simple <= shown[1]:
            axes.axvline(fit.b_simple, color=colour, linestyle="-.", linewidth=1,
                         label=f"{label}: B_simple near the goal {fit.b_simple:,.0f}" if axes is steps_axes else None)
        elif fit.b_simple is None and fit.b_simple_lower is not None and shown[0] <= fit.b_simple_lower <= shown[1]:
            # Unresolved: a bound, drawn as where B_simple starts at the earliest, not as its value.
            axes.axvspan(fit.b_simple_lower, shown[1], color=colour, alpha=0.25, hatch="//", fill=False,
                         label=(f"{label}: B_simple near the goal > {fit.b_simple_lower:,.0f} (unresolved)"
                                if axes is steps_axes else None))
    samples_axes.axhline(fit.e_min, color=colour, linestyle=":", linewidth=1)


def _crit_text(value: float | None) -> str:
    return "unbounded (perfect scaling at every batch fitted)" if value is None else f"{value:,.0f}"


def steps_to_target_figure(studies: Sequence[tuple[str, Sequence[TimeToTargetBatchRow], Sequence[TimeToTargetRunRow],
                                                   TimeToTargetFitRow | None]]) -> Figure:
    """Every study given (label, batches, best-factor runs, fit) on one pair of panels."""
    figure, (steps_axes, samples_axes) = plt.subplots(1, 2, figsize=(11, 5.6), layout="constrained")
    for number, (label, batches, seeds, fit) in enumerate(studies):
        study_panels((steps_axes, samples_axes), label, COLOURS[number % len(COLOURS)], batches, seeds, fit)
    every = [row.global_batch for _, batches, _, _ in studies for row in batches]
    for axes, ylabel in ((steps_axes, "steps to the goal"), (samples_axes, "samples to the goal")):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel("global batch (log scale)")
        axes.set_ylabel(ylabel + " (log scale)")
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        axes.yaxis.set_major_formatter(FuncFormatter(compact_number))
        axes.yaxis.set_minor_formatter(NullFormatter())
        axes.xaxis.set_minor_formatter(NullFormatter())
        if every:
            axes.set_xlim(min(every) / 1.6, max(every) * 1.6)
        axes.grid(True, which="major", alpha=0.3)
    steps_axes.set_title("Steps to the goal against the batch")
    samples_axes.set_title("Samples to the goal (dotted: E_min)")
    handles, labels = steps_axes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=7)
    return figure
