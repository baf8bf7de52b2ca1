"""`trainspeed report`: one self-contained HTML page of every result it is given.

The page is the Jinja2 template `templates/report.html.j2` filled with sections; a section is
present only when its rows are. Figures are inline SVG (no files beside the page, nothing fetched),
tables sort on a click on their header (a small inline script), and a row whose status is not
`ok` shows its status where its numbers would be: an `invalid` row's samples/s is never printed.
Every figure and table names the commands that produced its rows, the machine they ran on (its
cores and its load: "shared machine" where the load exceeded the cores the process could use)
and the files they came from. A ratio is a row over the baseline of its own run, or the cell says
there was none.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import jinja2

from trainspeed.atomic import atomic_write_text
from trainspeed.bench.environment import Machine
from trainspeed.bench.ratios import NO_BASELINE, RatioTable, RemotePair, ratio_table, remote_pairs
from trainspeed.bench.results import ResultRow
from trainspeed.evaluate.agreement import MahjongAgreementRow
from trainspeed.evaluate.mahjong import MahjongEvalRow
from trainspeed.evaluate.null_test import NullTestRow
from trainspeed.evaluate.stats import within_cluster_correlation
from trainspeed.report import figures
from trainspeed.report.inputs import BenchRow, Read, ReportInputs, TrainRun, workload_label
from trainspeed.report.machines import machine_lines
from trainspeed.rows import is_finite
from trainspeed.studies.batch_size import (BatchSizeBatchRow, BatchSizeComparisonRow, BatchSizeRunRow,
                                           BatchSizeSettingsRow, BatchSizeStrengthRow)
from trainspeed.studies.scaling import ScalingRunRow, has_more_ranks, io_efficiency, scaling_key, vs_one_rank

NOT_RECORDED = "command not recorded in the rows"
GIB = 2**30


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | str | None = None
    """The value a numeric column sorts by (None: the cell sorts after every number)."""
    status: str | None = None
    """Set on a cell that shows a row's status (or a flag) instead of a number."""
    numeric: bool = False
    title: str | None = None
    """The whole text where the cell shows a shortened one (a long error)."""


@dataclass(frozen=True)
class Provenance:
    """What a figure or a table rests on: commands, machines, files."""

    commands: list[str]
    unrecorded: int
    """How many of its rows carry no command."""
    machines: list[str]
    sources: list[str]


@dataclass(frozen=True)
class Table:
    id: str
    caption: str
    columns: list[tuple[str, bool]]
    """(header, numeric) per column."""
    rows: list[list[Cell]]
    provenance: Provenance | None = None


@dataclass(frozen=True)
class FigureBlock:
    id: str
    caption: str
    svg: str
    provenance: Provenance


@dataclass
class Section:
    id: str
    title: str
    intro: str
    figures: list[FigureBlock] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


# --- cells --------------------------------------------------------------------------------------

def text(value: Any) -> Cell:
    return Cell("" if value is None else str(value), sort=None if value is None else str(value))


def number(value: Any, form: str = "{:,.0f}") -> Cell:
    if not is_finite(value):
        return Cell("–", numeric=True)
    return Cell(form.format(value), sort=float(value), numeric=True)


def ratio_cell(value: float | None, missing: str = "–") -> Cell:
    """A ratio with two decimals, or two significant digits below 0.1 (0.0022x, not 0.00x)."""
    if not is_finite(value):
        return Cell(missing, numeric=True)
    return number(value, "{:.2f}x" if abs(value) >= 0.1 else "{:.2g}x")


def readable(value: float | None) -> Cell:
    """Samples/s: thousands separated, small rates with three significant digits."""
    if not is_finite(value):
        return Cell("–", numeric=True)
    return number(value, "{:,.0f}" if abs(value) >= 100 else "{:.3g}")


def percent(value: float | None, form: str = "{:.1f}%") -> Cell:
    return number(value * 100 if is_finite(value) else None, form)


ERROR_SHOWN = 60
"""Characters of a row's error shown in its status cell; the whole error is the cell's tooltip."""


def status_cell(status: str, error: str | None = None) -> Cell:
    if not error:
        return Cell(status, sort=status, status=status)
    shown = error if len(error) <= ERROR_SHOWN else error[:ERROR_SHOWN].rstrip() + "…"
    return Cell(f"{status}: {shown}", sort=status, status=status, title=f"{status}: {error}")


