"""The TPU part of the report: everything measured on a TPU chip, read together in one section.

Bench rows whose device is a TPU (a device name that starts with "TPU", as JAX names the chip:
"TPU v5 lite" is a v5e) are shown three ways: the built-in workloads beside the hand-written JAX
peer measured in the same run (`benchmarks/reference/jax_optax.py`, target
`reference-jax:tpu:jit:PRECISION`), the other workloads (the named models) on the chip, and the
training runs whose summary names a TPU device. The bench's own sections show the same rows among
every other device's; here a row that was not measured says so instead of leaving the pairing to
the reader, and a ratio divides only rows of one run.

It lives beside the trainer because it reads both the bench's rows and the trainer's run
directories, and the bench may not import the trainer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure

from trainspeed.bench.mfu import (
    measured_peak_mfu,
    measured_peak_of,
    nominal_peak_mfu,
    refused_peak,
    row_nominal_peak,
)
from trainspeed.bench.ratios import newest
from trainspeed.bench.report import BENCH_ROWS, BenchRow
from trainspeed.bench.results import ResultRow
from trainspeed.report.figures import COLOURS, figure_block, label_batch_axis, panels, samples_axis
from trainspeed.report.inputs import ReportInputs
from trainspeed.report.page import (
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
from trainspeed.report.part import ReportPart
from trainspeed.report.provenance import provenance
from trainspeed.train import report as train_report
from trainspeed.train.rows import RunSummary
from trainspeed.train.runs import TrainRun
from trainspeed.workloads.named import family_of

TPU_PREFIX = "TPU"
PEER_PREFIX = "reference-jax:"
"""The JAX peer's targets: `reference-jax:DEVICE:jit:PRECISION`."""
NOT_MEASURED = "not measured"
DOCS = "docs/tpu.md"


def on_tpu(device: str | None) -> bool:
    return bool(device) and str(device).startswith(TPU_PREFIX)


def chip_name(device: str) -> str:
    """The chip's product name: JAX calls a v5e "TPU v5 lite" (and a v6e "TPU v6 lite")."""
    lite = re.fullmatch(r"TPU v(\d+) lite", device)
    return f"TPU v{lite.group(1)}e" if lite else device


def precision_of(target: str) -> str:
    """`jax:jit:bf16` and `reference-jax:tpu:jit:bf16` -> bf16."""
    return target.rsplit(":", 1)[-1]


def is_peer(row: ResultRow) -> bool:
    return row.target.startswith(PEER_PREFIX)


def feed_of(row: ResultRow) -> str:
    return row.feed or "device"


def ok_ratio(top: ResultRow | None, bottom: ResultRow | None) -> float | None:
    """top's samples/s over bottom's, where both rows are `ok` (an invalid row's rate divides nothing)."""
    if top is None or bottom is None or top.status != "ok" or bottom.status != "ok" or not bottom.samples_per_s:
        return None
    return top.samples_per_s / bottom.samples_per_s


def not_measured(why: str) -> Cell:
    return Cell(NOT_MEASURED, numeric=True, title=why)


# --- the rows -----------------------------------------------------------------------------------

def tpu_bench_rows(inputs: ReportInputs) -> list[BenchRow]:
    """The newest local bench row per configuration and run, of those measured on a TPU."""
    rows = [read for read in inputs.of(ResultRow) if on_tpu(read.row.device_name) and not read.is_remote]
    return newest(rows, lambda read: configuration(read.row), lambda read: read.row.timestamp)


def configuration(row: ResultRow) -> tuple:
    """What makes two rows one measurement repeated: the chip, the run, the workload, the step, the feed, the batch."""
    return (row.device_name, row.run_id, row.workload, row.workload_sha256, row.size, row.target, feed_of(row),
            row.batch_size)


def tpu_runs(inputs: ReportInputs) -> list[TrainRun]:
    return [run for run in inputs.of(RunSummary) if on_tpu((run.row.data or {}).get("device"))]


def is_compared(row: ResultRow) -> bool:
    """A workload of the project's own (the JAX peer implements Mahjong), not a library's named model."""
    return family_of(row.workload) is None


# --- trainspeed beside the JAX peer ----------------------------------------------------------------

