"""The time-to-target study's part of the report: the steps-to-goal figure (Shallue et al.'s
style), every batch with its sweep and its seeds, the fit with B_crit beside B_simple, and every
run; and its figure written on its own (`trainspeed plot` of its rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trainspeed.errors import UsageError
from trainspeed.gradients.rows import UNRESOLVED_REASON, bound_text
from trainspeed.report.figures import caption_machines, figure_block, save_figure
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Cell, Section, Table, interval, number, text, workload_label
from trainspeed.report.part import PlotRequest, ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.studies.time_to_target.figures import steps_to_target_figure
from trainspeed.studies.time_to_target.rows import (
    TimeToTargetBatchRow,
    TimeToTargetFitRow,
    TimeToTargetRunRow,
    TimeToTargetSettingsRow,
)

ROW_TYPES = (TimeToTargetSettingsRow, TimeToTargetRunRow, TimeToTargetBatchRow, TimeToTargetFitRow)


def _studies(rows: Sequence[object]) -> list[tuple[str, list, list, TimeToTargetFitRow | None]]:
    settings = [row for row in rows if isinstance(row, TimeToTargetSettingsRow)]
    studies = []
    for header in settings:
        of = [row for row in rows if getattr(row, "study_id", None) == header.study_id]
        batches = [row for row in of if isinstance(row, TimeToTargetBatchRow)]
        best = {row.global_batch: row.best_lr_factor for row in batches}
        runs = [row for row in of if isinstance(row, TimeToTargetRunRow) and best.get(row.global_batch) == row.lr_factor]
        fits = [row for row in of if isinstance(row, TimeToTargetFitRow)]
        label = f"{header.workload} {header.size}, {header.until}"
        studies.append((label, batches, runs, fits[0] if fits else None))
    return studies


def _bound(value: float | None) -> str:
    return "∞" if value is None else f"{value:,.0f}"


def _b_simple(value: float | None, lower_bound: float | None) -> Cell:
    """B_simple near the goal, or `> N` where it is unresolved (a lower bound, never a value)."""
    if value is not None or lower_bound is None:
        return number(value, "{:,.0f}")
    return Cell(bound_text(None, lower_bound), sort=float(lower_bound), numeric=True,
                title=f"unresolved: {UNRESOLVED_REASON}; a lower bound")


def study_section(reads: Sequence[Read]) -> Section:
    rows = [read.row for read in reads]
    section = Section(
        "time-to-target-study", "Time to target: steps to a goal against the global batch",
        "Each global batch trained to the goal (`trainspeed study time-to-target`): the learning rate tuned per batch "
        "on seed 0 (the sweep extended while its best factor lay at an edge), then every seed at the best factor; "
        "steps are interpolated between the two validations that bracket the crossing. The fit is S(B) = S_min (1 + "
        "B_crit / B), with 95% bootstrap intervals over seeds; B_simple is the gradient noise scale each run "
        "measured near the goal ('> N' where its |G|^2 was within its noise of 0: a lower bound, not a value). A batch that did not reach the goal says so and is left out of the fit.")
    studies = _studies(rows)
    if any(batches for _, batches, _, _ in studies):
        figure = steps_to_target_figure(studies)
        section.figures.append(figure_block(
            "fig-steps-to-target", "Steps and samples to the goal against the global batch (log-log): each seed a "
            "point, its mean a square, the fit with its 95% band, B_crit dashed, B_simple near the goal dash-dotted",
            figure, [read for read in reads if isinstance(read.row, TimeToTargetRunRow)]))
    fits = [read for read in reads if isinstance(read.row, TimeToTargetFitRow)]
    if fits:
        section.tables.append(Table(
            "table-time-to-target-fit", "The fit of S(B) per study: S_min, E_min and B_crit with 95% bootstrap "
            "intervals over seeds, beside B_simple near the goal",
            [("study", False), ("workload", False), ("goal", False), ("batches fitted", False), ("S_min", True),
             ("interval", False), ("E_min", True), ("interval", False), ("B_crit", True), ("interval", False),
             ("B_simple near goal", True), ("relative rms", True), ("left out", False)],
            [[text(f.study_id), text(workload_label(f.workload, f.workload_sha256, f.size)), text(f.until),
              text(", ".join(map(str, f.batches))), number(f.s_min, "{:,.1f}"), text(interval(f.s_min_ci95, "{:,.1f}")),
              number(f.e_min, "{:,.0f}"), text(interval(f.e_min_ci95, "{:,.0f}")), number(f.b_crit, "{:,.0f}"),
              text(f"[{_bound(f.b_crit_ci95[0])}, {_bound(f.b_crit_ci95[1])}]"), _b_simple(f.b_simple, f.b_simple_lower),
              number(f.relative_rms * 100, "{:.1f}%"), text("; ".join(f.left_out))]
             for f in (read.row for read in fits)], provenance(fits)))
    batches = [read for read in reads if isinstance(read.row, TimeToTargetBatchRow)]
    if batches:
        section.tables.append(Table(
            "table-time-to-target-batches", "Every global batch: its LR sweep (samples to the goal per factor, seed 0), "
            "the best factor, and its seeds' steps to the goal: their mean, and the smallest and largest",
            [("study", False), ("global batch", True), ("LR sweep: factor → samples", False), ("best factor", True),
             ("at an edge", False), ("seeds reached", False), ("steps, mean", True), ("min, max over seeds", False),
             ("samples, mean", True), ("B_simple near goal", True), ("outcome", False)],
            [[text(b.study_id), number(b.global_batch, "{:d}"),
              text(", ".join(f"{factor}: {'not reached' if samples is None else f'{samples:,.0f}'}"
                             for factor, samples in b.lr_sweep.items())),
              number(b.best_lr_factor, "{:g}"), text("yes" if b.best_at_edge else "no"),
              text(f"{b.reached} of {len(b.seeds)}"), number(b.steps_mean, "{:,.1f}"),
              text(interval(b.steps_min_max, "{:,.1f}")), number(b.samples_mean, "{:,.0f}"),
              _b_simple(b.b_simple, b.b_simple_lower),
              text(b.outcome)] for b in (read.row for read in batches)], provenance(batches)))
    runs = [read for read in reads if isinstance(read.row, TimeToTargetRunRow)]
    if runs:
        section.tables.append(Table(
            "table-time-to-target-runs", "Every run of the study",
            [("study", False), ("run", False), ("purpose", False), ("target", False), ("global batch", True),
             ("LR factor", True), ("peak LR", True), ("seed", True), ("outcome", False), ("steps", True),
             ("wall s to goal", True), ("command s", True), ("B_simple", True)],
            [[text(r.study_id), text(r.run), text(r.purpose), text(r.target), number(r.global_batch, "{:d}"),
              number(r.lr_factor, "{:g}"), number(r.peak_lr, "{:.3g}"), number(r.seed, "{:d}"), text(r.outcome),
              number(r.steps, "{:,.1f}"), number(r.wall_s, "{:,.1f}"), number(r.command_s, "{:,.1f}"),
              _b_simple(r.b_simple, r.b_simple_lower)] for r in (read.row for read in runs)], provenance(runs)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    reads = inputs.of(*ROW_TYPES)
    return [study_section(reads)] if reads else []


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    if request.baseline or request.run_id:
        raise UsageError(f"{request.results} holds time-to-target study rows: --baseline and --run-id are for bench rows")
    rows = [read.row for read in inputs.of(*ROW_TYPES)]
    studies = _studies(rows)
    if not any(batches for _, batches, _, _ in studies):
        raise UsageError(f"{request.results}: no time-to-target study batches to plot")
    figure = steps_to_target_figure(studies)
    caption_machines(figure, [row for row in rows if isinstance(row, TimeToTargetRunRow)])
    return save_figure(figure, request.stem)


PART = ReportPart(
    name="time-to-target study", kinds=tuple(RowKind(row_type) for row_type in ROW_TYPES), sections=sections,
    counts=lambda inputs: [("time-to-target study rows", len(inputs.of(*ROW_TYPES)))], plot=plot, plot_first=2)