def measured(status: str, cell: Cell) -> Cell:
    """A measurement of a row: the number when the row is `ok`, else the row's status."""
    return cell if status == "ok" else Cell(status, status=status, numeric=True)


def mfu_cell(row: ResultRow) -> Cell:
    """MFU in percent; a refused peak (the row's, or one above 100% from before the bench refused
    those) says so instead."""
    mfu = figures.plausible_mfu(row.mfu)
    if mfu is not None:
        return percent(mfu)
    if row.peak_refused or row.mfu is not None:
        return Cell("peak refused", numeric=True)
    return Cell("–", numeric=True)


def interval(values: Sequence[float] | None, form: str) -> str:
    if values and len(values) == 2 and all(is_finite(v) for v in values):
        return f"[{form.format(values[0])}, {form.format(values[1])}]"
    return ""


def slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


# --- provenance ---------------------------------------------------------------------------------

COMMANDS_SHOWN = 3
"""Commands listed under a figure; a sweep of one command per batch size names the rest by count."""


def provenance(rows: Sequence[Any], machine: Callable[[Any], tuple[Machine | None, float | None]]) -> Provenance:
    commands = list(dict.fromkeys(row.command for row in rows if row.command))
    if len(commands) > COMMANDS_SHOWN:
        commands = commands[:COMMANDS_SHOWN] + [f"… and {len(commands) - COMMANDS_SHOWN} more commands like these "
                                                "(each row's `command` field)"]
    return Provenance(
        commands=commands,
        unrecorded=sum(1 for row in rows if not row.command),
        machines=machine_lines(machine(row) for row in rows),
        sources=list(dict.fromkeys(row.source.path for row in rows)),
    )


def row_machine(read: Any) -> tuple[Machine | None, float | None]:
    row = read.summary if isinstance(read, TrainRun) else read.row
    return row.machine, getattr(row, "cpu_s_per_wall_s", None)


def figure_block(figure_id: str, caption: str, figure: Any, rows: Sequence[Any]) -> FigureBlock:
    return FigureBlock(id=figure_id, caption=caption, svg=figures.svg_text(figure, figure_id),
                       provenance=provenance(rows, row_machine))


# --- bench sections -----------------------------------------------------------------------------

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
            figures.ratio_figure(table, group.label), group.newest))
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
        "utilisation against the peak measured on the same device (or given with --peak-tflops). A row whose "
        "peak was refused has no MFU. Every row read is in the table, including older reruns.",
    )
    table_rows = []
    for group in groups:
        if any(r.row.is_measured for r in group.rows):
            section.figures.append(figure_block(
                f"fig-throughput-{slug(group.label)}", f"{group.label}: samples/s and MFU (newest row per configuration)",
                figures.throughput_figure(group.table, group.label), group.newest))
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
                measured(status, mfu_cell(r)),
                measured(status, number(r.peak_memory_bytes / GIB if r.peak_memory_bytes is not None else None, "{:,.2f}")),
                measured(status, number(r.cpu_s_per_wall_s, "{:.2f}")),
                text(r.feed or "device"), text(r.device_name), text(extra_text(read)), text(read.source),
            ])
    section.tables.append(Table(
        "table-bench", "Every bench row",
        [("workload", False), ("series", False), ("batch", True), ("status", False), ("samples/s", True),
         ("slowest – fastest window", True), ("step (ms)", True), ("first step (s)", True), ("MFU", True),
         ("peak memory (GiB)", True), ("CPU s per wall s", True), ("feed", False), ("device", False),
         ("other fields", False), ("row", False)],
        table_rows, provenance([r for g in groups for r in g.rows], row_machine)))
    return section


def memory_section(groups: list[BenchGroup]) -> Section:
    section = Section(
        "memory", "Peak memory and the OOM boundary",
        "Peak device memory per target and batch size (the allocator's peak; CPU rows record none). A red "
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
            figures.memory_figure(group.table, group.label), latest))
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
            ])
    if table_rows:
        section.tables.append(Table(
            "table-memory", "Largest batch that fit and the first that ran out of memory, per series",
            [("workload", False), ("series", False), ("largest batch that fit", True), ("its peak memory (GiB)", True),
             ("first oom batch", True), ("skipped batches", True)],
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
                figures.first_step_figure(group.table, group.label), group.newest))
    return section


