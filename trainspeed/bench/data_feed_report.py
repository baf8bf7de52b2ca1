"""Rows of `trainspeed data bench`: is the device fed? One row per loader worker count: the
samples/s the rank's loader makes from the data where it lies (decoding and augmenting on its
workers), beside the samples/s a training step of the workload consumes at the same batch.

The loader keeps the device fed where its samples/s reach the step's: the fewest workers that do
is what a run needs (`fed_workers`). The report draws both against the worker count (`PART`).
Nothing here imports torch: the report reads these rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from trainspeed.machine import Machine
from trainspeed.report.figures import COLOURS, figure_block, panels, plt, samples_axis
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, number, readable, slug, text
from trainspeed.report.part import ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.rows import Batch, Positive


@dataclass(frozen=True)
class DataBenchRow:
    KIND: ClassVar[str] = "data-bench"
    SCHEMA_VERSION: ClassVar[int] = 1

    run_id: str
    """One `data bench` invocation: its rows share the step's samples/s."""
    timestamp: str
    data: str
    """The `--data` path as given."""
    data_format: str
    """What it is (`trainspeed.data.sources`: image-folder, tokens, hf-dataset, webdataset, shards)."""
    workload: str
    size: str
    batch_size: Batch
    workers: int
    """Loader worker processes (0: the training process itself reads)."""
    loader_samples_per_s: Positive
    """Samples the loader made per second, after its first batch (worker start-up)."""
    loader_batches: Batch
    """Batches timed."""
    loader_s: Positive
    step_samples_per_s: Positive | None
    """What a training step of the workload at this batch consumes (None: not known)."""
    step_source: str
    """Where the step's samples/s came from: a bench rows file, or the quick bench of this command."""
    skipped: int = 0
    """Unreadable samples the loader skipped (--bad-samples skip)."""
    command: str | None = None
    machine: Machine | None = None

    @property
    def fed(self) -> bool | None:
        """The loader makes at least what the step consumes (None: the step is not known)."""
        if self.step_samples_per_s is None:
            return None
        return self.loader_samples_per_s >= self.step_samples_per_s


def fed_workers(rows: Sequence[DataBenchRow]) -> int | None:
    """The fewest workers whose loader keeps up with the step; None where none does."""
    fed = [row.workers for row in rows if row.fed]
    return min(fed) if fed else None


def verdict(rows: Sequence[DataBenchRow]) -> str:
    """One sentence: how many workers keep the device fed."""
    step = rows[0].step_samples_per_s
    if step is None:
        return "the step's samples/s is not known: give --bench-rows or let the quick bench run"
    enough = fed_workers(rows)
    if enough is None:
        best = max(rows, key=lambda row: row.loader_samples_per_s)
        return (f"no worker count measured keeps the device fed: the best, {best.workers} workers, makes "
                f"{best.loader_samples_per_s:,.0f} samples/s of the step's {step:,.0f} "
                f"({best.loader_samples_per_s / step:.0%}); try more workers or a smaller resolution")
    made = next(row for row in rows if row.workers == enough).loader_samples_per_s
    return (f"{enough} worker{'s' if enough != 1 else ''} keep{'s' if enough == 1 else ''} the device fed: "
            f"the loader makes {made:,.0f} samples/s, the step consumes {step:,.0f}")


def _runs(rows: Sequence[Read[Any]]) -> dict[str, list[Read[Any]]]:
    runs: dict[str, list[Read[Any]]] = {}
    for read in rows:
        runs.setdefault(read.row.run_id, []).append(read)
    return runs


def data_bench_figure(rows: Sequence[Read[Any]]):
    """Loader samples/s against workers, one line per run, the step's samples/s dashed beside it."""
    figure, (axes,) = panels(1, (6.4, 4.0))
    for number_, (run_id, own) in enumerate(_runs(rows).items()):
        colour = COLOURS[number_ % len(COLOURS)]
        own = sorted(own, key=lambda read: read.row.workers)
        first = own[0].row
        label = f"{first.data_format} {first.workload} batch {first.batch_size} ({run_id[:6]})"
        workers = [read.row.workers for read in own]
        axes.plot(workers, [read.row.loader_samples_per_s for read in own], "o-", color=colour,
                  label=f"loader: {label}")
        if first.step_samples_per_s is not None:
            axes.plot([min(workers), max(workers)], [first.step_samples_per_s] * 2, "--", color=colour,
                      label=f"step: {first.workload}")
    axes.set_xticks(sorted({read.row.workers for read in rows}))
    axes.set_xlabel("loader workers")
    axes.set_ylabel("samples/s")
    samples_axis(axes)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7)
    return figure


def data_bench_section(rows: Sequence[Read[Any]]) -> Section:
    section = Section(
        "data-bench", "Is the device fed? Loader against step",
        "The samples/s the rank's loader makes from the data where it lies (decoding and augmenting on its workers), "
        "per worker count, beside the samples/s a training step of the workload consumes at the same batch "
        "(`trainspeed data bench`). Where the loader's line lies below the step's, the device waits for data.")
    figure = data_bench_figure(rows)
    section.figures.append(figure_block("figure-data-bench", "loader vs step samples/s against workers", figure, rows))
    plt.close(figure)
    for run_id, own in _runs(rows).items():
        own_rows = [read.row for read in own]
        section.tables.append(Table(
            f"table-data-bench-{slug(run_id)}", f"{own_rows[0].data} ({own_rows[0].data_format}), "
            f"{own_rows[0].workload} {own_rows[0].size}: {verdict(own_rows)}",
            [("workers", True), ("loader samples/s", True), ("step samples/s", True), ("fed", False),
             ("skipped", True), ("step from", False)],
            [[number(row.workers), readable(row.loader_samples_per_s), readable(row.step_samples_per_s), text(row.fed),
              number(row.skipped), text(row.step_source)] for row in own_rows],
            provenance(own)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    rows = inputs.of(DataBenchRow)
    return [data_bench_section(rows)] if rows else []


PART = ReportPart(name="data-bench", kinds=(RowKind(DataBenchRow),), sections=sections,
                  counts=lambda inputs: [("data bench rows", len(inputs.of(DataBenchRow)))])
