"""The scaling study's part of the report: N ranks against one, end to end, within each study
(where both ran side by side on the same machine: the study's 8 TPU cores against one GPU gave
11.23x), and its IO efficiency (real data against synthetic, per device)."""

from __future__ import annotations

from typing import Sequence

from trainspeed.report.figures import figure_block
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import (
    Cell,
    Section,
    Table,
    number,
    percent,
    ratio_cell,
    readable,
    text,
    workload_label,
)
from trainspeed.report.part import ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.rows import is_finite
from trainspeed.studies.scaling.rows import (
    ScalingRunRow,
    has_more_ranks,
    io_efficiency,
    scaling_key,
    vs_one_rank,
)
from trainspeed.train.figures import TrainBar, training_figure


def scaling_label(row: ScalingRunRow) -> str:
    return (f"{workload_label(row.workload, row.workload_sha256, row.size)}: {row.target} x{row.world_size}, "
            f"{row.batch_size_per_device}/device, {row.data} data ({row.study_id})")


def scaling_bars(scaling: Sequence[ScalingRunRow]) -> list[TrainBar]:
    """One bar per configuration of a study, over its repeats, with its ratio to one rank."""
    bars = []
    groups: dict[tuple, list[ScalingRunRow]] = {}
    for row in scaling:
        if is_finite(row.end_to_end_samples_per_s):
            groups.setdefault(scaling_key(row), []).append(row)
    for members in groups.values():
        first = members[0]
        bars.append(TrainBar(
            scaling_label(first) + (f" ({len(members)} repeats)" if len(members) > 1 else ""),
            [r.end_to_end_samples_per_s for r in members],
            [r.data_wait_fraction for r in members if is_finite(r.data_wait_fraction)],
            [r.data_wait_fraction_worst_rank for r in members if is_finite(r.data_wait_fraction_worst_rank)],
            ratio=None if first.world_size == 1 else vs_one_rank(scaling, first),
            is_baseline=first.world_size == 1 and has_more_ranks(scaling, first)))
    return bars


def scaling_section(scaling: Sequence[Read[ScalingRunRow]]) -> Section:
    section = Section(
        "scaling", "Scaling study: N ranks against one",
        "The scaling study's runs: end-to-end samples/s (all samples over the wall time from the first to the last "
        "step, all ranks) of N ranks, each reading its own data, over one rank of the same study, both run side by "
        "side on the same machine (the study's 8 TPU cores against one GPU: 11.23x); the right panel is the share "
        "of time ranks waited for data. IO efficiency vs synthetic: the real-data runs' per-device samples/s over "
        "the synthetic-data runs' of the same study.",
    )
    scaling_rows = [read.row for read in scaling]
    bars = scaling_bars(scaling_rows)
    if bars:
        section.figures.append(figure_block("fig-scaling", "End-to-end samples/s, N ranks vs one within each scaling "
                                            "study, and data wait", training_figure(bars), list(scaling)))
    rows = []
    for read in scaling:
        row = read.row
        study = [r for r in scaling_rows if r.study_id == row.study_id]
        per_device_bench = (row.samples_per_s_per_device / row.bench_samples_per_s
                            if is_finite(row.samples_per_s_per_device) and row.bench_samples_per_s else None)
        rows.append([
            text(row.study_id), text(workload_label(row.workload, row.workload_sha256, row.size)), text(row.target),
            number(row.repeat, "{:d}"), text(row.data), number(row.world_size, "{:d}"),
            number(row.batch_size_per_device, "{:d}"), readable(row.end_to_end_samples_per_s),
            readable(row.steady_samples_per_s), readable(row.samples_per_s_per_device),
            percent(row.data_wait_fraction), percent(row.data_wait_fraction_worst_rank),
            ratio_cell(vs_one_rank(study, row), "no one-rank run in this study")
            if row.world_size != 1 or has_more_ranks(study, row) else Cell("no N-rank run in this study", numeric=True),
            number(per_device_bench, "{:.3f}"),
            number(io_efficiency(study, row.batch_size_per_device, row.world_size), "{:.3f}"),
            text(read.source),
        ])
    section.tables.append(Table(
        "table-scaling", "Every run of a scaling study (ratios within its own study only; IO efficiency vs "
        "synthetic: medians of the real-data runs over those of the synthetic-data runs of the same study)",
        [("study", False), ("workload", False), ("target", False), ("repeat", True), ("data", False),
         ("ranks", True), ("batch/device", True), ("end-to-end samples/s", True), ("steady samples/s", True),
         ("per device", True), ("data wait", True), ("worst rank", True), ("vs one rank", True),
         ("IO efficiency vs bench", True), ("IO efficiency vs synthetic", True), ("row", False)],
        rows, provenance(scaling)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    rows = inputs.of(ScalingRunRow)
    return [scaling_section(rows)] if rows else []


PART = ReportPart(name="scaling", kinds=(RowKind(ScalingRunRow),), sections=sections,
                  counts=lambda inputs: [("scaling-study runs", len(inputs.of(ScalingRunRow)))])
