"""The critical-batch study's part of the report: the critical batch against the base run's
samples with B_simple on the same axes, every point with its tolerance and rule, every branch, and
the samples the study spent; and its figure written on its own (`trainspeed plot` of its rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trainspeed.errors import UsageError
from trainspeed.report.figures import caption_machines, figure_block, save_figure
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, number, text, workload_label
from trainspeed.report.part import PlotRequest, ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.studies.critical_batch.figures import critical_batch_figure
from trainspeed.studies.critical_batch.rows import CriticalBatchBranchRow, CriticalBatchRow, CriticalBatchSettingsRow

ROW_TYPES = (CriticalBatchSettingsRow, CriticalBatchBranchRow, CriticalBatchRow)


def _studies(rows: Sequence[object]) -> list[tuple[str, CriticalBatchSettingsRow, list[CriticalBatchRow]]]:
    studies = []
    for header in (row for row in rows if isinstance(row, CriticalBatchSettingsRow)):
        points = [row for row in rows if isinstance(row, CriticalBatchRow) and row.study_id == header.study_id]
        # the base run by its folder's name: a label the legend holds whole (the table gives its path)
        label = f"{workload_label(header.workload, header.workload_sha256, header.size)} ({Path(header.base_run).name})"
        studies.append((label, header, points))
    return studies


def _spent(header: CriticalBatchSettingsRow) -> str:
    """What the branches' samples were as a fraction of, from what the row holds: its optional
    fields are each read on their own (a row written or edited elsewhere may hold one without another)."""
    base = f"{header.fraction_of_base_run:.1%} of the base run's {header.base_samples:,}"
    if header.fraction_of_time_to_target is None:
        return f"{base}; no time-to-target study given (--compare-study)"
    samples = "samples" if header.time_to_target_samples is None else f"{header.time_to_target_samples:,}"
    rows = "" if header.time_to_target_rows is None else f" ({header.time_to_target_rows})"
    return f"{header.fraction_of_time_to_target:.1%} of the time-to-target study's {samples}{rows}; {base}"


def study_section(reads: Sequence[Read]) -> Section:
    rows = [read.row for read in reads]
    section = Section(
        "critical-batch-study", "The critical batch along a run, from its own checkpoints",
        "At each point of a base run (`trainspeed study critical-batch --from RUN_DIR`), branches start from its "
        "checkpoint (`train --init-from`: its networks and optimizer moments) at batches B x f, each at the base "
        "run's learning rate there times its LR rule's factor, constant, for the same samples, several seeds; then one "
        "validation. A batch matches when its mean metric is no worse than the base batch's (f = 1) by more than the "
        "tolerance, taken from the spread of the f = 1 seeds (the rule is in every row); the critical batch is the "
        "largest batch that matches with every smaller one. B_simple is the base run's noise scale; where its "
        "|G|^2 estimate was not positive it is unresolved and left out, with the reason in the row.")
    studies = _studies(rows)
    if any(points for _, _, points in studies):
        section.figures.append(figure_block(
            "fig-critical-batch", "The critical batch against the base run's samples (a square: measured; a triangle: "
            "at least this, the largest batch tried still matched), every batch tried (filled: matched), and the base "
            "run's B_simple on the same axes",
            critical_batch_figure(studies), [read for read in reads if isinstance(read.row, CriticalBatchRow)]))
    headers = [read for read in reads if isinstance(read.row, CriticalBatchSettingsRow)]
    if headers:
        section.tables.append(Table(
            "table-critical-batch-studies", "Each study: its base run, its branches, and the samples they spent",
            [("study", False), ("workload", False), ("base run", False), ("base batch", True), ("base samples", True),
             ("metric", False), ("LR rule", False), ("branch target", False), ("samples per branch", True),
             ("branches", True), ("processes", True), ("wall s", True), ("samples spent", True),
             ("as a fraction of", False)],
            [[text(h.study_id), text(workload_label(h.workload, h.workload_sha256, h.size)), text(h.base_run),
              number(h.base_global_batch, "{:d}"), number(h.base_samples, "{:,d}"), text(f"val/{h.metric} ({h.op})"),
              text(h.lr_rule), text(f"{h.target} x{h.nproc}"), number(h.branch_samples, "{:,d}"),
              number(h.branch_runs, "{:d}"), number(h.branch_processes, "{:d}"), number(h.total_s, "{:,.0f}"),
              number(h.samples_spent, "{:,d}"), text(_spent(h))]
             for h in (read.row for read in headers)], provenance(headers)))
    points = [read for read in reads if isinstance(read.row, CriticalBatchRow)]
    if points:
        section.tables.append(Table(
            "table-critical-batch-points", "Every point: each factor's mean metric over its seeds (how much worse than "
            "the base batch), the tolerance and its rule, the critical batch and B_simple there",
            [("study", False), ("step", True), ("samples", True), ("LR at step", True), ("factor: mean (worse by)", False),
             ("tolerance", True), ("tolerance rule", False), ("critical batch", False), ("B_simple", True),
             ("B_simple note", False)],
            [[text(p.study_id), number(p.step, "{:d}"), number(p.samples, "{:,d}"), number(p.lr_at_step, "{:.3g}"),
              text("; ".join(f"x{factor:g}: {mean:.4g} ({worse:+.3g}){'' if ok else ', no match'}"
                             for factor, mean, worse, ok in zip(p.factors, p.means, p.worse_by, p.matches))),
              number(p.tolerance, "{:.3g}"), text(p.tolerance_rule), text(p.critical_text),
              number(p.b_simple, "{:,.0f}"), text(p.b_simple_note)] for p in (read.row for read in points)],
            provenance(points)))
    branches = [read for read in reads if isinstance(read.row, CriticalBatchBranchRow)]
    if branches:
        section.tables.append(Table(
            "table-critical-batch-branches", "Every branch of the study",
            [("study", False), ("branch", False), ("from step", True), ("factor", True), ("global batch", True),
             ("target", False), ("seed", True), ("LR", True), ("steps", True), ("metric", True), ("wall s", True)],
            [[text(b.study_id), text(b.run), number(b.step, "{:d}"), number(b.factor, "{:g}"),
              number(b.global_batch, "{:d}"), text(f"{b.target} x{b.nproc}"), number(b.seed, "{:d}"),
              number(b.lr, "{:.3g}"), number(b.steps, "{:d}"), number(b.value, "{:.4g}"), number(b.wall_s, "{:,.1f}")]
             for b in (read.row for read in branches)], provenance(branches)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    reads = inputs.of(*ROW_TYPES)
    return [study_section(reads)] if reads else []


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    if request.baseline or request.run_id:
        raise UsageError(f"{request.results} holds critical-batch study rows: --baseline and --run-id are for bench rows")
    rows = [read.row for read in inputs.of(*ROW_TYPES)]
    studies = _studies(rows)
    if not any(points for _, _, points in studies):
        raise UsageError(f"{request.results}: no critical-batch points to plot")
    figure = critical_batch_figure(studies)
    caption_machines(figure, [row for row in rows if isinstance(row, CriticalBatchBranchRow)])
    return save_figure(figure, request.stem)


PART = ReportPart(
    name="critical-batch study", kinds=tuple(RowKind(row_type) for row_type in ROW_TYPES), sections=sections,
    counts=lambda inputs: [("critical-batch study rows", len(inputs.of(*ROW_TYPES)))], plot=plot, plot_first=2)
