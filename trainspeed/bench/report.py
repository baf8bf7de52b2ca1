"""The bench's part of the report: the study's ratio figure, absolute samples/s and MFU (with each
XLA row's port check: fallbacks, compiles and host syncs in its timed windows), peak memory and the
OOM boundary, first-step (compile) time, and `trainspeed plot`'s figure.

Rows are grouped per workload (name, definition, size) and results file; a ratio is a row over the
baseline of its own run, or the cell says there was none. Remote rows are bench rows too: the
remote part (`remote_report.py`) shows them, this one the local rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure

from trainspeed.bench import figures as bench_figures
from trainspeed.bench.mfu import measured_peak_mfu, measured_peak_of
from trainspeed.bench.ratios import NO_BASELINE, RatioTable, ratio_table
from trainspeed.bench.results import STATUSES, ResultRow
from trainspeed.errors import UsageError
from trainspeed.report.figures import caption_machines, figure_block, save_figure
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import (
    GIB,
    Cell,
    Section,
    Table,
    measured,
    number,
    percent,
    ratio_cell,
    readable,
    slug,
    status_cell,
    text,
    workload_label,
)
from trainspeed.report.part import PlotRequest, ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.rows import Source

SWITCH = "+"


@dataclass(frozen=True)
class BenchRow(Read[ResultRow]):
    """A bench row as read, with what its figures and tables name it by."""

    @property
    def is_remote(self) -> bool:
        return self.row.is_remote

    @property
    def base_size(self) -> str:
        return self.row.size.split(SWITCH)[0]

    @property
    def switches(self) -> str:
        """The size's switches after `+` (a speed or memory switch runs the same model another way)."""
        return self.row.size.partition(SWITCH)[2]

    @property
    def series(self) -> str:
        """The row's line in figures and tables: the target, plus the feed when host-fed, plus the
        size's switches."""
        return self.row.series + (f" [{self.switches}]" if self.switches else "")

    @property
    def workload_label(self) -> str:
        return workload_label(self.row.workload, self.row.workload_sha256, self.base_size)


def check_row(row: ResultRow, source: Source) -> None:
    """What a bench row must hold beyond its types."""
    if row.status not in STATUSES:
        raise UsageError(f"{source}: unknown status {row.status!r} (one of {', '.join(STATUSES)})")
    if row.status in ("ok", "invalid") and row.samples_per_s is None:
        raise UsageError(f"{source}: a row with status {row.status} needs a number in samples_per_s")


def mfu_cell(row: ResultRow) -> Cell:
    """MFU in percent, its title the peak it divides by; a refused peak (the row's, or one above
    100% from before the bench refused those) says so instead."""
    mfu = bench_figures.plausible_mfu(row.mfu)
    if mfu is not None:
        cell = percent(mfu)
        return Cell(cell.text, sort=cell.sort, numeric=True, title=f"against {peak_text(row)}")
    if row.peak_refused or row.mfu is not None:
        return Cell("peak refused", numeric=True, title=row.peak_refused)
    return Cell("–", numeric=True)


def peak_text(row: ResultRow) -> str:
    """The peak the row's MFU divides by, and which it is: `197 nominal (TPU v5e bf16)`,
    `171.2 measured`, `100 given`."""
    if not row.peak_tflops:
        return "–"
    chip = f" ({row.nominal_peak_chip})" if row.nominal_peak_chip else ""
    return f"{row.peak_tflops:,.4g} {row.peak_tflops_source or 'source not recorded'}{chip}"


def measured_mfu_cell(row: ResultRow) -> Cell:
    """MFU against the matmul chain measured on the device (an older row's MFU where that was its
    peak); a dash where none was measured or it was below the achieved rate."""
    mfu = bench_figures.plausible_mfu(measured_peak_mfu(row))
    if mfu is None:
        return Cell("–", numeric=True)
    cell = percent(mfu)
    peak = measured_peak_of(row)
    return Cell(cell.text, sort=cell.sort, numeric=True, title=f"against {peak:,.4g} TFLOP/s measured" if peak else None)


