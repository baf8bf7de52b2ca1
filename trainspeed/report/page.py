"""`trainspeed report`: one self-contained HTML page of every result it is given.

The page is the Jinja2 template `templates/report.html.j2` filled with sections; a section is
present only when its rows are. Figures are inline SVG (no files beside the page, nothing fetched),
tables sort on a click on their header (a small inline script), and a row whose status is not
`ok` shows its status where its numbers would be: an `invalid` row's samples/s is never printed.
Every figure names the commands that produced its rows and the environment they ran in.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import jinja2

from trainspeed.atomic import atomic_write_text
from trainspeed.report import figures
from trainspeed.report.inputs import BenchRow, EvalRow, ReportInputs, TrainRun
from trainspeed.report.study import StudyRow

NOT_RECORDED = "command not recorded in the rows"
GIB = 2**30


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | str | None = None
    """The value a numeric column sorts by (None: the cell sorts after every number)."""
    status: str | None = None
    """Set on a cell that shows a row's status instead of a number."""
    numeric: bool = False
    title: str | None = None
    """The whole text where the cell shows a shortened one (a long error)."""


@dataclass(frozen=True)
class Table:
    id: str
    caption: str
    columns: list[tuple[str, bool]]
    """(header, numeric) per column."""
    rows: list[list[Cell]]


@dataclass(frozen=True)
class FigureBlock:
    id: str
    caption: str
    svg: str
    commands: list[str]
    unrecorded: int
    """How many of the figure's rows carry no command."""
    environment: list[str]
    sources: list[str]


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


def ratio_cell(value: float | None) -> Cell:
    """A ratio with two decimals, or two significant digits below 0.1 (0.0022x, not 0.00x)."""
    if value is None:
        return Cell("–", numeric=True)
    return number(value, "{:.2f}x" if abs(value) >= 0.1 else "{:.2g}x")


def number(value: float | None, form: str = "{:,.0f}") -> Cell:
    if value is None:
        return Cell("–", numeric=True)
    return Cell(form.format(value), sort=float(value), numeric=True)


def readable(value: float | None) -> Cell:
    """Samples/s: thousands separated, small rates with three significant digits."""
    if value is None:
        return Cell("–", numeric=True)
    return number(value, "{:,.0f}" if abs(value) >= 100 else "{:.3g}")


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


def mfu_cell(row: BenchRow) -> Cell:
    """MFU in percent; a refused peak (the row's, or one above 100% from before the bench refused
    those) says so instead."""
    mfu = figures.plausible_mfu(row)
    if mfu is not None:
        return number(mfu * 100, "{:.1f}%")
    if row.row.peak_refused or row.row.mfu is not None:
        return Cell("peak refused", numeric=True)
    return Cell("–", numeric=True)


def slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


# --- provenance ---------------------------------------------------------------------------------

def bench_environment(row: BenchRow) -> str:
    r = row.row
    parts = [r.device_name or "device not recorded"]
    parts += [f"torch {r.torch_version}"] if r.torch_version else ["torch version not recorded"]
    parts += [f"torch_xla {r.torch_xla_version}"] if r.torch_xla_version else []
    parts += [f"Python {r.python_version}"] if r.python_version else []
    parts += [f"{r.threads} threads" if r.threads else "threads not recorded"]
    parts += [f"host {r.hostname}"] if r.hostname else []
    return ", ".join(parts)


def eval_environment(row: EvalRow) -> str:
    parts = [f"target {row.get('target')}" if row.get("target") else "target not recorded"]
    parts += [f"device {row.get('device')}"] if row.get("device") else []
    parts += [f"torch {row.get('torch_version')}"] if row.get("torch_version") else ["torch version not recorded"]
    parts += [f"{row.get('threads')} threads" if row.get("threads") else "threads not recorded"]
    parts += [str(row.get("engine"))] if row.get("engine") else []
    return ", ".join(parts)