@dataclass(frozen=True)
class PeerLine:
    """One run and batch of one trainspeed target: its device-fed and host-fed rows and the peer's
    device-fed row of the same run and batch (None: that row was not measured)."""

    run_id: str
    batch_size: int
    target: str | None
    """trainspeed's target; None on a line of a peer row that no trainspeed row of its run pairs."""
    device_fed: ResultRow | None
    host_fed: ResultRow | None
    peer: ResultRow | None

    @property
    def ratio(self) -> float | None:
        """trainspeed's samples/s over the peer's, both of this run."""
        return ok_ratio(self.device_fed, self.peer)

    @property
    def host_over_device(self) -> float | None:
        return ok_ratio(self.host_fed, self.device_fed)

    @property
    def peer_nominal_mfu(self) -> float | None:
        """The peer's MFU against the chip's nominal peak (its own row's, or its achieved TFLOP/s over
        the table's figure for its chip and precision); None where the chip has none."""
        peer = self.peer
        return nominal_peak_mfu(peer) if peer is not None and peer.status == "ok" else None

    @property
    def peer_measured_mfu(self) -> float | None:
        """The peer's achieved TFLOP/s over the matmul peak trainspeed's row measured in the same run
        (the peer measures none itself); None where no measured peak holds it."""
        own, peer = self.device_fed, self.peer
        if own is None or peer is None or peer.status != "ok" or peer.achieved_tflops is None:
            return None
        peak = measured_peak_of(own)
        if not peak or refused_peak(peer.achieved_tflops, peak, "measured"):
            return None
        return peer.achieved_tflops / peak


@dataclass(frozen=True)
class Comparison:
    """One chip, workload (name, definition, size) and precision: trainspeed's rows and the peer's."""

    device: str
    workload: str
    workload_sha256: str | None
    size: str
    precision: str
    lines: list[PeerLine]
    reads: list[BenchRow]

    @property
    def label(self) -> str:
        return f"{workload_label(self.workload, self.workload_sha256, self.size)} {self.precision}"

    @property
    def has_host_fed(self) -> bool:
        return any(line.host_fed is not None for line in self.lines)

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(line.target for line in self.lines if line.target is not None))


def comparisons(reads: Sequence[BenchRow]) -> list[Comparison]:
    """The compared rows by chip, workload and precision; each trainspeed row with the peer row of its
    own run and batch, and each peer row no trainspeed row pairs on a line of its own."""
    groups: dict[tuple, list[BenchRow]] = {}
    for read in reads:
        row = read.row
        if is_compared(row):
            key = (row.device_name, row.workload, row.workload_sha256, row.size, precision_of(row.target))
            groups.setdefault(key, []).append(read)
    runs = list(dict.fromkeys(read.row.run_id for read in reads))
    result = []
    for (device, workload, sha, size, precision), members in groups.items():
        rows = [read.row for read in members]
        peers = {(r.run_id, r.batch_size): r for r in rows if is_peer(r) and feed_of(r) == "device"}
        own: dict[tuple[str, str, int], dict[str, ResultRow]] = {}
        for r in rows:
            if not is_peer(r) and feed_of(r) in ("device", "host"):
                own.setdefault((r.run_id, r.target, r.batch_size), {})[feed_of(r)] = r
        lines = [PeerLine(run, batch, target, feeds.get("device"), feeds.get("host"), peers.get((run, batch)))
                 for (run, target, batch), feeds in own.items()]
        paired = {(line.run_id, line.batch_size) for line in lines}
        lines += [PeerLine(run, batch, None, None, None, peer) for (run, batch), peer in peers.items()
                  if (run, batch) not in paired]
        lines.sort(key=lambda line: (runs.index(line.run_id), line.target or "", line.batch_size))
        result.append(Comparison(device, workload, sha, size, precision, lines, members))
    return sorted(result, key=lambda c: (c.device, c.workload, c.size, c.precision != "fp32", c.precision))


def peer_target(comparison: Comparison) -> str:
    return f"{PEER_PREFIX}tpu:jit:{comparison.precision}"


def mfu_percent(mfu: float | None, title: str, missing: str = "–") -> Cell:
    if mfu is None:
        return Cell(missing, numeric=True, title=title)
    cell = percent(mfu)
    return Cell(cell.text, sort=cell.sort, numeric=True, title=title)