@dataclass(frozen=True)
class BenchGroup:
    """One workload (name, definition, size) of one results file: its rows and their ratio table."""

    label: str
    rows: list[BenchRow]
    table: RatioTable

    def wrapped(self, row: ResultRow) -> BenchRow:
        return next(read for read in self.rows if read.row is row)

    @property
    def newest(self) -> list[BenchRow]:
        return [self.wrapped(row) for row in self.table.newest.values()]


def bench_groups(rows: Sequence[BenchRow], baselines: Sequence[str]) -> list[BenchGroup]:
    """One group per workload (name, definition, size) and results file: a file is one campaign of
    measurements, and a figure of two files would lay one's rows over the other's. The file is
    named only where the workload's rows come from more than one."""
    files: dict[str, set[str]] = {}
    for row in rows:
        files.setdefault(row.workload_label, set()).add(row.source.path)
    labelled: dict[str, list[BenchRow]] = {}
    for row in rows:
        several = len(files[row.workload_label]) > 1
        label = row.workload_label + (f" ({Path(row.source.path).name})" if several else "")
        labelled.setdefault(label, []).append(row)
    groups = []
    for label, members in sorted(labelled.items()):
        series = {id(read.row): read.series for read in members}
        table = ratio_table([read.row for read in members], baselines, series=lambda row: series[id(row)])
        groups.append(BenchGroup(label, members, table))
    return groups


def ratio_section(groups: list[BenchGroup]) -> Section:
    section = Section(
        "ratio", "Throughput ratio vs batch size",
        "The study's figure: samples/s of each target over the baseline's at the same batch size, measured in "
        "the same run (one bench invocation, or commands run as one comparison), batch size on a log2 axis. "
        "A row whose run measured no baseline gets no ratio. Whiskers run from the slowest to the fastest timed "
        "window (over the baseline's median window); a hollow marker off the line is an invalid row (a "
        "compilation inside a timed window). Figures draw the newest row per configuration; the table lists "
        "every row with the ratio of its own run.",
    )
    table_rows = []
    for group in groups:
        table = group.table
        if not any(table.ratio(s, b) is not None for s in table.targets if s != table.baseline
                   for b in table.batch_sizes):
            continue
        section.figures.append(figure_block(
            f"fig-ratio-{slug(group.label)}",
            f"{group.label}: throughput ratio to {table.baseline} in the same run (newest row per configuration)",
            bench_figures.ratio_figure(table, group.label), group.newest))
    for group in groups:
        table = group.table
        for read in sorted(group.rows, key=lambda r: (r.series, r.row.batch_size, r.row.timestamp)):
            row, status = read.row, read.row.status
            ratio, spread = table.row_ratio(row), table.row_ratio_spread(row)
            table_rows.append([
                text(group.label), text(read.series), number(row.batch_size), status_cell(status, row.error),
                measured(status, readable(row.samples_per_s)),
                measured(status, ratio_cell(ratio, NO_BASELINE)),
                measured(status, Cell(f"{spread[0]:.3g} – {spread[1]:.3g}", sort=spread[0], numeric=True) if spread
                         else Cell("–", numeric=True)),
                text(table.baseline), text(row.run_id), text(row.timestamp),
            ])
    if table_rows:
        section.tables.append(Table(
            "table-ratio", "Every bench row and its ratio to the baseline of its own run",
            [("workload", False), ("series", False), ("batch", True), ("status", False), ("samples/s", True),
             ("ratio", True), ("ratio, slowest – fastest window", True), ("baseline", False), ("run", False),
             ("measured", False)],
            table_rows))
    return section


PORT_FLAG_SHOWN = 60
"""Characters of an XLA row's findings shown in its cell; the whole list is the cell's title."""


def port_cell(row: ResultRow) -> Cell:
    """An XLA row's port check over its timed windows: `ported`, or what fell back, recompiled or
    synced with the host, flagged; a dash for rows without the counts (other devices, older rows)."""
    findings = row.xla_port_findings
    if findings is None or row.status not in ("ok", "invalid"):
        return Cell("–")
    if not findings:
        return Cell("ported", sort="ported", status="ok")
    shown = "; ".join(findings)
    short = shown if len(shown) <= PORT_FLAG_SHOWN else shown[:PORT_FLAG_SHOWN].rstrip() + "…"
    return Cell(short, sort=shown, status="invalid", title=f"not ported: {shown} (trainspeed check names the lines)")