def run_environment(run: TrainRun) -> str:
    parts = [f"{run.get('target')} x{run.get('world_size')}"]
    parts += [f"torch {run.get('torch_version')}"] if run.get("torch_version") else ["torch version not recorded"]
    parts += [f"{run.get('threads')} threads per rank" if run.get("threads") else "threads not recorded"]
    parts += [f"{run.get('num_workers')} loader workers per rank"] if run.get("num_workers") is not None else []
    return ", ".join(parts)


def study_environment(row: StudyRow) -> str:
    parts = [f"{name} {row.get(name)}" for name in ("target", "size", "nproc", "threads", "torch_version")
             if row.get(name) is not None]
    return ", ".join(parts) if parts else "environment not recorded in the rows"


def figure_block(figure_id: str, caption: str, figure: Any, rows: Sequence[Any],
                 environment: Callable[[Any], str]) -> FigureBlock:
    commands = list(dict.fromkeys(row.command for row in rows if row.command))
    sources = list(dict.fromkeys(str(row.source).rsplit(":", 1)[0] if getattr(row.source, "line", None) else str(row.source)
                                 for row in rows))
    return FigureBlock(
        id=figure_id, caption=caption, svg=figures.svg_text(figure, figure_id),
        commands=commands, unrecorded=sum(1 for row in rows if not row.command),
        environment=list(dict.fromkeys(environment(row) for row in rows)), sources=sources,
    )


# --- bench sections -----------------------------------------------------------------------------

def bench_groups(rows: Sequence[BenchRow]) -> dict[str, list[BenchRow]]:
    groups: dict[str, list[BenchRow]] = {}
    for row in rows:
        groups.setdefault(row.workload_label, []).append(row)
    return dict(sorted(groups.items()))


def ratio_section(groups: dict[str, list[BenchRow]], baselines: Sequence[str]) -> Section:
    section = Section(
        "ratio", "Throughput ratio vs batch size",
        "The study's figure: samples/s of each target over the baseline's at the same batch size, batch "
        "size on a log2 axis. Whiskers run from the slowest to the fastest timed window (over the "
        "baseline's median window); a hollow marker off the line is an invalid row (a compilation inside "
        "a timed window). The newest row per configuration is drawn; rows are in the tables below.",
    )
    table_rows = []
    for workload, rows in groups.items():
        if not any(r.row.is_measured for r in rows):
            continue
        table = figures.series_table(rows, baselines)
        latest = figures.newest_per_series(rows)
        section.figures.append(figure_block(
            f"fig-ratio-{slug(workload)}", f"{workload}: throughput ratio to {table.baseline} (newest row per configuration)",
            figures.ratio_figure(table, workload), latest, bench_environment))
        for row in sorted(latest, key=lambda r: (r.series, r.row.batch_size)):
            status = row.row.status
            ratio = table.ratio(row.series, row.row.batch_size)
            spread = table.ratio_spread(row.series, row.row.batch_size)
            table_rows.append([
                text(workload), text(row.series), number(row.row.batch_size), status_cell(status, row.row.error),
                measured(status, readable(row.row.samples_per_s)),
                measured(status, ratio_cell(ratio) if ratio is not None else Cell("no baseline row", numeric=True)),
                measured(status, Cell(f"{spread[0]:.3g} – {spread[1]:.3g}", sort=spread[0], numeric=True) if spread
                         else Cell("–", numeric=True)),
                text(table.baseline),
            ])
    if table_rows:
        section.tables.append(Table(
            "table-ratio", "Ratio to the baseline per configuration (newest row)",
            [("workload", False), ("series", False), ("batch", True), ("status", False), ("samples/s", True),
             ("ratio", True), ("ratio, slowest – fastest window", True), ("baseline", False)],
            table_rows))
    return section


def extra_text(row: BenchRow) -> str:
    """The fields a row carries beyond ResultRow's; a row that is not `ok` shows no numbers here either."""
    shown = []
    for key, value in row.extra.items():
        if key in ("command", "row_format", "variant") or value is None or isinstance(value, (list, dict)):
            continue
        if row.row.status != "ok" and isinstance(value, (int, float)) and not isinstance(value, bool):
            continue
        shown.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    return ", ".join(shown)