# --- training -----------------------------------------------------------------------------------

def scaling_label(row: ScalingRunRow) -> str:
    return (f"{workload_label(row.workload, row.workload_sha256, row.size)}: {row.target} x{row.world_size}, "
            f"{row.batch_size_per_device}/device, {row.data} data ({row.study_id})")


def train_bars(runs: Sequence[TrainRun], scaling: Sequence[ScalingRunRow]) -> list[figures.TrainBar]:
    bars = [figures.TrainBar(run.label, [run.summary.end_to_end_samples_per_s], [run.summary.data_wait_fraction],
                             [run.summary.data_wait_fraction_worst_rank]) for run in runs]
    groups: dict[tuple, list[ScalingRunRow]] = {}
    for row in scaling:
        if is_finite(row.end_to_end_samples_per_s):
            groups.setdefault(scaling_key(row), []).append(row)
    for members in groups.values():
        first = members[0]
        bars.append(figures.TrainBar(
            scaling_label(first) + (f" ({len(members)} repeats)" if len(members) > 1 else ""),
            [r.end_to_end_samples_per_s for r in members],
            [r.data_wait_fraction for r in members if is_finite(r.data_wait_fraction)],
            [r.data_wait_fraction_worst_rank for r in members if is_finite(r.data_wait_fraction_worst_rank)],
            ratio=None if first.world_size == 1 else vs_one_rank(scaling, first),
            is_baseline=first.world_size == 1 and has_more_ranks(scaling, first)))
    return bars


def training_section(runs: Sequence[TrainRun], scaling: Sequence[Read[ScalingRunRow]]) -> Section:
    section = Section(
        "training", "End-to-end training",
        "Data-parallel training with each rank reading its own data: end-to-end samples/s (all samples over the "
        "wall time from the first to the last step, all ranks, validation and checkpoints left out). N ranks "
        "are compared with one only within one scaling study, where both ran side by side on the same machine "
        "(the study's 8 TPU cores against one GPU: 11.23x); a run directory on its own has no ratio. The right "
        "panel is the share of time ranks waited for data.",
    )
    scaling_rows = [read.row for read in scaling]
    bars = train_bars(runs, scaling_rows)
    if bars:
        section.figures.append(figure_block("fig-training", "End-to-end samples/s (N ranks vs one within a scaling "
                                            "study), and data wait", figures.training_figure(bars),
                                            [*runs, *scaling]))
    with_curves = [run for run in runs if run.train_curve or run.val_curve]
    if with_curves:
        section.figures.append(figure_block("fig-training-curves", "Training loss and every validation metric per run, "
                                            "against step", figures.curves_figure(with_curves), with_curves))
    if runs:
        section.tables.append(Table(
            "table-training", "Every run directory",
            [("run", False), ("ranks", True), ("batch/device", True), ("global batch", True), ("data", False),
             ("end-to-end samples/s", True), ("steady samples/s", True), ("data wait", True), ("worst rank", True),
             ("IO efficiency vs bench", True), ("validation", False), ("summary", False)],
            [[text(run.label), number(run.summary.world_size, "{:d}"), number(run.summary.batch_size_per_device, "{:d}"),
              number(run.summary.global_batch, "{:d}"), text("synthetic" if run.summary.synthetic_data else "real"),
              readable(run.summary.end_to_end_samples_per_s), readable(run.summary.steady_samples_per_s),
              percent(run.summary.data_wait_fraction), percent(run.summary.data_wait_fraction_worst_rank),
              number(run.summary.io_efficiency, "{:.3f}"),
              text(", ".join(f"{k} {v:.4g}" for k, v in (run.summary.validation or {}).items())), text(run.source)]
             for run in runs],
            provenance(runs, row_machine)))
    if scaling:
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
            rows, provenance(scaling, row_machine)))
    return section


# --- remote -------------------------------------------------------------------------------------