def extra_text(row: BenchRow) -> str:
    """The fields a row carries beyond ResultRow's; a row that is not `ok` shows no numbers here either."""
    shown = []
    for key, value in row.extra.items():
        if key in ("command", "variant") or value is None or isinstance(value, (list, dict)):
            continue
        if row.row.status != "ok" and isinstance(value, (int, float)) and not isinstance(value, bool):
            continue
        shown.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    return ", ".join(shown)


def throughput_section(groups: list[BenchGroup]) -> Section:
    section = Section(
        "throughput", "Absolute samples/s and MFU",
        "Median-window samples/s on a log axis (whiskers: slowest to fastest window), and the model FLOPs "
        "utilisation against the chip's nominal peak where one is known (the vendor's dense figure in the row's "
        "precision, trainspeed/nominal_peaks.py), else against the matmul peak measured on the same device (or "
        "the peak given with --peak-tflops); the \"peak for MFU\" column says which, and \"MFU, measured peak\" gives "
        "the MFU against the measured chain beside it. A row whose peak was refused has no MFU. The XLA port column flags XLA rows whose timed steps ran an op on the host "
        "(aten fallback), compiled, or copied from the device to the host (`trainspeed check` names the lines). "
        "Every row read is in the table, including older reruns.",
    )
    table_rows = []
    for group in groups:
        if any(r.row.is_measured for r in group.rows):
            section.figures.append(figure_block(
                f"fig-throughput-{slug(group.label)}", f"{group.label}: samples/s and MFU (newest row per configuration)",
                bench_figures.throughput_figure(group.table, group.label), group.newest))
        for read in group.rows:
            r, status = read.row, read.row.status
            table_rows.append([
                text(group.label), text(read.series), number(r.batch_size), status_cell(status, r.error),
                measured(status, readable(r.samples_per_s)),
                measured(status, Cell(f"{r.samples_per_s_min:,.0f} – {r.samples_per_s_max:,.0f}", sort=r.samples_per_s_min,
                                      numeric=True) if r.samples_per_s_min is not None and r.samples_per_s_max is not None
                         else Cell("–", numeric=True)),
                measured(status, number(r.step_time_s * 1e3 if r.step_time_s is not None else None, "{:,.2f}")),
                measured(status, number(r.first_step_s, "{:,.3f}")),
                measured(status, mfu_cell(r)), measured(status, text(peak_text(r))),
                measured(status, measured_mfu_cell(r)),
                measured(status, number(r.peak_memory_bytes / GIB if r.peak_memory_bytes is not None else None, "{:,.2f}")),
                measured(status, number(r.cpu_s_per_wall_s, "{:.2f}")),
                port_cell(r),
                text(r.feed or "device"), text(r.device_name), text(extra_text(read)), text(read.source),
            ])
    section.tables.append(Table(
        "table-bench", "Every bench row",
        [("workload", False), ("series", False), ("batch", True), ("status", False), ("samples/s", True),
         ("slowest – fastest window", True), ("step (ms)", True), ("first step (s)", True), ("MFU", True),
         ("peak for MFU (TFLOP/s)", False), ("MFU, measured peak", True), ("peak memory (GiB)", True),
         ("CPU s per wall s", True), ("XLA port", False), ("feed", False), ("device", False), ("other fields", False),
         ("row", False)],
        table_rows, provenance([r for g in groups for r in g.rows])))
    return section


