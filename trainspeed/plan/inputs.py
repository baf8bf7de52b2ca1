"""What `trainspeed plan` reads: bench rows, run directories, a time-to-target study's rows, and a
critical-batch study's points (`trainspeed.plan.critical_batch`),
each read by its producer's reader, then checked to describe one workload, one size and one goal
(rows that do not fit together are one line, never a plan mixed from two)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from trainspeed.bench import report as bench_report
from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.plan.critical_batch import CriticalBatchPoint, split_studies
from trainspeed.report.inputs import Read
from trainspeed.report.reading import read_inputs
from trainspeed.studies import report as studies_report
from trainspeed.studies.time_to_target import report as study_report
from trainspeed.studies.time_to_target.rows import (
    TimeToTargetBatchRow,
    TimeToTargetFitRow,
    TimeToTargetRunRow,
    TimeToTargetSettingsRow,
)
from trainspeed.train import report as train_report
from trainspeed.train.runs import TrainRun
from trainspeed.train.rows import RunSummary
from trainspeed.train.time_to_target import parse_goal

PARTS = (bench_report.PART, train_report.PART, study_report.PART, studies_report.PART)
"""The producers whose rows a plan reads (a study's folder holds its `studies.jsonl` record too)."""


@dataclass(frozen=True)
class Identity:
    """A workload as rows name it: its name, definition hash (where the row has one) and size."""

    name: str
    sha256: str | None
    size: str

    def same(self, other: "Identity") -> bool:
        if self.size != other.size:
            return False
        if self.sha256 and other.sha256:
            return self.sha256 == other.sha256
        return self.name == other.name

    def __str__(self) -> str:
        return f"{self.name}{'@' + self.sha256[:12] if self.sha256 else ''} size {self.size}"


@dataclass(frozen=True)
class PlanInputs:
    bench: list[Read[ResultRow]]
    runs: list[TrainRun]
    settings: TimeToTargetSettingsRow | None
    study_runs: list[TimeToTargetRunRow]
    study_batches: list[TimeToTargetBatchRow]
    fit: Read[TimeToTargetFitRow] | None
    identity: Identity
    """The workload and size planned for (the bench rows')."""
    until: str
    steps_size: str
    """The size the steps to the goal were measured at (another only with `--borrow-steps`)."""
    settings_source: str | None = None
    """Where the study's settings row was read (file:line)."""
    critical_points: tuple[CriticalBatchPoint, ...] = ()
    """The critical batch measured along the base run (a critical-batch study's rows), if given."""


def read_plan_inputs(paths: Sequence[Path], borrow_steps: bool = False) -> PlanInputs:
    """Every row of every path, with one UsageError where they do not describe one workload, size
    and goal; `borrow_steps`: the bench rows may be of another size than the steps (one size)."""
    paths, critical_studies = split_studies(paths)
    if not paths:
        raise UsageError("plan: a critical-batch study's rows alone give no steps to the goal: give its base run "
                         "(the run directory its branches started from) too")
    inputs = read_inputs(list(paths), PARTS)
    bench = [read for read in inputs.of(ResultRow) if read.row.status == "ok"]
    runs = [read for read in inputs.of(RunSummary) if isinstance(read, TrainRun)]
    setting_reads = inputs.of(TimeToTargetSettingsRow)
    settings = [read.row for read in setting_reads]
    fits = inputs.of(TimeToTargetFitRow)
    if len({row.study_id for row in settings}) > 1 or len(fits) > 1:
        raise UsageError(f"plan: the inputs hold {max(len(settings), len(fits))} time-to-target studies; give the "
                         "rows of one (one workload, size and goal)")
    setting = settings[0] if settings else None
    fit = fits[0] if fits else None
    if fit is not None and setting is not None and fit.row.study_id != setting.study_id:
        raise UsageError(f"plan: {fit.source} is the fit of study {fit.row.study_id}, and the settings are of study "
                         f"{setting.study_id}; give the rows of one study")
    if fit is not None:
        _check_predicts_steps(fit)
    if setting is not None:
        identity = Identity(setting.workload, setting.workload_sha256, setting.size)
        until = setting.until
        _check_goal(until, str(setting_reads[0].source))
    else:
        goal_runs = [read for read in runs if read.row.time_to_target is not None]
        if not goal_runs:
            raise UsageError("plan: no steps to the goal among the inputs: give a time-to-target study's rows "
                             "(`trainspeed study time-to-target`), or a run directory of `trainspeed train --until ...` "
                             "that met its goal and measured its noise scale")
        first = goal_runs[0].row
        identity = Identity(first.workload, first.workload_sha256, first.size)
        until = first.time_to_target.until  # type: ignore[union-attr]
        _check_goal(until, str(goal_runs[0].source))
    steps_size = identity.size
    bench_sizes = sorted({read.row.size for read in bench})
    if borrow_steps:
        if len(bench_sizes) != 1:
            raise UsageError(f"plan: --borrow-steps plans one size, and the bench rows are of sizes "
                             f"{', '.join(bench_sizes) or 'none'}; give the bench rows of one size")
        identity = Identity(identity.name, identity.sha256, bench_sizes[0])
    for read in bench:
        _check_fits(identity, Identity(read.row.workload, read.row.workload_sha256, read.row.size), str(read.source))
    for run in runs:
        _check_fits(Identity(identity.name, identity.sha256, steps_size) if run.row.time_to_target else identity, Identity(run.row.workload, run.row.workload_sha256, run.row.size), str(run.source))
        record = run.row.time_to_target
        if record is not None and record.until != until:
            raise UsageError(f"plan: {run.source} trained to {record.until}, the other inputs to {until}; a plan "
                             "predicts one goal: give rows of that goal only")
    for study in critical_studies:  # its size, and its definition where its rows hash it
        _check_fits(Identity(identity.name, identity.sha256, steps_size),
                    Identity(study.workload if study.workload_sha256 else identity.name, study.workload_sha256,
                             study.size or steps_size), study.source)
    study_runs = [read.row for read in inputs.of(TimeToTargetRunRow)
                  if setting is not None and read.row.study_id == setting.study_id]
    study_batches = [read.row for read in inputs.of(TimeToTargetBatchRow)
                     if setting is not None and read.row.study_id == setting.study_id]
    return PlanInputs(bench=bench, runs=runs, settings=setting, study_runs=study_runs, study_batches=study_batches,
                      fit=fit, identity=identity, until=until, steps_size=steps_size,
                      settings_source=str(setting_reads[0].source) if setting is not None else None,
                      critical_points=tuple(point for study in critical_studies for point in study.points))


def _check_goal(until: str, where: str) -> None:
    """The goal the rows name is one a run can train to (a row may say `val/accuracy>=nan`)."""
    try:
        parse_goal(until)
    except UsageError:
        raise UsageError(f"plan: {where}: the goal {until!r} is not METRIC>=VALUE or METRIC<=VALUE with a finite "
                         "VALUE (the file was edited or written by another program)") from None


def _check_predicts_steps(fit: Read[TimeToTargetFitRow]) -> None:
    """S(B) = S_min + E_min / B is above 0 at every batch only where S_min or E_min is (the row's
    schema holds each at 0 or above); a fit and every draw of a study's bootstrap have one."""
    row = fit.row
    for name, (s_min, e_min) in [("the fit", (row.s_min, row.e_min)),
                                 *((f"draw {index}", tuple(draw)) for index, draw in enumerate(row.draws))]:
        if s_min + e_min <= 0:
            raise UsageError(f"plan: {fit.source}: {name} has S_min and E_min both 0, which predicts no steps to "
                             "the goal (the file was edited or written by another program)")


def _check_fits(expected: Identity, found: Identity, where: str) -> None:
    if not expected.same(found):
        raise UsageError(f"plan: {where} is of workload {found}, the plan's steps of {expected}; give rows of "
                         "one workload and size (another definition of a workload is another workload; --borrow-steps "
                         "plans another size with these steps, as an assumption)")


def bench_row(inputs: PlanInputs, target: str, batch: int) -> Read[ResultRow] | None:
    """The newest ok bench row of the target at that per-device batch."""
    rows = [read for read in inputs.bench if read.row.target == target and read.row.batch_size == batch
            and read.row.samples_per_s]
    return max(rows, key=lambda read: read.row.timestamp) if rows else None
