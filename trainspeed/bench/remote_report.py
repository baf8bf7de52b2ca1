"""The remote part of the report: the same step run by a remote target and by its local
counterpart in the same bench run (remote samples/s over local samples/s), and where a remote
step's time goes (the device's own step against the whole step the client saw)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure

from trainspeed.bench.ratios import RemotePair, inner_target, remote_pairs
from trainspeed.bench.report import BENCH_ROWS, BenchRow, bench_rows
from trainspeed.bench.results import ResultRow
from trainspeed.report.figures import (
    COLOURS,
    figure_block,
    label_batch_axis,
    panels,
    samples_axis,
)
from trainspeed.report.inputs import ReportInputs
from trainspeed.report.page import (
    Cell,
    Section,
    Table,
    measured,
    number,
    ratio_cell,
    readable,
    slug,
    status_cell,
    text,
    workload_label,
)
from trainspeed.report.part import ReportPart


def remote_series(pair: RemotePair) -> str:
    row = pair.remote
    return f"{inner_target(row.target)} over {row.link} ({row.in_flight} in flight, {row.feed or 'device'}-fed)"


def remote_figure(pairs: Sequence[RemotePair]) -> Figure:
    """Remote over local samples/s per batch size (local: the same run's row), and where a remote
    step's time goes: the device's own step against the whole step the client saw. A row whose
    wire time is flagged gets no device point: its two times do not cover the same steps."""
    figure, (ratio_axes, step_axes) = panels(2, (14, 5.2))
    names = list(dict.fromkeys(remote_series(p) for p in pairs))
    batch_sizes = sorted({p.remote.batch_size for p in pairs})
    for index, name in enumerate(names):
        colour = COLOURS[index % len(COLOURS)]
        own = sorted((p for p in pairs if remote_series(p) == name), key=lambda p: p.remote.batch_size)
        measured = [p for p in own if p.ratio is not None]
        if measured:
            ratio_axes.plot([math.log2(p.remote.batch_size) for p in measured], [p.ratio for p in measured],
                            marker="o", color=colour, label=name)
        timed = [p.remote for p in own if p.remote.status == "ok" and p.remote.step_time_s is not None]
        if timed:
            step_axes.plot([math.log2(r.batch_size) for r in timed], [r.step_time_s * 1e3 for r in timed], marker="o",
                           color=colour, label=f"{name}: step seen by the client")
            device = [r for r in timed if r.server_step_s is not None and not r.wire_flagged]
            if device:
                step_axes.plot([math.log2(r.batch_size) for r in device], [r.server_step_s * 1e3 for r in device],
                               marker="s", linestyle="--", color=colour, markerfacecolor="none",
                               label=f"{name}: step on the device")
            flagged = [r for r in timed if r.wire_flagged]
            if flagged:
                step_axes.plot([math.log2(r.batch_size) for r in flagged], [r.step_time_s * 1e3 for r in flagged],
                               "x", color="#d62728", markersize=9, markeredgewidth=2)
    if any(p.remote.wire_flagged for p in pairs):
        step_axes.plot([], [], "x", color="#d62728", label="wire time flagged (device time not comparable)")
    ratio_axes.axhline(1.0, color="grey", linewidth=0.8)
    ratio_axes.set(ylabel="remote samples/s / local samples/s (same run)", title="What the remote path costs")
    samples_axis(step_axes)
    step_axes.set(ylabel="step time (ms); the gap is the wire", title="Remote step: client vs device")
    for axes in (ratio_axes, step_axes):
        label_batch_axis(axes, batch_sizes)
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=6)
    return figure


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
        pairs = sorted(remote_pairs(own), key=lambda p: (remote_series(p), p.remote.batch_size))
        drawn = [by_row[id(p.remote)] for p in pairs] + [by_row[id(p.local)] for p in pairs if p.local is not None]
        name = f" ({Path(file).name})" if len(files) > 1 else ""
        section.figures.append(figure_block(f"fig-remote-{slug(Path(file).stem)}",
                                            f"Remote over local samples/s (same run), and the remote step's time{name}",
                                            remote_figure(pairs), drawn))
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


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    if not bench_rows(inputs, remote=True):
        return []
    return [remote_section(inputs.of(ResultRow))]


PART = ReportPart(name="remote", kinds=(BENCH_ROWS,), sections=sections,
                  counts=lambda inputs: [("remote rows", len(bench_rows(inputs, remote=True)))])
