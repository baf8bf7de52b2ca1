"""The trainer's figures: end-to-end samples/s per configuration with where its ranks waited for
data (a scaling study draws its runs with them too), each run's training and validation curves, its
gradient noise scale against samples, and a batch schedule's global batch against samples."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, PercentFormatter

from trainspeed.gradients.rows import UNRESOLVED_REASON
from trainspeed.report.figures import COLOURS, compact_number, plt
from trainspeed.train.runs import TrainRun


@dataclass(frozen=True)
class TrainBar:
    """One training configuration: the median of its runs' end-to-end samples/s, their spread, and
    its ratio to the one-rank configuration of the same scaling study (None: none to compare with)."""

    label: str
    rates: list[float]
    data_wait: list[float]
    data_wait_worst: list[float]
    ratio: float | None = None
    is_baseline: bool = False

    @property
    def samples_per_s(self) -> float:
        return statistics.median(self.rates)

    @property
    def low(self) -> float:
        return min(self.rates)

    @property
    def high(self) -> float:
        return max(self.rates)


def training_figure(bars: Sequence[TrainBar]) -> Figure:
    """End-to-end samples/s per configuration ("N ranks vs one" only within one scaling study), and
    where each configuration's ranks waited for data."""
    figure, (rate_axes, wait_axes) = plt.subplots(1, 2, figsize=(13, 1.6 + 0.5 * len(bars)), constrained_layout=True,
                                                  sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    positions = list(range(len(bars)))[::-1]
    for position, bar in zip(positions, bars):
        colour = "#1971c2" if bar.ratio is not None and not bar.is_baseline else "#adb5bd"
        rate_axes.barh(position, bar.samples_per_s, color=colour,
                       xerr=[[bar.samples_per_s - bar.low], [bar.high - bar.samples_per_s]] if len(bar.rates) > 1 else None,
                       capsize=3)
        text = f"{bar.samples_per_s:,.0f}/s"
        if bar.is_baseline:
            text += "  (the study's one-rank run)"
        elif bar.ratio is not None:
            text += f"  {bar.ratio:.2f}x one rank"
        rate_axes.annotate(text, (bar.high, position), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        if bar.data_wait:
            wait_axes.barh(position + 0.18, statistics.median(bar.data_wait), height=0.35, color="#f59f00",
                           label="mean over ranks" if position == positions[0] else None)
        if bar.data_wait_worst:
            wait_axes.barh(position - 0.18, statistics.median(bar.data_wait_worst), height=0.35, color="#e8590c",
                           label="worst rank" if position == positions[0] else None)
    rate_axes.set_yticks(positions, [bar.label for bar in bars], fontsize=8)
    rate_axes.set_xlim(0, max(bar.high for bar in bars) * 1.45)
    rate_axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
    rate_axes.set(xlabel="end-to-end samples/s (all ranks; ratio to one rank of the same scaling study)",
                  title="End-to-end training: N ranks vs one")
    wait_axes.xaxis.set_major_formatter(PercentFormatter(1.0))
    wait_axes.set(xlabel="share of time waiting for data", title="Data wait")
    for axes in (rate_axes, wait_axes):
        axes.grid(True, axis="x", alpha=0.3)
    if wait_axes.get_legend_handles_labels()[0]:
        wait_axes.legend(fontsize=8)
    return figure


COLUMNS = 4


def curves_figure(runs: Sequence[TrainRun]) -> Figure:
    """Training loss and every validation metric the runs' workloads name, per run, against step."""
    names = [("train", "loss")] if any(run.train_curve for run in runs) else []
    names += [("val", name) for name in dict.fromkeys(name for run in runs for record in run.val_curve
                                                      for name in record.metrics)]
    columns = min(COLUMNS, len(names))
    rows = math.ceil(len(names) / columns)
    figure, axes_grid = plt.subplots(rows, columns, figsize=(4.4 * columns + 1, 3.8 * rows), constrained_layout=True,
                                     squeeze=False)
    axes_list = [axes for row in axes_grid for axes in row]
    for index, run in enumerate(runs):
        colour = COLOURS[index % len(COLOURS)]
        for (kind, name), axes in zip(names, axes_list):
            if kind == "train":
                points = [(record.step, record.loss) for record in run.train_curve]
            else:
                points = [(record.step, record.metrics[name]) for record in run.val_curve if name in record.metrics]
            if points:
                axes.plot(*zip(*points), color=colour, label=run.label, marker="o" if kind == "val" else None)
    for (kind, name), axes in zip(names, axes_list):
        title = "training loss (logged windows)" if kind == "train" else f"validation {name}"
        axes.set(xlabel="step", ylabel=title, title=title[0].upper() + title[1:])
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=7)
    for axes in axes_list[len(names):]:
        axes.set_visible(False)
    return figure


LOWER_BOUND_MARKER = "^"
LOWER_BOUND_LABEL = f"unresolved window: B_simple above this ({UNRESOLVED_REASON})"


def noise_scale_figure(runs: Sequence[TrainRun]) -> Figure:
    """Training loss (left) and B_simple's moving average per network (right), against samples: the
    noise scale grows as the loss falls. A window whose |G|^2 is unresolved has no value, only a
    lower bound (`trainspeed.gradients.rows`): it is drawn as an upward triangle at its bound, apart
    from the curve, which joins the values only."""
    figure, (loss_axes, noise_axes) = plt.subplots(1, 2, figsize=(13, 4.2), constrained_layout=True)
    bounds_drawn = False
    for index, run in enumerate(runs):
        colour = COLOURS[index % len(COLOURS)]
        if run.train_curve:
            loss_axes.plot(*zip(*_loss_by_samples(run)), color=colour, label=run.label)
        networks = list(dict.fromkeys(record.network for record in run.noise_curve))
        for network, style in zip(networks, ("-", "--", ":", "-.")):
            readings = [(record.samples, record.reading) for record in run.noise_curve if record.network == network]
            points = [(samples, reading.value) for samples, reading in readings
                      if reading.value is not None and reading.value > 0]
            bounds = [(samples, reading.lower_bound) for samples, reading in readings
                      if reading.resolved is False and reading.lower_bound is not None and reading.lower_bound > 0]
            method = next(record.method for record in run.noise_curve if record.network == network)
            if points:
                noise_axes.plot(*zip(*points), color=colour, linestyle=style,
                                label=f"{run.label}: {network} ({method})")
            if bounds:
                noise_axes.plot(*zip(*bounds), color=colour, linestyle="none", marker=LOWER_BOUND_MARKER,
                                markersize=5, fillstyle="none",
                                label=None if points else f"{run.label}: {network} ({method}), lower bounds only")
                bounds_drawn = True
    loss_axes.set(xlabel="samples", ylabel="training loss", title="Training loss")
    noise_axes.set(xlabel="samples", ylabel="B_simple = tr(Sigma) / |G|^2 (moving average)",
                   title="Gradient noise scale")
    if noise_axes.get_lines():
        noise_axes.set_yscale("log")
        noise_axes.yaxis.set_major_formatter(FuncFormatter(compact_number))
        noise_axes.yaxis.set_minor_formatter(FuncFormatter(compact_number))
        noise_axes.tick_params(axis="y", which="minor", labelsize=7)
    for axes in (loss_axes, noise_axes):
        axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
        axes.grid(True, alpha=0.3)
        handles, labels = axes.get_legend_handles_labels()
        if axes is noise_axes and bounds_drawn:
            handles.append(Line2D([], [], color="grey", linestyle="none", marker=LOWER_BOUND_MARKER, fillstyle="none"))
            labels.append(LOWER_BOUND_LABEL)
        if handles:
            axes.legend(handles, labels, fontsize=7)
    return figure


def _loss_by_samples(run: TrainRun) -> list[tuple[float, float]]:
    """(samples, loss) of each logged window: the samples its row records, else (a row written
    before rows recorded them, at a fixed batch) its step at the run's batch."""
    return [(record.samples if record.samples is not None else record.step * run.row.global_batch, record.loss)
            for record in run.train_curve]


def batch_schedule_figure(runs: Sequence[TrainRun]) -> Figure:
    """The global batch against samples (right, with B_simple on the same axes: both are batches)
    beside the training loss (left): a schedule's switches, and where the noise scale stood at each."""
    figure, (loss_axes, batch_axes) = plt.subplots(1, 2, figsize=(13, 4.2), constrained_layout=True)
    for index, run in enumerate(runs):
        colour = COLOURS[index % len(COLOURS)]
        if run.train_curve:
            loss_axes.plot(*zip(*_loss_by_samples(run)), color=colour, label=run.label)
        schedule = run.row.batch_schedule
        batch_axes.plot(*zip(*run.batch_curve()), color=colour, linewidth=2,
                        label=f"{run.label}: global batch ({schedule.schedule if schedule else 'fixed'})")
        for switch in run.batch_switches:
            batch_axes.plot(switch.samples, switch.to_global_batch, "o", color=colour, markersize=4)
        noise = [(record.samples, record.b_simple_avg) for record in run.noise_curve
                 if record.b_simple_avg is not None and record.b_simple_avg > 0]
        if noise:
            batch_axes.plot(*zip(*noise), color=colour, linestyle=":", label=f"{run.label}: B_simple (moving average)")
    loss_axes.set(xlabel="samples", ylabel="training loss", title="Training loss")
    batch_axes.set(xlabel="samples", ylabel="samples per step", title="Global batch and B_simple against samples")
    batch_axes.set_yscale("log", base=2)
    batch_axes.yaxis.set_major_formatter(FuncFormatter(compact_number))
    for axes in (loss_axes, batch_axes):
        axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=7)
    return figure