def wire_cell(row: ResultRow) -> Cell:
    """The wire time in ms, or a flag where the two step times do not make one."""
    if row.wire_flagged:
        why = ("the writer flagged it: server and client timed different steps" if row.wire_time_suspect else
               "negative: the server's step time covers other steps than the client's")
        return Cell("flagged", status="invalid", numeric=True, title=f"no wire time: {why}")
    wire = row.wire_s
    return number(wire * 1e3 if wire is not None else None, "{:,.2f}")


def remote_section(rows: Sequence[BenchRow]) -> Section:
    section = Section(
        "remote", "Local vs remote",
        "The same step run by a remote target (batches sent over the network to a device elsewhere) and by its "
        "local counterpart (the same inner target, in the same bench run): remote samples/s over local samples/s. "
        "The study found direct access about 5x faster than remote access at batch 2048, because every step's batch "
        "crossed the network. The right panel splits a remote step into the device's own step and the rest (the "
        "wire); where the two times do not cover the same steps the wire time is flagged, never shown.",
    )
    by_row = {id(read.row): read for read in rows}
    files = list(dict.fromkeys(read.source.path for read in rows if read.is_remote))
    all_pairs: list[RemotePair] = []
    for file in files:  # one figure per file: a sweep with other windows is another measurement
        own = [read.row for read in rows if read.source.path == file]
        pairs = sorted(remote_pairs(own), key=lambda p: (figures.remote_series(p), p.remote.batch_size))
        drawn = [by_row[id(p.remote)] for p in pairs] + [by_row[id(p.local)] for p in pairs if p.local is not None]
        name = f" ({Path(file).name})" if len(files) > 1 else ""
        section.figures.append(figure_block(f"fig-remote-{slug(Path(file).stem)}",
                                            f"Remote over local samples/s (same run), and the remote step's time{name}",
                                            figures.remote_figure(pairs), drawn))
        all_pairs += pairs
    table_rows = []
    for pair in all_pairs:
        remote, local = pair.remote, pair.local
        status = remote.status
        table_rows.append([
            text(workload_label(remote.workload, remote.workload_sha256, remote.size)), text(remote.target),
            text(remote.link), number(remote.in_flight, "{:d}"), text(remote.feed or "device"),
            number(remote.batch_size), status_cell(status, remote.error),
            measured(status, readable(remote.samples_per_s)),
            measured(local.status, readable(local.samples_per_s)) if local else Cell("no local row in this run", numeric=True),
            ratio_cell(pair.ratio),
            measured(status, number(remote.step_time_s * 1e3 if remote.step_time_s is not None else None, "{:,.2f}")),
            measured(status, number(remote.server_step_s * 1e3 if remote.server_step_s is not None else None, "{:,.2f}")),
            measured(status, wire_cell(remote)),
            number(remote.bytes_sent_per_step), number(remote.bytes_received_per_step), text(remote.run_id),
        ])
    section.tables.append(Table(
        "table-remote", "Newest row of every remote configuration and the local row of its run",
        [("workload", False), ("remote target", False), ("link", False), ("in flight", True), ("feed", False),
         ("batch", True), ("status", False), ("remote samples/s", True), ("local samples/s", True),
         ("remote / local", True), ("client step (ms)", True), ("device step (ms)", True), ("wire (ms)", True),
         ("bytes sent/step", True), ("bytes received/step", True), ("run", False)],
        table_rows))
    return section


# --- self-play and the batch-size study ---------------------------------------------------------