def nominal_mfu_text(row: ResultRow) -> Cell:
    """A row's MFU against its chip's nominal peak: the row's own MFU where it divides by it, else
    (rows written before the nominal peaks) its achieved TFLOP/s over the table's figure."""
    if row.peak_tflops_source == "nominal" and row.peak_tflops:
        title = f"against {row.peak_tflops:,.4g} TFLOP/s, {row.nominal_peak_chip} ({row.nominal_peak_source})"
        return mfu_percent(row.mfu, row.peak_refused or title, "peak refused" if row.peak_refused else "–")
    peak = row_nominal_peak(row)
    if peak is None:
        return mfu_percent(None, f"no nominal peak known for {row.device_name!r} ({precision_of(row.target)})")
    title = f"against {peak.tflops:,.4g} TFLOP/s, {peak.entry} ({peak.source})"
    mfu = nominal_peak_mfu(row)
    if mfu is None and row.achieved_tflops is not None:
        return mfu_percent(None, refused_peak(row.achieved_tflops, peak.tflops, "nominal") or title, "peak refused")
    return mfu_percent(mfu, title)


def measured_mfu_text(row: ResultRow) -> Cell:
    """A row's MFU against the matmul chain measured on the chip in the same run."""
    peak = measured_peak_of(row)
    if peak is None:
        return mfu_percent(None, "no matmul peak measured in this row's run")
    return mfu_percent(measured_peak_mfu(row), f"against {peak:,.1f} TFLOP/s measured (run {row.run_id})",
                       "peak refused")


def comparison_cells(comparison: Comparison, line: PeerLine, show_target: bool) -> list[Cell]:
    where = f"at batch {line.batch_size} in run {line.run_id}"
    own, peer = line.device_fed, line.peer
    if own is None:
        own_cell = not_measured(f"no device-fed trainspeed row {where}")
    else:
        own_cell = measured(own.status, readable(own.samples_per_s))
    if peer is None:
        peer_cell = not_measured(f"no device-fed {peer_target(comparison)} row of {comparison.workload} "
                                 f"{comparison.size} {where}")
    else:
        peer_cell = measured(peer.status, readable(peer.samples_per_s))
    missing = NOT_MEASURED if own is None or peer is None else "–"
    cells = [text(line.run_id), number(line.batch_size)]
    cells += [text(line.target or NOT_MEASURED)] if show_target else []
    cells += [
        own_cell, peer_cell, ratio_cell(line.ratio, missing),
        measured(own.status, nominal_mfu_text(own)) if own is not None else not_measured(f"no trainspeed row {where}"),
        measured(own.status, measured_mfu_text(own)) if own is not None else not_measured(f"no trainspeed row {where}"),
        percent(line.peer_nominal_mfu) if line.peer_nominal_mfu is not None else Cell(missing, numeric=True),
        percent(line.peer_measured_mfu) if line.peer_measured_mfu is not None else Cell(missing, numeric=True),
    ]
    if comparison.has_host_fed:
        host = line.host_fed
        cells += [measured(host.status, readable(host.samples_per_s)) if host is not None
                  else not_measured(f"no host-fed trainspeed row {where}"),
                  ratio_cell(line.host_over_device, NOT_MEASURED if host is None or own is None else "–")]
    return cells


def comparison_table(comparison: Comparison) -> Table:
    targets = comparison.targets
    show_target = len(targets) != 1
    columns = [("run", False), ("batch", True)] + ([("target", False)] if show_target else []) + [
        ("trainspeed samples/s", True), ("JAX peer samples/s", True), ("trainspeed / peer", True),
        ("MFU, nominal peak", True), ("MFU, measured peak", True), ("peer MFU, nominal peak", True),
        ("peer MFU, measured peak", True)]
    if comparison.has_host_fed:
        columns += [("host-fed samples/s", True), ("host-fed / device-fed", True)]
    step = f" ({targets[0]})" if len(targets) == 1 else ""
    return Table(
        f"table-tpu-{slug(comparison.device, comparison.label)}",
        f"{comparison.label} on {chip_name(comparison.device)}: trainspeed's step{step} and the JAX peer "
        f"({peer_target(comparison)}) of the same run, device-fed",
        columns, [comparison_cells(comparison, line, show_target) for line in comparison.lines],
        provenance(comparison.reads))


def machine_text(rows: Sequence[ResultRow]) -> str:
    """Where the rows ran and how loaded that host was: hosts, cores, load average, JAX versions."""
    machines = [row.machine for row in rows if row.machine is not None]
    parts = []
    hosts = sorted({m.hostname for m in machines if m.hostname})
    if hosts:
        parts.append("host " + ", ".join(hosts))
    cores = sorted({m.cores_usable or m.cores_total for m in machines if m.cores_usable or m.cores_total})
    if cores:
        parts.append("/".join(str(c) for c in cores) + " host cores")
    loads = [load for m in machines for load in (m.load_average_start, m.load_average_end) if load is not None]
    if loads:
        low, high = f"{min(loads):.2f}", f"{max(loads):.2f}"
        parts.append(f"load average {low}" + (f"-{high}" if high != low else ""))
    else:
        parts.append("load average not recorded")
    parts += sorted({row.jax_versions for row in rows if row.jax_versions})
    return ", ".join(parts)