def throughput_section(groups: dict[str, list[BenchRow]], baselines: Sequence[str]) -> Section:
    section = Section(
        "throughput", "Absolute samples/s and MFU",
        "Median-window samples/s on a log axis (whiskers: slowest to fastest window), and the model FLOPs "
        "utilisation against the peak measured on the same device (or given with --peak-tflops). A row whose "
        "peak was refused has no MFU. Every row read is in the table, including older reruns.",
    )
    for workload, rows in groups.items():
        if not any(r.row.is_measured for r in rows):
            continue
        table = figures.series_table(rows, baselines)
        section.figures.append(figure_block(
            f"fig-throughput-{slug(workload)}", f"{workload}: samples/s and MFU (newest row per configuration)",
            figures.throughput_figure(table, rows, workload), figures.newest_per_series(rows), bench_environment))
    table_rows = []
    for rows in groups.values():
        for row in rows:
            r, status = row.row, row.row.status
            table_rows.append([
                text(row.workload_label), text(row.series), number(r.batch_size), status_cell(status, r.error),
                measured(status, readable(r.samples_per_s)),
                measured(status, Cell(f"{r.samples_per_s_min:,.0f} – {r.samples_per_s_max:,.0f}", sort=r.samples_per_s_min,
                                      numeric=True) if r.samples_per_s_min is not None and r.samples_per_s_max is not None
                         else Cell("–", numeric=True)),
                measured(status, number(r.step_time_s * 1e3 if r.step_time_s is not None else None, "{:,.2f}")),
                measured(status, number(r.first_step_s, "{:,.3f}")),
                measured(status, mfu_cell(row)),
                measured(status, number(r.peak_memory_bytes / GIB if r.peak_memory_bytes is not None else None, "{:,.2f}")),
                text(r.feed or "device"), text(r.device_name), number(r.threads, "{:d}") if r.threads else text(None),
                text(r.torch_version), text(extra_text(row)), text(row.source),
            ])
    section.tables.append(Table(
        "table-bench", "Every bench row",
        [("workload", False), ("series", False), ("batch", True), ("status", False), ("samples/s", True),
         ("slowest – fastest window", True), ("step (ms)", True), ("first step (s)", True), ("MFU", True),
         ("peak memory (GiB)", True), ("feed", False), ("device", False), ("threads", True), ("torch", False),
         ("other fields", False), ("row", False)],
        table_rows))
    return section


