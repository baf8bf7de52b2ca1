"""The trainer's part of the report: every run directory (`summary.json` and the curves of its
`metrics.jsonl`), its end-to-end samples/s, where its ranks waited for data, its training and
validation curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from trainspeed.errors import UsageError
from trainspeed.report.figures import caption_machines, figure_block, save_figure
from trainspeed.report.inputs import ReportInputs
from trainspeed.report.page import (
    Section,
    Table,
    number,
    percent,
    readable,
    text,
)
from trainspeed.report.part import PlotRequest, ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.rows import KIND, Source
from trainspeed.train.figures import (
    TrainBar,
    batch_schedule_figure,
    curves_figure,
    noise_scale_figure,
    training_figure,
)
from trainspeed.train.rows import METRICS_FILE, SUMMARY_FILE, RunSummary
from trainspeed.train.runs import METRICS_ROWS, TrainRun, has_summary, is_run_directory, read_run


def read_run_directory(directory: Path, inputs: ReportInputs, nested: bool) -> bool:
    """A run directory: its summary and its curves. One that never got to its first summary (it
    failed or was stopped early) is refused when given, and passed over inside a folder."""
    if not has_summary(directory) and (nested or not is_run_directory(directory)):
        return False
    run = read_run(directory)
    inputs.read.update(path.resolve() for path in run.files)
    inputs.add(run)
    return True


def metrics_row(record: dict[str, Any], source: Source) -> tuple[Any, dict[str, Any]]:
    raise UsageError(f"{source}: a {record[KIND]!r} row belongs in a run directory's {METRICS_FILE}; "
                     "give the report the run directory")


def training_section(runs: Sequence[TrainRun]) -> Section:
    section = Section(
        "training", "End-to-end training",
        "Data-parallel training with each rank reading its own data: end-to-end samples/s (all samples over the "
        "wall time from the first to the last step, all ranks, validation and checkpoints left out). A run "
        "directory on its own has no ratio to one rank: N ranks are compared with one only within a scaling "
        "study (its own section). The right panel is the share of time ranks waited for data. A run whose training "
        "loss was not finite diverged: it stopped there, and the table says at which step.",
    )
    bars = [TrainBar(run.label, [run.row.end_to_end_samples_per_s], [run.row.data_wait_fraction],
                     [run.row.data_wait_fraction_worst_rank]) for run in runs]
    if bars:
        section.figures.append(figure_block("fig-training", "End-to-end samples/s and data wait per run",
                                            training_figure(bars), list(runs)))
    with_curves = [run for run in runs if run.train_curve or run.val_curve]
    if with_curves:
        section.figures.append(figure_block("fig-training-curves", "Training loss and every validation metric per run, "
                                            "against step", curves_figure(with_curves), with_curves))
    if runs:
        section.tables.append(Table(
            "table-training", "Every run directory",
            [("run", False), ("ranks", True), ("batch/device", True), ("global batch", True), ("data", False),
             ("end-to-end samples/s", True), ("steady samples/s", True), ("data wait", True), ("worst rank", True),
             ("IO efficiency vs bench", True), ("validation", False), ("diverged", False), ("summary", False)],
            [[text(run.label), number(run.row.world_size, "{:d}"), number(run.row.batch_size_per_device, "{:d}"),
              number(run.row.global_batch, "{:d}"), text("synthetic" if run.row.synthetic_data else "real"),
              readable(run.row.end_to_end_samples_per_s), readable(run.row.steady_samples_per_s),
              percent(run.row.data_wait_fraction), percent(run.row.data_wait_fraction_worst_rank),
              number(run.row.io_efficiency, "{:.3f}"),
              text(", ".join(f"{k} {v:.4g}" for k, v in (run.row.validation or {}).items())),
              text(_diverged_text(run.row)), text(run.source)]
             for run in runs],
            provenance(runs)))
    return section


def _diverged_text(summary: RunSummary) -> str:
    """`at step 3 (loss not finite)` for a run that diverged, else `no`."""
    return f"at step {summary.diverged_at_step} (loss not finite)" if summary.diverged else "no"


def quality_section(runs: Sequence[TrainRun]) -> Section | None:
    """Time to each run's --until goal, its gradient noise scale against samples, and a batch
    schedule's global batch against samples."""
    with_goal = [run for run in runs if run.row.time_to_target is not None]
    with_noise = [run for run in runs if run.noise_curve]
    with_schedule = [run for run in runs if run.row.batch_schedule is not None]
    if not with_goal and not with_noise and not with_schedule:
        return None
    section = Section(
        "time-to-quality", "Time to target and gradient noise scale",
        "Samples/s is not time to a good model: a larger batch is faster per sample but may need more samples. "
        "Each run with a goal (`--until`) records its first validation that met it: the training seconds (the clock "
        "of samples/s) and the wall seconds with validation and checkpoints, over every invocation of a resumed run, "
        "and the validation before it, which brackets the crossing. B_simple = tr(Sigma)/|G|^2 is the gradient noise "
        "scale (moving averages of the two-batch estimates): roughly the batch above which doubling the batch no "
        "longer halves the steps; 'previous-step' estimates are biased (the weights moved between the two gradients). "
        "Where |G|^2 is within 2 standard errors of 0 (near convergence, or at a batch far below B_simple) the ratio "
        "is no number: such a window is unresolved and shows only a lower bound on B_simple (an upward triangle in "
        "the figure, '> N' in the table). "
        "A run with a batch schedule (`--batch-schedule`, fixed entries or auto) draws its global batch against samples "
        "beside its loss, with B_simple on the same axes: each dot is a switch (a `batch-switch` row).",
    )
    if with_noise:
        section.figures.append(figure_block("fig-noise-scale", "Training loss and the gradient noise scale B_simple "
                                            "per network, against samples", noise_scale_figure(with_noise), with_noise))
    if with_schedule:
        section.figures.append(figure_block("fig-batch-schedule", "Global batch against samples, beside the training "
                                            "loss and B_simple", batch_schedule_figure(with_schedule), with_schedule))
        section.tables.append(Table(
            "table-batch-switches", "Every switch of a batch schedule",
            [("run", False), ("schedule", False), ("step", True), ("samples", True), ("global batch", False),
             ("per device x micro-batches", False), ("LR before → after", False), ("why", False),
             ("compilations", True)],
            [_switch_cells(run, switch) for run in with_schedule for switch in run.batch_switches],
            provenance(with_schedule)))
    if with_goal:
        section.tables.append(Table(
            "table-time-to-target", "Time to target per run",
            [("run", False), ("goal", False), ("reached", False), ("step", True), ("samples", True),
             ("training s", True), ("wall s", True), ("validation before (step: value)", False), ("best", True),
             ("resumes", True), ("B_simple (last quarter)", False), ("summary", False)],
            [_target_cells(run) for run in with_goal], provenance(with_goal)))
    return section