def line_label(comparison: Comparison, run_id: str) -> str:
    return f"{comparison.workload} {comparison.size}, run {run_id}"


def drawn_comparisons(chosen: Sequence[Comparison]) -> list[Comparison]:
    """The workloads (name and definition) the peer was measured on, every size and run of them; all
    of them where the peer ran on none. A workload without a peer, drawn beside them, would only
    stretch the axis: the tiny size runs 30 times as many samples/s as the base one."""
    with_peer = {(c.workload, c.workload_sha256) for c in chosen if any(line.peer for line in c.lines)}
    return [c for c in chosen if (c.workload, c.workload_sha256) in with_peer] or list(chosen)


def chip_figure(device: str, chosen: Sequence[Comparison]) -> Figure:
    """Samples/s against batch size, a panel per precision: trainspeed's device-fed rows (solid) and
    the peer's of the same run (dashed), a colour per workload and run. Rows that are not `ok` are
    in the tables only."""
    precisions = list(dict.fromkeys(c.precision for c in chosen))
    figure, axes_list = panels(len(precisions), (7.0 * len(precisions), 5.2))
    keys = list(dict.fromkeys((c.workload, c.size, line.run_id) for c in chosen for line in c.lines))
    for axes, precision in zip(axes_list, precisions):
        batch_sizes: set[int] = set()
        for comparison in (c for c in chosen if c.precision == precision):
            for run_id in dict.fromkeys(line.run_id for line in comparison.lines):
                colour = COLOURS[keys.index((comparison.workload, comparison.size, run_id)) % len(COLOURS)]
                lines = [line for line in comparison.lines if line.run_id == run_id]
                name = line_label(comparison, run_id)
                for target in dict.fromkeys(line.target for line in lines if line.target is not None):
                    own = [line.device_fed for line in lines if line.target == target and line.device_fed is not None
                           and line.device_fed.status == "ok"]
                    if own:
                        axes.plot([math.log2(r.batch_size) for r in own], [r.samples_per_s for r in own], marker="o",
                                  color=colour, label=f"trainspeed {target}: {name}")
                        batch_sizes.update(r.batch_size for r in own)
                peers = sorted({id(line.peer): line.peer for line in lines
                                if line.peer is not None and line.peer.status == "ok"}.values(),
                               key=lambda r: r.batch_size)
                if peers:
                    axes.plot([math.log2(r.batch_size) for r in peers], [r.samples_per_s for r in peers], marker="s",
                              linestyle="--", markerfacecolor="none", color=colour, label=f"JAX peer: {name}")
                    batch_sizes.update(r.batch_size for r in peers)
        samples_axis(axes)
        axes.set(ylabel="samples/s (device-fed)", title=f"{precision} on {chip_name(device)}")
        label_batch_axis(axes, sorted(batch_sizes))
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=7)
    return figure


# --- the other workloads, and training runs ------------------------------------------------------

def named_table(reads: Sequence[BenchRow]) -> Table:
    chosen = sorted(reads, key=lambda read: (read.row.device_name, read.row.workload, read.row.size, read.row.target,
                                             feed_of(read.row), read.row.batch_size))
    rows = []
    for read in chosen:
        row, status = read.row, read.row.status
        rows.append([
            text(workload_label(row.workload, row.workload_sha256, row.size)), text(chip_name(row.device_name or "")),
            text(row.target + ("" if feed_of(row) == "device" else f" {feed_of(row)}-fed")), number(row.batch_size),
            status_cell(status, row.error), measured(status, readable(row.samples_per_s)),
            number(row.compile_s, "{:,.1f}"), measured(status, nominal_mfu_text(row)),
            measured(status, measured_mfu_text(row)), text(row.run_id),
        ])
    return Table("table-tpu-named", "Named models on the chip (an out-of-memory row says so)",
                 [("model", False), ("chip", False), ("target", False), ("batch", True), ("status", False),
                  ("samples/s", True), ("compile (s)", True), ("MFU, nominal peak", True),
                  ("MFU, measured peak", True), ("run", False)],
                 rows, provenance(list(chosen)))