def memory_section(groups: dict[str, list[BenchRow]]) -> Section:
    section = Section(
        "memory", "Peak memory and the OOM boundary",
        "Peak device memory per target and batch size (the allocator's peak; CPU rows record none). A red "
        "cross on the top edge is an out-of-memory row, a grey tick a batch skipped because a smaller one "
        "already ran out; the dotted line marks where a target stopped fitting.",
    )
    table_rows = []
    for workload, rows in groups.items():
        latest = figures.newest_per_series(rows)
        if not any(r.row.peak_memory_bytes is not None or r.row.status == "oom" for r in latest):
            continue
        section.figures.append(figure_block(
            f"fig-memory-{slug(workload)}", f"{workload}: peak device memory per batch size",
            figures.memory_figure(latest, workload), latest, bench_environment))
        for series in dict.fromkeys(r.series for r in latest):
            own = sorted((r for r in latest if r.series == series), key=lambda r: r.row.batch_size)
            fit = [r for r in own if r.row.status in ("ok", "invalid")]
            oom = [r for r in own if r.row.status == "oom"]
            largest = fit[-1] if fit else None
            table_rows.append([
                text(workload), text(series), number(largest.row.batch_size) if largest else Cell("none fit", numeric=True),
                number(largest.row.peak_memory_bytes / GIB if largest and largest.row.peak_memory_bytes is not None else None,
                       "{:,.2f}"),
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


def first_step_section(groups: dict[str, list[BenchRow]]) -> Section:
    section = Section(
        "first-step", "First-step (compile) time",
        "The first step of every configuration is timed alone: it includes torch.compile's or XLA's "
        "compilation, which the timed windows leave out. Log scale.",
    )
    for workload, rows in groups.items():
        latest = figures.newest_per_series(rows)
        if any(r.row.first_step_s is not None for r in latest):
            section.figures.append(figure_block(
                f"fig-first-step-{slug(workload)}", f"{workload}: first step per batch size",
                figures.first_step_figure(latest, workload), latest, bench_environment))
    return section


# --- other sections -----------------------------------------------------------------------------

def training_section(runs: Sequence[TrainRun]) -> Section:
    section = Section(
        "training", "End-to-end training",
        "Data-parallel training with each rank reading its own data: end-to-end samples/s of every "
        "configuration (the median of its repeats, whiskers to the slowest and fastest), and its ratio to "
        "the one-device run of the same workload and data kind, as the study's 8 TPU cores against one GPU "
        "(11.23x). End to end: all samples over the wall time from the first to the last step, all ranks, "
        "validation and checkpoints left out. The right panel is the share of time ranks waited for data.",
    )
    bars = figures.train_bars(runs)
    section.figures.append(figure_block("fig-training", "End-to-end samples/s: N devices vs one device, and data wait",
                                        figures.training_figure(bars), list(runs), run_environment))
    with_curves = [run for run in runs if run.train_curve or run.val_curve]
    if with_curves:
        section.figures.append(figure_block("fig-training-curves", "Training loss and validation per run",
                                            figures.curves_figure(with_curves), with_curves, run_environment))
    ratio_of = {id(run): bar for bar in bars for run in bar.runs}
    table_rows = []
    for run in runs:
        bar = ratio_of[id(run)]
        ratio = figures.train_rate(run) / bar.baseline.samples_per_s if bar.baseline else None
        validation = run.get("validation") or {k: run.get(k) for k in ("val_accuracy",) if run.get(k) is not None}
        table_rows.append([
            text(f"{run.get('workload')} {run.get('size')}"), text(run.get("target")), number(run.get("world_size"), "{:d}"),
            number(run.get("batch_size_per_device"), "{:d}"), number(run.get("global_batch"), "{:d}"),
            text("synthetic" if run.synthetic else "real"),
            readable(run.get("end_to_end_samples_per_s")), readable(run.get("steady_samples_per_s")),
            ratio_cell(ratio),
            number(run.get("data_wait_fraction") * 100 if run.get("data_wait_fraction") is not None else None, "{:.1f}%"),
            number(run.get("data_wait_fraction_worst_rank") * 100
                   if run.get("data_wait_fraction_worst_rank") is not None else None, "{:.1f}%"),
            number(run.get("io_efficiency"), "{:.3f}"),
            text(", ".join(f"{k} {v:.4g}" for k, v in validation.items() if isinstance(v, (int, float)))),
            text(run.source),
        ])
    section.tables.append(Table(
        "table-training", "Every training run",
        [("workload", False), ("target", False), ("ranks", True), ("batch/device", True), ("global batch", True),
         ("data", False), ("end-to-end samples/s", True), ("steady samples/s", True), ("vs one device", True),
         ("data wait", True), ("worst rank", True), ("IO efficiency", True), ("validation", False), ("run", False)],
        table_rows))
    return section


def remote_section(rows: Sequence[BenchRow]) -> Section:
    section = Section(
        "remote", "Local vs remote",
        "The same step run by a remote target (batches sent over the network to a device elsewhere) and "
        "by its local counterpart (the same inner target here). The study found direct access about 5x "
        "faster than remote access at batch 2048, because every step's batch crossed the network. The "
        "right panel splits a remote step into the device's own step and the rest (the wire).",
    )
    pairs = figures.remote_pairs(rows)
    section.figures.append(figure_block("fig-remote", "Local over remote samples/s, and the remote step's time",
                                        figures.remote_figure(pairs),
                                        [p.remote for p in pairs] + [p.local for p in pairs if p.local], bench_environment))
    table_rows = []
    for pair in pairs:
        remote, local = pair.remote, pair.local
        status = remote.row.status
        server = remote.get("server_step_s")
        client = remote.row.step_time_s
        table_rows.append([
            text(remote.workload_label), text(remote.row.target), text(remote.get("link")), text(remote.get("transport")),
            number(remote.get("in_flight"), "{:d}") if isinstance(remote.get("in_flight"), int) else text(remote.get("in_flight")),
            number(remote.row.batch_size), status_cell(status, remote.row.error),
            measured(status, readable(remote.row.samples_per_s)),
            measured(local.row.status, readable(local.row.samples_per_s)) if local else Cell("no local row", numeric=True),
            ratio_cell(pair.ratio),
            measured(status, number(client * 1e3 if client is not None else None, "{:,.2f}")),
            measured(status, number(server * 1e3 if server is not None else None, "{:,.2f}")),
            measured(status, number((client - server) * 1e3 if client is not None and server is not None else None, "{:,.2f}")),
            number(remote.get("bytes_sent_per_step")), number(remote.get("bytes_received_per_step")),
        ])
    section.tables.append(Table(
        "table-remote", "Remote rows and their local counterparts",
        [("workload", False), ("remote target", False), ("link", False), ("transport", False), ("in flight", True),
         ("batch", True), ("status", False), ("remote samples/s", True), ("local samples/s", True), ("local / remote", True),
         ("client step (ms)", True), ("device step (ms)", True), ("wire (ms)", True), ("bytes sent/step", True),
         ("bytes received/step", True)],
        table_rows))
    return section


def _interval(value: Any, form: str) -> str:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"[{form.format(value[0])}, {form.format(value[1])}]"
    return ""


def eval_section(rows: Sequence[EvalRow]) -> Section:
    section = Section(
        "selfplay", "Self-play strength",
        "Trained policies in duplicate games against three copies of an opponent: the mean rank (1 best, 4 "
        "worst; 2.5 is even) with its 95% confidence interval, and the share of games at each rank.",
    )
    section.figures.append(figure_block("fig-selfplay", "Mean rank with 95% interval, and rank shares, per evaluation",
                                        figures.eval_figure(rows), list(rows), eval_environment))
    table_rows = []
    for row in rows:
        distribution = row.get("rank_distribution")
        table_rows.append([
            text(row.get("policy")), text(row.get("policy_size")), number(row.get("policy_step"), "{:d}")
            if isinstance(row.get("policy_step"), int) else text(row.get("policy_step")),
            text(row.get("opponent")), number(row.get("games"), "{:d}"), number(row.get("deals"), "{:d}")
            if isinstance(row.get("deals"), int) else text(row.get("deals")),
            text(row.get("target")), number(row.get("temperature"), "{:g}") if isinstance(row.get("temperature"), (int, float))
            else text(row.get("temperature")),
            number(row.get("mean_rank"), "{:.3f}"), text(_interval(row.get("mean_rank_ci95"), "{:.3f}")),
            number(row.get("mean_score_delta"), "{:+,.0f}") if isinstance(row.get("mean_score_delta"), (int, float))
            else text(None),
            text(_interval(row.get("mean_score_delta_ci95"), "{:+,.0f}")),
            text(" / ".join(f"{share:.0%}" for share in distribution)),
            number(row.get("games_per_s"), "{:,.2f}") if isinstance(row.get("games_per_s"), (int, float)) else text(None),
            number(row.get("decisions_per_s"), "{:,.0f}") if isinstance(row.get("decisions_per_s"), (int, float)) else text(None),
        ])
    section.tables.append(Table(
        "table-selfplay", "Every evaluation",
        [("policy", False), ("size", False), ("step", True), ("opponent", False), ("games", True), ("deals", True),
         ("target", False), ("temperature", True), ("mean rank", True), ("95% interval", False),
         ("score delta", True), ("95% interval", False), ("ranks 1/2/3/4", False), ("games/s", True),
         ("decisions/s", True)],
        table_rows))
    return section


def study_section(rows: Sequence[StudyRow]) -> Section:
    section = Section(
        "batch-size-study", "Batch-size study",
        "Does a larger global batch give a better policy? The same model trained on the same data and the "
        "same number of samples at each global batch, the learning rate tuned per batch: validation at equal "
        "samples (the end of each run, filled) and at equal steps (hollow), training time, and playing "
        "strength with its 95% interval.",
    )
    drawn = [r for r in rows if r.role in ("run", "batch")]
    if drawn:
        section.figures.append(figure_block("fig-batch-size-study", "Batch-size study: validation, time and strength per global batch",
                                            figures.study_figure(drawn), rows, study_environment))
    table_rows = []
    for row in drawn:
        table_rows.append([
            text(row.role), number(row.get("global_batch"), "{:d}"), number(row.get("lr"), "{:.3g}"),
            text(row.seed_label), number(row.get("steps"), "{:d}") if isinstance(row.get("steps"), int) else text(None),
            number(row.get("val_loss"), "{:.4f}"), number(row.get("val_accuracy") * 100 if row.get("val_accuracy") is not None else None, "{:.2f}%"),
            number(row.get("equal_steps_val_loss"), "{:.4f}"),
            number(row.get("equal_steps_val_accuracy") * 100 if row.get("equal_steps_val_accuracy") is not None else None, "{:.2f}%"),
            number(row.get("wall_s"), "{:,.0f}"),
            number(row.get("mean_rank"), "{:.3f}"), text(_interval(row.get("mean_rank_ci95"), "{:.3f}")),
        ])
    if table_rows:
        section.tables.append(Table(
            "table-batch-size-study", "Every run (and each global batch's summary)",
            [("row", False), ("global batch", True), ("peak LR", True), ("seed", False), ("steps", True),
             ("val loss, equal samples", True), ("val accuracy, equal samples", True), ("val loss, equal steps", True),
             ("val accuracy, equal steps", True), ("wall (s)", True), ("mean rank", True), ("95% interval", False)],
            table_rows))
    comparisons = [r for r in rows if r.role == "comparison"]
    if comparisons:
        section.tables.append(Table(
            "table-batch-size-comparisons", "Mean rank of one global batch minus another's, deal by deal",
            [("global batch", True), ("versus", True), ("difference", True), ("95% interval", False), ("deals", True)],
            [[number(r.get("global_batch"), "{:d}"), number(r.get("versus_batch"), "{:d}"),
              number(r.get("mean_rank_difference"), "{:+.3f}"), text(_interval(r.get("ci95"), "{:+.3f}")),
              number(r.get("deals"), "{:d}") if isinstance(r.get("deals"), int) else text(r.get("deals"))]
             for r in comparisons]))
    return section


# --- the page -----------------------------------------------------------------------------------

def build_sections(inputs: ReportInputs, baselines: Sequence[str] = ()) -> list[Section]:
    local = [row for row in inputs.bench if not row.is_remote]
    remote = [row for row in inputs.bench if row.is_remote]
    groups = bench_groups(local)
    sections: list[Section] = []
    if local:
        sections += [ratio_section(groups, baselines), throughput_section(groups, baselines),
                     memory_section(groups), first_step_section(groups)]
    if inputs.runs:
        sections.append(training_section(inputs.runs))
    if remote:
        sections.append(remote_section(inputs.bench))
    if inputs.evals:
        sections.append(eval_section(inputs.evals))
    if inputs.study:
        sections.append(study_section(inputs.study))
    return [s for s in sections if s.figures or s.tables]


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("trainspeed.report", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    )


def render(inputs: ReportInputs, title: str = "trainspeed report", baselines: Sequence[str] = ()) -> str:
    sections = build_sections(inputs, baselines)
    counts = Counter()
    counts.update({"bench rows": len([r for r in inputs.bench if not r.is_remote]),
                   "remote rows": len([r for r in inputs.bench if r.is_remote]), "training runs": len(inputs.runs),
                   "evaluation rows": len(inputs.evals), "batch-size study rows": len(inputs.study)})
    return _environment().get_template("report.html.j2").render(
        title=title, sections=sections, files=inputs.files, not_recorded=NOT_RECORDED,
        counts=[(what, n) for what, n in counts.items() if n],
        statuses=sorted({row.row.status for row in inputs.bench} - {"ok"}),
    )


def write_report(inputs: ReportInputs, out: Path, title: str = "trainspeed report", baselines: Sequence[str] = ()) -> Path:
    atomic_write_text(out, render(inputs, title, baselines))
    return out