def _switch_cells(run: TrainRun, switch: Any) -> list[Any]:
    schedule = run.row.batch_schedule
    if switch.reason == "auto":
        reading = "unresolved (larger than any batch)" if not switch.resolved else f"B_simple {switch.b_simple:,.4g}"
        why = f"auto: {reading} x c {switch.calibration:.3g}"
    else:
        why = "the schedule"
    return [text(run.label), text(schedule.schedule if schedule else ""), number(switch.step, "{:d}"),
            number(switch.samples, "{:,d}"), text(f"{switch.from_global_batch} → {switch.to_global_batch}"),
            text(f"{switch.batch_size_per_device} x {switch.micro_batches}"),
            text(f"{switch.lr_before:.3g} → {switch.lr_after:.3g} ({switch.lr_scaling})"), text(why),
            number(switch.compilations, "{:d}")]


def _target_cells(run: TrainRun) -> list[Any]:
    goal = run.row.time_to_target
    assert goal is not None
    before = (f"{goal.previous_step}: {goal.previous_value:.4g}" if goal.previous_value is not None else "none")
    noise = run.row.noise_scale_text()
    missed = (f"no (diverged at step {run.row.diverged_at_step})" if run.row.diverged
              else f"no (within {goal.samples:,} samples)")
    return [text(run.label), text(goal.until), text("yes" if goal.reached else missed),
            number(goal.step if goal.reached else None, "{:d}"), number(goal.samples if goal.reached else None, "{:,d}"),
            number(goal.train_s if goal.reached else None, "{:.1f}"), number(goal.wall_s if goal.reached else None, "{:.1f}"),
            text(before), number(goal.best_value, "{:.4g}"), number(goal.resumes, "{:d}"), text(noise or "not measured"),
            text(run.source)]


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    runs = inputs.of(RunSummary)
    if not runs:
        return []
    quality = quality_section(runs)
    return [training_section(runs)] + ([quality] if quality is not None else [])


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    """`trainspeed plot RUN_DIR`: the loss and the noise scale against samples where the run measured
    it, else its training and validation curves."""
    if request.baseline or request.run_id:
        raise UsageError(f"{request.results} holds run directories: --baseline and --run-id are for bench rows")
    runs = inputs.of(RunSummary)
    with_noise = [run for run in runs if run.noise_curve]
    with_curves = [run for run in runs if run.train_curve or run.val_curve]
    if not with_noise and not with_curves:
        raise UsageError(f"{request.results}: its runs logged no metrics rows to plot")
    figure = noise_scale_figure(with_noise) if with_noise else curves_figure(with_curves)
    caption_machines(figure, [run.row for run in (with_noise or with_curves)])
    return save_figure(figure, request.stem)


PART = ReportPart(
    name="train",
    kinds=(RowKind(RunSummary, wrap=lambda row, source, extra: TrainRun(row, source, extra)),
           *(RowKind(row_type, parse=metrics_row) for row_type in METRICS_ROWS if row_type is not RunSummary)),
    sections=sections, counts=lambda inputs: [("run directories", len(inputs.of(RunSummary)))],
    read_directory=read_run_directory, directory_kind=(SUMMARY_FILE, "run directories"), plot=plot)