def eval_section(rows: Sequence[Read[MahjongEvalRow]]) -> Section:
    section = Section(
        "selfplay", "Self-play strength",
        "Trained policies in duplicate games against three copies of an opponent: the mean rank (1 best, 4 "
        "worst; 2.5 is even) with its 95% confidence interval, and the share of games at each rank.",
    )
    section.figures.append(figure_block("fig-selfplay", "Mean rank with 95% interval, and rank shares, per evaluation",
                                        figures.eval_figure([read.row for read in rows]), list(rows)))
    curves = figures.strength_curves([read.row for read in rows])
    if curves:
        drawn = [read for read in rows if figures.curve_key(read.row) in curves]
        section.figures.append(figure_block(
            "fig-selfplay-curve", "Mean rank against samples trained on: checkpoints of one run, the same deals each",
            figures.strength_curve_figure(curves), drawn))
    table_rows = []
    for read in rows:
        row = read.row
        table_rows.append([
            text(row.policy), text(row.policy_size), number(row.policy_step, "{:d}"), text(row.opponent),
            number(row.games, "{:d}"), number(row.deals, "{:d}"), number(row.eval_seed, "{:d}"), text(row.target),
            number(row.temperature, "{:g}"), number(row.mean_rank, "{:.3f}"), text(interval(row.mean_rank_ci95, "{:.3f}")),
            number(row.mean_score_delta, "{:+,.0f}"), text(interval(row.mean_score_delta_ci95, "{:+,.0f}")),
            text(" / ".join(f"{share:.0%}" for share in row.rank_distribution)),
            number(row.within_deal_correlation if row.within_deal_correlation is not None
                   else within_cluster_correlation(row.deal_ranks), "{:+.2f}"),
            number(row.games_per_s, "{:,.2f}"), number(row.decisions_per_s, "{:,.0f}"),
        ])
    section.tables.append(Table(
        "table-selfplay", "Every evaluation (within-deal correlation: of the policy's ranks in a deal's four games)",
        [("policy", False), ("size", False), ("step", True), ("opponent", False), ("games", True), ("deals", True),
         ("eval seed", True), ("target", False), ("temperature", True), ("mean rank", True), ("95% interval", False),
         ("score delta", True), ("95% interval", False), ("ranks 1/2/3/4", False),
         ("within-deal correlation", True), ("games/s", True), ("decisions/s", True)],
        table_rows))
    return section


def agreement_section(rows: Sequence[Read[MahjongAgreementRow]]) -> Section:
    section = Section(
        "agreement", "Agreement with the teacher",
        "How often a trained Mahjong policy picks the action its teacher (the rule-based agent that played the "
        "data) picked, per kind of decision, on held-out games; and what its wrong discards cost: the same shanten "
        "and acceptance (a tie-break), lower acceptance, or a higher shanten (a real error).",
    )
    section.figures.append(figure_block("fig-agreement", "Agreement per kind of decision",
                                        figures.agreement_figure([read.row for read in rows]), list(rows)))
    kinds = list(figures.AGREEMENT_KINDS)
    errors = ["equal", "lower acceptance", "higher shanten", "not a discard"]
    section.tables.append(Table(
        "table-agreement", "Every agreement row (samples of each kind in brackets)",
        [("policy", False), ("step", True), ("data", False), ("split", False), ("decisions", True),
         *[(kind.replace("_", " "), True) for kind in kinds], *[(f"wrong: {error}", True) for error in errors]],
        [[text(r.row.policy), number(r.row.policy_step, "{:d}"), text(r.row.data), text(r.row.split),
          number(r.row.samples, "{:,d}"),
          *[percent(r.row.agreement.get(kind), "{:.2f}%") for kind in kinds],
          *[number(r.row.discard_errors.get(error), "{:,d}") for error in errors]] for r in rows],
        provenance(rows, row_machine)))
    return section


def null_test_section(rows: Sequence[Read[NullTestRow]]) -> Section:
    section = Section(
        "null-test", "Does the evaluation's interval hold?",
        "A policy against three copies of itself with sampled moves is an even match (mean rank 2.5 in "
        "expectation); over many evaluation seeds about 95% of the 95% intervals should contain 2.5.",
    )
    section.tables.append(Table(
        "table-null-test", "Null tests",
        [("policy", False), ("step", True), ("temperature", True), ("games per seed", True), ("seeds", True),
         ("intervals containing 2.5", True), ("coverage", True), ("95% interval of the coverage", False),
         ("mean ranks", False)],
        [[text(r.row.policy), number(r.row.policy_step, "{:d}"), number(r.row.temperature, "{:g}"),
          number(r.row.games_per_seed, "{:d}"), number(len(r.row.eval_seeds), "{:d}"), number(r.row.covered, "{:d}"),
          percent(r.row.coverage, "{:.0f}%"), text(interval(r.row.coverage_ci95, "{:.2f}")),
          text(f"{min(r.row.mean_ranks):.3f} .. {max(r.row.mean_ranks):.3f}")] for r in rows],
        provenance(rows, row_machine)))
    return section


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
                figures.study_figure(runs, batches, strengths),
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
            provenance(settings, row_machine)))
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
            provenance(runs, row_machine)))
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


# --- scripts' measurements and the studies run --------------------------------------------------