def memory_section(groups: list[BenchGroup]) -> Section:
    section = Section(
        "memory", "Peak memory and the OOM boundary",
        "Peak memory per target and batch size (CUDA: the allocator's peak; CPU: the process's resident "
        "memory above what it held before the configuration; the memory table says which). A red "
        "cross on the top edge is an out-of-memory row, a grey tick a batch skipped because a smaller one "
        "already ran out; the dotted line marks where a target stopped fitting.",
    )
    table_rows = []
    for group in groups:
        latest = group.newest
        if not any(r.row.peak_memory_bytes is not None or r.row.status == "oom" for r in latest):
            continue
        section.figures.append(figure_block(
            f"fig-memory-{slug(group.label)}", f"{group.label}: peak device memory per batch size",
            bench_figures.memory_figure(group.table, group.label), latest))
        for series in group.table.targets:
            own = sorted((r for r in latest if r.series == series), key=lambda r: r.row.batch_size)
            fit = [r for r in own if r.row.status in ("ok", "invalid")]
            oom = [r for r in own if r.row.status == "oom"]
            largest = fit[-1] if fit else None
            table_rows.append([
                text(group.label), text(series),
                number(largest.row.batch_size) if largest else Cell("none fit", numeric=True),
                number(largest.row.peak_memory_bytes / GIB if largest and largest.row.peak_memory_bytes is not None
                       else None, "{:,.2f}"),
                number(oom[0].row.batch_size) if oom else Cell("none", numeric=True),
                number(sum(1 for r in own if r.row.status == "skipped"), "{:d}"),
                number(largest.row.peak_memory_reserved_bytes / GIB if largest and largest.row.peak_memory_reserved_bytes
                       is not None else None, "{:,.2f}"),
                text(largest.row.peak_memory_source if largest else None),
            ])
    if table_rows:
        section.tables.append(Table(
            "table-memory", "Largest batch that fit and the first that ran out of memory, per series",
            [("workload", False), ("series", False), ("largest batch that fit", True), ("its peak memory (GiB)", True),
             ("first oom batch", True), ("skipped batches", True), ("CUDA reserved peak (GiB)", True),
             ("measured as", False)],
            table_rows))
    return section


def first_step_section(groups: list[BenchGroup]) -> Section:
    section = Section(
        "first-step", "First-step (compile) time",
        "The first step of every configuration is timed alone: it includes torch.compile's or XLA's "
        "compilation, which the timed windows leave out. Log scale.",
    )
    for group in groups:
        if any(r.row.first_step_s is not None for r in group.newest):
            section.figures.append(figure_block(
                f"fig-first-step-{slug(group.label)}", f"{group.label}: first step per batch size",
                bench_figures.first_step_figure(group.table, group.label), group.newest))
    return section


def bench_rows(inputs: ReportInputs, remote: bool) -> list[BenchRow]:
    return [read for read in inputs.of(ResultRow) if read.is_remote == remote]


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    local = bench_rows(inputs, remote=False)
    if not local:
        return []
    groups = bench_groups(local, baselines)
    return [ratio_section(groups), throughput_section(groups), memory_section(groups), first_step_section(groups)]


def build_figure(rows: list[ResultRow], baseline: str | None = None) -> Figure:
    """The figure of `rows` (newest row per configuration), not yet written anywhere."""
    measured = [row for row in rows if row.is_measured]
    if not measured:
        raise UsageError("no measured rows to plot (every row is oom, skipped or error)")
    sizes = {row.size for row in measured}
    one_size = len(sizes) == 1
    workloads = ", ".join(sorted({f"{row.workload} {row.size}" if one_size else row.workload for row in measured}))

    def series(row: ResultRow) -> str:
        """Where a file holds several sizes, every line is named by its size: a size left unnamed
        would be read as whichever of them the title does not say."""
        return row.series if one_size else f"{row.series} [{row.size}]"

    figure = bench_figures.bench_figure(ratio_table(rows, baseline, series=series), workloads)
    caption_machines(figure, measured)
    return figure


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    """`trainspeed plot` of bench rows: the study's ratio figure beside absolute samples/s."""
    rows = [read.row for read in inputs.of(ResultRow)]
    if request.run_id:
        rows = [row for row in rows if row.run_id == request.run_id]
        if not rows:
            raise UsageError(f"no rows with run id {request.run_id} in {request.results}")
    if request.baseline and request.baseline not in {name for row in rows for name in (row.target, row.series)}:
        raise UsageError(f"--baseline {request.baseline} has no rows in {request.results}")
    return plot_results(rows, request.stem, request.baseline)


def plot_results(rows: list[ResultRow], out_stem: Path, baseline: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg of `rows`; returns the paths written."""
    return save_figure(build_figure(rows, baseline), out_stem)


BENCH_ROWS = RowKind(ResultRow, check=check_row, wrap=BenchRow)
PART = ReportPart(
    name="bench", kinds=(BENCH_ROWS,), sections=sections,
    counts=lambda inputs: [("bench rows", len(bench_rows(inputs, remote=False)))], plot=plot)
