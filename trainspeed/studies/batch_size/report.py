"""The batch-size study's part of the report: validation at equal samples and equal steps,
training time and playing strength per global batch, the study's plan and each batch's samples/s,
every run, each framing's strength and each comparison with its verdict; and its figure written on
its own (`trainspeed plot` of its rows)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from trainspeed.errors import UsageError
from trainspeed.report.figures import (
    COLOURS,
    EVEN_RANK,
    caption_machines,
    figure_block,
    plt,
    save_figure,
)
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, interval, number, percent, slug, text
from trainspeed.report.part import PlotRequest, ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.studies.batch_size.rows import (
    BatchSizeBatchRow,
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeSettingsRow,
    BatchSizeStrengthRow,
)

ROW_TYPES = (BatchSizeSettingsRow, BatchSizeRunRow, BatchSizeBatchRow, BatchSizeStrengthRow, BatchSizeComparisonRow)


FRAMING_STYLES = {"equal samples": "-", "equal steps": ":", "equal wall time": "--"}


def study_figure(runs: Sequence[BatchSizeRunRow], batches: Sequence[BatchSizeBatchRow],
                 strengths: Sequence[BatchSizeStrengthRow]) -> Figure:
    """Validation loss and accuracy at equal samples (filled) and equal steps (hollow) and training
    time against the global batch, every run a small point and each batch's mean over its seeds a
    line; then playing strength in each framing, each seed a point, the line the mean over seeds and
    deals with its interval over both."""
    panels = [("val_loss", "equal_steps_val_loss", "validation loss"),
              ("val_accuracy", "equal_steps_val_accuracy", "validation accuracy"),
              ("train_wall_s", None, "training wall time (s)")]
    count = len(panels) + bool(strengths)
    figure, axes_list = plt.subplots(1, count, figsize=(4.2 * count + 1, 4.4), constrained_layout=True, squeeze=False)
    batches = sorted(batches, key=lambda b: b.global_batch)
    all_batches = sorted({r.global_batch for r in [*runs, *batches, *strengths]})
    factors = sorted({r.lr_factor for r in runs})
    for axes, (name, equal_steps, label) in zip(axes_list[0], panels):
        for run in runs:
            colour = COLOURS[factors.index(run.lr_factor) % len(COLOURS)]
            x = math.log2(run.global_batch) + 0.04 * (run.train_seed % 5 - 2)
            axes.plot(x, getattr(run, name), "o", markersize=4, color=colour, alpha=0.8)
            if equal_steps:
                axes.plot(x, getattr(run, equal_steps), "o", markersize=5, color=colour, markerfacecolor="none")
        if batches:
            xs = [math.log2(b.global_batch) for b in batches]
            axes.plot(xs, [getattr(b, name) for b in batches], "-", color="black", label="best LR, mean over seeds")
            if equal_steps:
                axes.plot(xs, [getattr(b, equal_steps) for b in batches], "--", color="black", label="same, at equal steps")
        if name == "val_accuracy":
            axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        axes.set(ylabel=label, title=label[0].upper() + label[1:], xlabel="global batch (log2 scale)")
    if strengths:
        axes = axes_list[0][-1]
        for framing, style in FRAMING_STYLES.items():
            own = sorted((row for row in strengths if row.framing == framing), key=lambda row: row.global_batch)
            if not own:
                continue
            xs = [math.log2(row.global_batch) for row in own]
            shift = 0.06 * (list(FRAMING_STYLES).index(framing) - 1)
            axes.errorbar([x + shift for x in xs], [row.mean_rank for row in own],
                          yerr=[[row.mean_rank - row.mean_rank_ci95[0] for row in own],
                                [row.mean_rank_ci95[1] - row.mean_rank for row in own]],
                          fmt="o" + style, color="black", capsize=4, label=framing)
            for x, row in zip(xs, own):
                axes.plot([x + shift] * len(row.mean_rank_per_seed), row.mean_rank_per_seed, ".", color="grey")
        axes.axhline(EVEN_RANK, color="grey", linestyle="--", linewidth=0.8)
        axes.set(ylabel="mean rank vs 3 rule-based (1 best)", xlabel="global batch (log2 scale)",
                 title="Strength, 95% interval over seeds and deals")
        axes.legend(fontsize=7)
    for axes in axes_list[0]:
        axes.set_xticks([math.log2(b) for b in all_batches], [str(b) for b in all_batches])
        axes.grid(True, alpha=0.3)
    first = axes_list[0][0]
    for factor in factors:
        first.plot([], [], "o", color=COLOURS[factors.index(factor) % len(COLOURS)],
                   label=f"run, LR x{factor:g} of the square-root-scaled")
    first.plot([], [], "o", color="grey", markerfacecolor="none", label="hollow: at equal steps")
    first.legend(fontsize=7)
    return figure


def batch_size_section(rows: Sequence[Read[Any]]) -> Section:
    section = Section(
        "batch-size-study", "Batch-size study",
        "Does a larger global batch give a stronger policy? The same model trained on the same data and the same "
        "number of samples at each global batch, the learning rate tuned per batch on one seed, then several seeds: "
        "validation at equal samples (filled) and equal steps (hollow), training time, and playing strength against "
        "three rule-based agents in three framings (equal samples, equal steps, equal wall time at each batch's "
        "measured samples/s), with 95% intervals over seeds and deals. Each comparison's verdict is read from its "
        "interval: inconclusive where it holds 0, with the difference the study could have detected.",
    )
    for study in dict.fromkeys(read.row.study_id for read in rows):
        own = [read for read in rows if read.row.study_id == study]
        runs = [read.row for read in own if isinstance(read.row, BatchSizeRunRow)]
        batches = [read.row for read in own if isinstance(read.row, BatchSizeBatchRow)]
        strengths = [read.row for read in own if isinstance(read.row, BatchSizeStrengthRow)]
        if runs or strengths:
            section.figures.append(figure_block(
                f"fig-batch-size-{slug(study)}", f"Batch-size study {study}: validation, time and strength per global batch",
                study_figure(runs, batches, strengths),
                [read for read in own if isinstance(read.row, BatchSizeRunRow)]))
    settings = [read for read in rows if isinstance(read.row, BatchSizeSettingsRow)]
    if settings:
        section.tables.append(Table(
            "table-batch-size-settings", "Each study: its plan and each batch's samples/s on one device",
            [("study", False), ("seeds", True), ("games per policy", True), ("planned minimum detectable difference", True),
             ("samples per run", True), ("samples/s per global batch (one bench run)", False), ("train (s)", True),
             ("evaluate (s)", True)],
            [[text(r.row.study_id), number(r.row.power.seeds, "{:d}"), number(4 * r.row.power.deals, "{:,d}"),
              number(r.row.power.minimum_detectable_difference, "{:.3f}"), number(r.row.settings.samples, "{:,d}"),
              text(", ".join(f"{batch}: {value:,.0f}" for batch, value in r.row.samples_per_s.items())),
              number(r.row.train_s, "{:,.0f}"), number(r.row.eval_s, "{:,.0f}")] for r in settings],
            provenance(settings)))
    runs = [read for read in rows if isinstance(read.row, BatchSizeRunRow)]
    if runs:
        section.tables.append(Table(
            "table-batch-size-study", "Every run",
            [("study", False), ("global batch", True), ("LR factor", True), ("peak LR", True), ("train seed", True),
             ("steps", True), ("val loss, equal samples", True), ("val accuracy, equal samples", True),
             ("val loss, equal steps", True), ("val accuracy, equal steps", True), ("train wall (s)", True)],
            [[text(r.row.study_id), number(r.row.global_batch, "{:d}"), number(r.row.lr_factor, "{:g}"),
              number(r.row.peak_lr, "{:.3g}"), number(r.row.train_seed, "{:d}"), number(r.row.steps, "{:d}"),
              number(r.row.val_loss, "{:.4f}"), percent(r.row.val_accuracy, "{:.2f}%"),
              number(r.row.equal_steps_val_loss, "{:.4f}"), percent(r.row.equal_steps_val_accuracy, "{:.2f}%"),
              number(r.row.train_wall_s, "{:,.0f}")] for r in runs],
            provenance(runs)))
    strengths = [read.row for read in rows if isinstance(read.row, BatchSizeStrengthRow)]
    if strengths:
        section.tables.append(Table(
            "table-batch-size-strength", "Each global batch in each framing: its seeds against three rule-based agents",
            [("study", False), ("framing", False), ("global batch", True), ("step", True), ("samples", True),
             ("seeds", False), ("games per seed", True), ("mean rank", True), ("95% interval (seeds x deals)", False),
             ("seed sd", True)],
            [[text(r.study_id), text(r.framing), number(r.global_batch, "{:d}"), number(r.step, "{:d}"),
              number(r.samples, "{:,d}"), text(",".join(map(str, r.seeds))), number(r.games_per_seed, "{:d}"),
              number(r.mean_rank, "{:.3f}"), text(interval(r.mean_rank_ci95, "{:.3f}")), number(r.seed_sd, "{:.3f}")]
             for r in strengths]))
    comparisons = [read.row for read in rows if isinstance(read.row, BatchSizeComparisonRow)]
    if comparisons:
        section.tables.append(Table(
            "table-batch-size-comparisons",
            "The largest global batch against another: mean rank difference (head to head: its mean rank against "
            "three copies of the other, minus 2.5); below 0, the larger batch played better",
            [("study", False), ("framing", False), ("global batch", True), ("versus", True), ("difference", True),
             ("95% interval", False), ("minimum detectable", True), ("seeds", True), ("deals", True),
             ("verdict on a stronger larger batch", False)],
            [[text(c.study_id), text(c.framing), number(c.global_batch, "{:d}"), number(c.versus_batch, "{:d}"),
              number(c.mean_rank_difference, "{:+.3f}"), text(interval(c.ci95, "{:+.3f}")),
              number(c.minimum_detectable_difference, "{:.3f}"), number(c.seeds, "{:d}"), number(c.deals, "{:d}"),
              text(c.verdict)] for c in comparisons]))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    rows = inputs.of(*ROW_TYPES)
    return [batch_size_section(rows)] if rows else []


def plot_batch_size_study(rows: Sequence[object], out_stem: Path) -> list[Path]:
    """The batch-size study's figure (the report's) from its rows, captioned with its runs' machine."""
    runs = [row for row in rows if isinstance(row, BatchSizeRunRow)]
    strengths = [row for row in rows if isinstance(row, BatchSizeStrengthRow)]
    if not runs and not strengths:
        raise UsageError("no batch-size study runs or strengths to plot")
    figure = study_figure(runs, [row for row in rows if isinstance(row, BatchSizeBatchRow)], strengths)
    caption_machines(figure, runs)
    return save_figure(figure, out_stem)


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    if request.baseline or request.run_id:
        raise UsageError(f"{request.results} holds batch-size study rows: --baseline and --run-id are for bench rows")
    return plot_batch_size_study([read.row for read in inputs.of(*ROW_TYPES)], request.stem)


PART = ReportPart(
    name="batch-size study", kinds=tuple(RowKind(row_type) for row_type in ROW_TYPES), sections=sections,
    counts=lambda inputs: [("batch-size study rows", len(inputs.of(*ROW_TYPES)))], plot=plot, plot_first=2)