def value_cell(value: Any) -> Cell:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return text(value)
    if isinstance(value, int):
        return number(value, "{:,d}")
    if isinstance(value, float):
        return number(value, "{:,.4g}" if abs(value) < 1e6 else "{:,.0f}")
    shown = json.dumps(value)
    return Cell(shown if len(shown) <= ERROR_SHOWN else shown[:ERROR_SHOWN] + "…", title=shown)


def measurement_section(rows: Sequence[Read[Any]]) -> Section:
    section = Section(
        "measurements", "Other measurements",
        "What the scripts in benchmarks/ measure besides training steps (the data loader, the rule-based agents, "
        "the bench's own overhead, StyleGAN3's saved activations), one table per script, every row as written.",
    )
    for benchmark in dict.fromkeys(read.row.benchmark for read in rows):
        own = [read for read in rows if read.row.benchmark == benchmark]
        names = list(dict.fromkeys(name for read in own for name in read.row.values))
        section.tables.append(Table(
            f"table-measurement-{slug(benchmark)}", benchmark,
            [(name, False) for name in names],
            [[value_cell(read.row.values.get(name)) for name in names] for read in own],
            provenance(own, lambda read: (read.row.machine, None))))
    return section


def studies_section(rows: Sequence[Read[Any]]) -> Section:
    section = Section("studies", "Studies run", "Each `trainspeed study` run: its estimate, its wall time, its files.")
    section.tables.append(Table(
        "table-studies", "Studies",
        [("study", False), ("preset", False), ("started", False), ("estimate (s)", True), ("wall (s)", True),
         ("files", False)],
        [[text(r.row.study), text(r.row.preset), text(r.row.started), number(r.row.estimate_s),
          number(r.row.wall_s), text(", ".join(r.row.files))] for r in rows],
        provenance(rows, lambda read: (read.row.machine, None))))
    return section


# --- the page -----------------------------------------------------------------------------------

def build_sections(inputs: ReportInputs, baselines: Sequence[str] = ()) -> list[Section]:
    local = [row for row in inputs.bench if not row.is_remote]
    remote = [row for row in inputs.bench if row.is_remote]
    groups = bench_groups(local, baselines)
    sections: list[Section] = []
    if local:
        sections += [ratio_section(groups), throughput_section(groups), memory_section(groups),
                     first_step_section(groups)]
    if inputs.runs or inputs.scaling:
        sections.append(training_section(inputs.runs, inputs.scaling))
    if remote:
        sections.append(remote_section(inputs.bench))
    if inputs.evals:
        sections.append(eval_section(inputs.evals))
    if inputs.agreements:
        sections.append(agreement_section(inputs.agreements))
    if inputs.null_tests:
        sections.append(null_test_section(inputs.null_tests))
    if inputs.batch_size:
        sections.append(batch_size_section(inputs.batch_size))
    if inputs.measurements:
        sections.append(measurement_section(inputs.measurements))
    if inputs.studies:
        sections.append(studies_section(inputs.studies))
    return [s for s in sections if s.figures or s.tables]


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("trainspeed.report", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    )


def render(inputs: ReportInputs, title: str = "trainspeed report", baselines: Sequence[str] = ()) -> str:
    sections = build_sections(inputs, baselines)
    counts = Counter({
        "bench rows": len([r for r in inputs.bench if not r.is_remote]),
        "remote rows": len([r for r in inputs.bench if r.is_remote]), "run directories": len(inputs.runs),
        "scaling-study runs": len(inputs.scaling), "evaluation rows": len(inputs.evals),
        "agreement rows": len(inputs.agreements), "null tests": len(inputs.null_tests),
        "batch-size study rows": len(inputs.batch_size), "other measurements": len(inputs.measurements),
        "study records": len(inputs.studies)})
    return _environment().get_template("report.html.j2").render(
        title=title, sections=sections, files=inputs.files, not_recorded=NOT_RECORDED,
        counts=[(what, n) for what, n in counts.items() if n],
        statuses=sorted({row.row.status for row in inputs.bench} - {"ok"}),
    )


def write_report(inputs: ReportInputs, out: Path, title: str = "trainspeed report", baselines: Sequence[str] = ()) -> Path:
    atomic_write_text(out, render(inputs, title, baselines))
    return out