def run_cells(run: TrainRun) -> list[Cell]:
    summary, goal = run.row, run.row.time_to_target
    if goal is None:
        goal_cell, step, samples = text("none"), Cell("no goal", numeric=True), number(summary.samples, "{:,d}")
        seconds = Cell("–", numeric=True, title="a run without a goal records no training seconds to one")
    elif not goal.reached:
        goal_cell = text(goal.until)
        step = Cell("not reached", numeric=True, title=f"best {goal.best_value} by step {goal.step}")
        samples, seconds = number(goal.samples, "{:,d}"), Cell("–", numeric=True)
    else:
        goal_cell, step = text(goal.until), number(goal.step, "{:,d}")
        samples, seconds = number(goal.samples, "{:,d}"), number(goal.train_s, "{:.1f}")
    return [text(Path(run.source.path).parent.name), text(chip_name(str((summary.data or {}).get("device")))),
            text(workload_label(summary.workload, summary.workload_sha256, summary.size)), text(summary.target),
            number(summary.global_batch, "{:,d}"), goal_cell, step, samples, seconds,
            readable(summary.steady_samples_per_s)]


def runs_table(runs: Sequence[TrainRun]) -> Table:
    return Table("table-tpu-training", "Training runs on the chip: where a goal was reached (samples: at the goal, "
                 "or every sample trained where the run had none)",
                 [("run", False), ("chip", False), ("workload", False), ("target", False), ("batch", True),
                  ("goal", False), ("reached at step", True), ("samples", True), ("training s", True),
                  ("steady samples/s", True)],
                 [run_cells(run) for run in runs], provenance(runs))


# --- the section ---------------------------------------------------------------------------------

INTRO = (
    "Rows measured on a TPU chip (a device name that starts with \"TPU\"). trainspeed's step is the workload's own "
    "PyTorch step as one JAX program; the JAX peer is the same network written in plain JAX with optax "
    "(benchmarks/reference/jax_optax.py). A ratio divides two rows of one run at one batch size. MFU is given twice: "
    "against the chip's nominal peak (the vendor's dense bf16 figure, 197 TFLOP/s on a v5e, which fp32 rows take "
    "too: JAX's default precision runs fp32 matmuls as bf16 passes; trainspeed/nominal_peaks.py), as the "
    "field counts MFU, and against the matmul chain measured on the chip in the same run (the peer's against the "
    "chain trainspeed's row of its run measured); a row that does not exist says \"not measured\". "
    "On a TPU VM with torch, the jax family runs the step in the process (trainspeed bench --targets jax:jit:bf16; "
    "train --target jax:jit:bf16). Where only JAX is, export the step where torch is (trainspeed export --platform "
    f"tpu) and run the artifacts there (python -m trainspeed bench --exported DIR; train --exported DIR): {DOCS}."
)


def tpu_section(reads: Sequence[BenchRow], runs: Sequence[TrainRun]) -> Section:
    devices = list(dict.fromkeys([read.row.device_name for read in reads]
                                 + [(run.row.data or {}).get("device") for run in runs]))
    section = Section("tpu", ", ".join(dict.fromkeys(chip_name(str(d)) for d in devices)), INTRO)
    compared = comparisons(reads)
    for device in dict.fromkeys(c.device for c in compared):
        on_chip = [c for c in compared if c.device == device]
        chosen = drawn_comparisons(on_chip)
        drawn = [read for c in chosen for read in c.reads]
        left = "; the workloads the peer did not run are in the tables only" if len(chosen) < len(on_chip) else ""
        section.figures.append(figure_block(
            f"fig-tpu-{slug(device)}",
            f"Samples/s against batch size on one {chip_name(device)} chip (\"{device}\"): trainspeed's step (solid) "
            f"and the JAX peer of the same run (dashed), device-fed{left}. Measured on "
            f"{machine_text([r.row for r in drawn])}",
            chip_figure(device, chosen), drawn))
    section.tables += [comparison_table(c) for c in compared]
    others = [read for read in reads if not is_compared(read.row)]
    if others:
        section.tables.append(named_table(others))
    if runs:
        section.tables.append(runs_table(runs))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    reads, runs = tpu_bench_rows(inputs), tpu_runs(inputs)
    if not reads and not runs:
        return []
    return [tpu_section(reads, runs)]


RUN_SUMMARIES = next(kind for kind in train_report.PART.kinds if kind.row_type is RunSummary)
PART = ReportPart(name="tpu", kinds=(BENCH_ROWS, RUN_SUMMARIES), sections=sections,
                  counts=lambda inputs: [])
"""Its rows are the bench's and the trainer's, counted there."""
