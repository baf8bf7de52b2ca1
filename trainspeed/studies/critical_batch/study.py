"""The critical batch along one run, measured by branching it: the critical-batch study.

Merrill et al. (2025, "Critical Batch Size Revisited") measure the critical batch directly: from
checkpoints of one base run they train short continuations at larger batches, the learning rate
scaled by the optimizer's rule, and call a batch critical while its loss still matches the base
run's. This study does that for any run of `trainspeed train` that kept its checkpoints
(`--checkpoint-every K --keep-checkpoints 0`):

1. at each point of --at (a fraction of the base run's samples, or a step), the checkpoint at or
   just before it;
2. from it, for each factor f (1 always) and seed, a branch (`trainspeed train --init-from`,
   trained in one of up to --parallel-runs warm processes, `trainspeed.studies.warm_runs`): its
   networks and Adam moments, then `--branch-samples` samples at global batch B x f, at a constant
   learning rate, the base run's at that step times the base run's LR scaling rule's factor for f
   (sqrt(f) for sqrt, f for linear, 1 for none), without a new warm-up (the optimizer's moments
   carry on); every factor trains the same samples;
3. one validation at the branch's end: --metric, else the base run's --until metric where it had
   a goal, else the validation loss;
4. the critical batch at the point: the largest B x f whose mean metric is no worse than the
   factor-1 branches' by more than a tolerance from the factor-1 seeds' spread (`decision.py`,
   stated in every row), and the base run's B_simple there beside it.

Rows go to OUT/critical_batch.jsonl under one study id, with the samples the branches spent, as a
fraction of the base run's samples and, given a `study time-to-target` of the same workload with
--compare-study, of what that study spent. A rerun with the same settings continues each branch (`train --resume`): a
finished one is not trained again.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trainspeed.errors import UsageError
from trainspeed.rows import Provenance, append_row
from trainspeed.studies.common import COMMAND_START_S, Progress, StudyFailed, no_progress, shown
from trainspeed.studies.critical_batch.config import (
    DEFAULT_BRANCH_STEPS,
    PRESETS,
    BranchPoint,
    CriticalBatchConfig,
    metric_and_op,
)
from trainspeed.studies.critical_batch.decision import (
    LOWER_IS_BETTER,
    Spread,
    factors_wanted,
    judge,
    lr_rule_factor,
    worse_by,
)
from trainspeed.studies.critical_batch.rows import (
    ROWS_FILE,
    CriticalBatchBranchRow,
    CriticalBatchRow,
    CriticalBatchSettingsRow,
)
from trainspeed.studies.face import preset_settings
from trainspeed.studies.warm_runs.runner import WARM_RUN_START_S, TrainJob, WarmRunner
from trainspeed.train.config import LaunchConfig, LRConfig, TrainConfig
from trainspeed.train.flags import train_command
from trainspeed.train.rows import CONFIG_FILE
from trainspeed.train.runs import TrainRun, has_summary, is_run_directory, read_run, read_run_summary
from trainspeed.user_files import FileRefused, read_regular

STUDY_NAME = "critical-batch study"
ESTIMATED_SAMPLES_PER_S = 1500.0
"""The estimate's training speed (tiny Mahjong on one core)."""
ROW_KINDS = tuple(row.KIND for row in (CriticalBatchSettingsRow, CriticalBatchBranchRow, CriticalBatchRow))
KEEP_CHECKPOINTS = "--checkpoint-every K --keep-checkpoints 0"


def _refused(message: str) -> UsageError:
    return UsageError(f"{STUDY_NAME}: {message}")


# --- the base run and its points -------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One branch point: where --at asked, the checkpoint the branches start from, the base run's
    learning rate there."""

    at: str
    step: int
    samples: int
    checkpoint: Path
    lr: float


@dataclass(frozen=True)
class Base:
    """The base run as the study reads it: its settings, its rows, and what the branches inherit."""

    directory: Path
    config: TrainConfig
    run: TrainRun

    @property
    def global_batch(self) -> int:
        return self.config.global_batch

    @property
    def steps(self) -> int:
        return self.run.summary.last_step

    @property
    def samples(self) -> int:
        return self.steps * self.global_batch


def read_base(config: CriticalBatchConfig) -> Base:
    """The run --from names: a run directory of `trainspeed train` with a summary; its settings
    read as data (a workload module of the user's own that only they name is refused unless
    --workload names it too); not synthetic data, which has no validation."""
    from trainspeed.workloads import is_users_module

    directory = Path(config.base_run)
    if not directory.is_dir() or not is_run_directory(directory):
        raise _refused(f"--from {directory} is not a run directory of `trainspeed train` (it has no {CONFIG_FILE}); "
                       f"name a run that kept its checkpoints ({KEEP_CHECKPOINTS})")
    path = directory / CONFIG_FILE
    try:
        settings = TrainConfig.from_json(read_regular(path, str(path)).decode("utf-8", "replace"), str(path))
        run = read_run(directory)
    except FileRefused as error:
        raise _refused(f"--from {directory}: {path} {error.reason}") from None
    except UsageError as error:
        raise _refused(f"--from {directory}: {error}") from None
    if config.workload is not None and config.workload != settings.workload:
        raise _refused(f"--from {directory} is a run of workload {settings.workload!r}, not --workload "
                       f"{config.workload}; name a run of that workload, or leave --workload out")
    if config.workload is None and is_users_module(settings.workload):
        raise _refused(f"--from {directory} trained {settings.workload}, a module its settings name; a run "
                       f"directory is data and never chooses code to run: give --workload {settings.workload} "
                       "if it is yours to run")
    if settings.synthetic_data:
        raise _refused(f"--from {directory} trained on synthetic data, which has no validation to compare branches "
                       "by; give a run on a dataset")
    return Base(directory=directory, config=settings, run=run)


def checkpoint_step(base: Base, point: BranchPoint) -> int:
    """The step of the base run's checkpoint at or just before `point`; UsageError where the point
    lies past the run or no checkpoint lies at or before it."""
    from trainspeed.train.init_from import checkpoint_steps, steps_text

    if point.step is not None:
        if point.step > base.steps:
            raise _refused(f"--at {point.text()} lies past the base run's last step {base.steps}")
        wanted = point.step
    else:
        assert point.fraction is not None
        wanted = math.floor(point.fraction * base.steps + 1e-9)
    kept = checkpoint_steps(base.directory)
    before = [step for step in kept if 1 <= step <= wanted]
    if not before:
        raise _refused(f"--at {point.text()}: {base.directory} holds no checkpoint at or before step {wanted} (its "
                       f"checkpoints: steps {steps_text(kept)}); the base run keeps them with {KEEP_CHECKPOINTS}")
    return before[-1]


def learning_rate_at(payload: dict[str, Any], step: int, where: Path) -> float:
    """The base run's learning rate at a checkpoint: the one its optimizers would take the next
    step with (their param groups, which the schedule set). One rate for every group of every
    optimizer, since a branch's --lr sets them all."""
    rates = {float(group["lr"]) for optimizer in payload["trainable"]["optimizers"].values()
             for group in optimizer["param_groups"]}
    if len(rates) != 1:
        raise _refused(f"--from: {where} holds {len(rates)} learning rates ({', '.join(f'{lr:.4g}' for lr in sorted(rates))}) "
                       f"at step {step}; every branch trains at one --lr, so the study takes runs of one learning rate")
    (rate,) = rates
    if not rate > 0:
        raise _refused(f"--from: the base run's learning rate at step {step} is {rate:g}: its branches would not "
                       "learn; branch at an earlier point")
    return rate


def read_points(config: CriticalBatchConfig, base: Base, size: str) -> list[Point]:
    """Every point's checkpoint, checked as `train --init-from` checks one, and the LR there."""
    from trainspeed.train.checkpoint import checkpoint_dir, checkpoint_name
    from trainspeed.train.init_from import check_start

    points: list[Point] = []
    taken: dict[int, str] = {}
    for point in config.points:
        step = checkpoint_step(base, point)
        if step in taken:
            raise _refused(f"--at {taken[step]} and {point.text()} both branch from the checkpoint of step {step}; "
                           "give points further apart")
        taken[step] = point.text()
        path = checkpoint_dir(base.directory) / checkpoint_name(step)
        _, payload = check_start(path, base.config.workload, size, what=f"{STUDY_NAME}: --from")
        points.append(Point(at=point.text(), step=step, samples=step * base.global_batch, checkpoint=path,
                            lr=learning_rate_at(payload, step, path)))
    return points


# --- the plan of every branch ----------------------------------------------------------------------

@dataclass(frozen=True)
class Branch:
    point: Point
    factor: float
    seed: int

    @property
    def name(self) -> str:
        return f"step{self.point.step}-f{self.factor:g}-s{self.seed}"


@dataclass(frozen=True)
class StudyPlan:
    """Everything the branches share, resolved and checked: the settings (the base run's defaults
    filled in), the base run, the metric, the LR rule and the points."""

    config: CriticalBatchConfig
    base: Base
    size: str
    metric: str
    op: str
    lr_rule: str
    points: list[Point]
    identity: dict[str, str | None]
    time_to_target_samples: int | None
    """What the time-to-target study of --compare-study spent (None: none given)."""

    @property
    def branch_samples(self) -> int:
        assert self.config.branch_samples is not None
        return self.config.branch_samples

    def batch(self, factor: float) -> int:
        return round(self.base.global_batch * factor)

    def lr(self, point: Point, factor: float) -> float:
        return float(f"{point.lr * lr_rule_factor(self.lr_rule, factor):.6g}")

    @property
    def branches(self) -> list[Branch]:
        return [Branch(point, factor, seed) for point in self.points for factor in self.config.all_factors
                for seed in self.config.seeds_of(factor)]

    def run_dir(self, branch: Branch) -> Path:
        return self.config.runs / branch.name

    def train_config(self, branch: Branch) -> TrainConfig:
        """One branch's `trainspeed train`: from the point's checkpoint, at batch B x f and its seed,
        for the study's samples, at a constant LR; one validation at its end; continued where an
        earlier study left it (`--resume`)."""
        config = self.config
        batch = self.batch(branch.factor)
        nproc = config.nproc or 1
        steps = self.branch_samples // batch
        return TrainConfig(
            workload=self.base.config.workload, size=self.size, data=config.data, target=config.target or "",
            threads=config.threads, num_workers=config.num_workers if config.num_workers is not None else 1,
            launch=LaunchConfig(nproc=nproc), batch_size_per_device=batch // nproc, steps=steps, seed=branch.seed,
            lr=LRConfig(base_lr=self.lr(branch.point, branch.factor), scaling="none", warmup_steps=0, min_lr_ratio=1.0),
            eval_batches=None if config.val_samples is None else config.val_samples // batch, noise_scale="off",
            log_every=steps, progress=False, resume=True, init_from=str(self.base.directory),
            init_step=branch.point.step, out_dir=str(self.run_dir(branch)))


def _metric(config: CriticalBatchConfig, base: Base) -> tuple[str, str]:
    """The metric the branches are judged by and its direction: --metric's, else the base run's
    goal's, else the validation loss."""
    from trainspeed.train.time_to_target import parse_goal

    if config.metric is not None:
        return metric_and_op(config.metric)
    if base.config.until is None:
        return "loss", LOWER_IS_BETTER
    goal = parse_goal(base.config.until)
    return goal.metric, goal.op


def resolve_plan(config: CriticalBatchConfig) -> StudyPlan:
    """The plan of the study, every setting checked as `trainspeed train` checks it, before anything
    is written: the base run, its points' checkpoints, the factors, budgets and the branch folders."""
    from trainspeed.train.evaluation import metric_names
    from trainspeed.train.launch_plan import resolve_launch
    from trainspeed.train.validation_split import check_validation_split
    from trainspeed.workloads import get_workload, resolve_size
    from trainspeed.workloads.identity import identify

    base = read_base(config)
    metric, op = _metric(config, base)
    try:
        workload = get_workload(base.config.workload)
        size = resolve_size(workload, base.config.size)
        names = metric_names(workload.build(size, seed=0), workload, size)
    except UsageError as error:
        raise _refused(str(error)) from None
    if metric not in names:
        raise _refused(f"the base run's workload has no validation metric {metric!r} to judge the branches by (its "
                       f"metrics: {', '.join(names) or 'none'}); give --metric NAME<= or NAME>=")
    _check_settings(config, base)
    points = read_points(config, base, size)
    compared = (time_to_target_samples(config.compare_study, base.config.workload, size)
                if config.compare_study is not None else None)
    plan = StudyPlan(config=config, base=base, size=size, metric=metric, op=op, lr_rule=base.config.lr.scaling or "none",
                     points=points, identity=identify(workload).row_fields(), time_to_target_samples=compared)
    largest = Branch(points[0], max(config.all_factors), 0)
    try:
        resolved = resolve_launch(plan.train_config(largest)).config
        check_validation_split(resolved, workload, f"each branch is judged by its validation {metric}")
    except UsageError as error:
        raise _refused(str(error)) from None
    _check_runs_dir(plan)
    return plan


def _check_settings(config: CriticalBatchConfig, base: Base) -> None:
    """The factors make whole batches that split over the ranks; the samples are a whole number of
    steps at every batch; the seeds can give a tolerance."""
    nproc = config.nproc or 1
    for factor in config.all_factors:
        batch = base.global_batch * factor
        if abs(batch - round(batch)) > 1e-9 or round(batch) < 1:
            raise _refused(f"--factors {factor:g}: {factor:g} x the base run's global batch {base.global_batch} is "
                           f"{batch:g}, not a whole batch")
        if round(batch) % nproc:
            raise _refused(f"--factors {factor:g}: batch {round(batch)} does not split over --nproc {nproc} ranks")
        for flag, samples in (("--branch-samples", config.branch_samples), ("--val-samples", config.val_samples)):
            if samples is not None and samples % round(batch):
                raise _refused(f"{flag} {samples} must be a multiple of every branch batch (batch {round(batch)} "
                               f"at factor {factor:g}), so every factor trains and validates on as many samples")
    if config.tolerance is None and config.seeds < 2:
        raise _refused("--seeds 1 gives the factor-1 branches no spread to take the tolerance from; give 2 or more "
                       "seeds, or a --tolerance")
    if config.factor_seeds is not None and config.factor_seeds > config.seeds:
        raise _refused(f"--factor-seeds {config.factor_seeds} exceeds --seeds {config.seeds}: the factor-1 branches, "
                       "the reference of every comparison, take at least as many seeds; give --factor-seeds "
                       f"{config.seeds} or fewer")
    from trainspeed.workloads import data_missing_for

    missing = data_missing_for(base.config.workload, base.config.size, config.data)
    if missing is not None:
        raise _refused(f"the branches train on {config.data}, which is not here ({missing}); run the study from the "
                       "folder the base run ran in, or give --data")


def _check_runs_dir(plan: StudyPlan) -> None:
    """The branches' folder is a folder, and each branch folder already there holds that very branch
    (the study continues it), never a run of other settings or anyone's files."""
    from trainspeed.train.launch_plan import resolve_workload_settings
    from trainspeed.workloads import get_workload

    runs = plan.config.runs
    if runs.exists() and not runs.is_dir():
        raise _refused(f"--runs-dir {runs} is a file; name a folder for the branches")
    workload = get_workload(plan.base.config.workload)
    for branch in plan.branches:
        folder = plan.run_dir(branch)
        if not folder.exists() or (folder.is_dir() and not any(folder.iterdir())):
            continue
        expected = resolve_workload_settings(plan.train_config(branch), workload)
        try:
            found = TrainConfig.from_json(read_regular(folder / CONFIG_FILE).decode("utf-8", "replace"))
        except (FileRefused, UsageError, OSError):
            found = None
        if found != expected:
            raise _refused(f"{folder} holds something other than this study's branch {branch.name} (another "
                           "study's settings, or other files); give another --out or --runs-dir")


# --- running the branches --------------------------------------------------------------------------

def is_done(plan: StudyPlan, branch: Branch) -> bool:
    """Whether an earlier study finished this branch (its folder holds this very branch: `resolve_plan`
    checked its settings) and validated it at its end."""
    folder = plan.run_dir(branch)
    if not has_summary(folder):
        return False
    summary = read_run_summary(folder)
    return (summary.last_step == plan.train_config(branch).steps and not summary.stopped_by_signal
            and plan.metric in (summary.validation or {}))


class FactorLadder:
    """Which branches the study trains, point by point: every factor's branches up to the first
    factor above 1 that does not match (`decision.factors_wanted`), released as the branches below
    them finish. Branches an earlier study finished count as finished from the start."""

    def __init__(self, plan: StudyPlan, value_of: Callable[[Branch], float] | None = None) -> None:
        self.plan = plan
        self.value_of = value_of or self._value
        """A finished branch's metric: by default its run's validation at its end (NaN: none)."""
        self.values: dict[Branch, float] = {}
        self.released: set[Branch] = set()
        self._lock = threading.Lock()
        self._by_name = {branch.name: branch for branch in plan.branches}

    def finished(self, branch: Branch) -> list[Branch]:
        """`branch` trained (or was found done): the branches its point now wants that were not
        released yet."""
        with self._lock:
            self.values[branch] = self.value_of(branch)
            return self._release(branch.point)

    def finished_job(self, job: TrainJob) -> list[TrainJob]:
        return [TrainJob(branch.name, self.plan.train_config(branch))
                for branch in self.finished(self._by_name[job.name])]

    def _value(self, branch: Branch) -> float:
        validation = read_run_summary(self.plan.run_dir(branch)).validation or {}
        return validation.get(self.plan.metric, math.nan)

    def _release(self, point: Point) -> list[Branch]:
        config = self.plan.config
        done = {factor: Spread(tuple(self.values[Branch(point, factor, seed)] for seed in config.seeds_of(factor)))
                for factor in config.all_factors
                if all(Branch(point, factor, seed) in self.values for seed in config.seeds_of(factor))}
        wanted = factors_wanted(config.all_factors, done, self.plan.op, config.tolerance)
        new = [Branch(point, factor, seed) for factor in wanted for seed in config.seeds_of(factor)
               if Branch(point, factor, seed) not in self.released]
        self.released.update(new)
        return new

    def start(self) -> list[Branch]:
        """The branches wanted before any is trained, past those an earlier study finished."""
        to_train: list[Branch] = []
        for point in self.plan.points:
            with self._lock:
                queue = self._release(point)
            while queue:
                branch = queue.pop(0)
                if is_done(self.plan, branch):
                    queue.extend(self.finished(branch))
                else:
                    to_train.append(branch)
        return to_train


def train_branches(plan: StudyPlan, progress: Progress) -> tuple[list[Branch], int]:
    """The branches the study needs (`FactorLadder`), each an earlier study did not finish continued
    (`--resume`) where it left it, on up to --parallel-runs warm processes
    (`trainspeed.studies.warm_runs`); returns the branches trained or found done, in the plan's order, and the processes started."""
    ladder = FactorLadder(plan)
    to_train = ladder.start()
    progress(len(ladder.values), "critical batch: branches finished earlier")

    def released(job: TrainJob) -> list[TrainJob]:
        progress(1, f"critical batch: {job.name}")
        return ladder.finished_job(job)

    runner = WarmRunner(plan.config.parallel_runs)
    runner.run([TrainJob(branch.name, plan.train_config(branch)) for branch in to_train], released)
    trained = [branch for branch in plan.branches if branch in ladder.values]
    progress(len(plan.branches) - len(trained), "critical batch: factors past one that did not match, not trained")
    return trained, runner.processes


def branch_row(study_id: str, plan: StudyPlan, branch: Branch) -> CriticalBatchBranchRow:
    summary = read_run_summary(plan.run_dir(branch))
    validation = summary.validation or {}
    if plan.metric not in validation:
        raise StudyFailed(f"branch {plan.run_dir(branch)} recorded no validation {plan.metric!r} at its end; see its "
                          "logs, remove it and run the study again")
    config = plan.train_config(branch)
    return CriticalBatchBranchRow(
        study_id=study_id, run=branch.name, run_dir=str(plan.run_dir(branch)), step=branch.point.step,
        samples_at_step=branch.point.samples, factor=branch.factor, global_batch=config.global_batch,
        target=summary.target, nproc=summary.world_size, seed=branch.seed, lr=plan.lr(branch.point, branch.factor),
        lr_rule=plan.lr_rule, steps=summary.last_step, samples=summary.last_step * summary.global_batch,
        metric=plan.metric, value=validation[plan.metric], wall_s=summary.wall_s,
        **summary.provenance(shown(*train_command(config))).fields_of(CriticalBatchBranchRow))


def noise_scale_at(base: Base, step: int) -> tuple[float | None, int | None, str]:
    """The base run's B_simple at `step`: the moving average of the last window logged at or
    before it, when its |G|^2 estimate was positive; otherwise None and why."""
    record = base.run.noise_scale_at(step)
    if record is None:
        return None, None, f"not measured by step {step} (no noise-scale row at or before it)"
    if record.b_simple_avg is None:
        return None, record.step, (f"unresolved at step {record.step}: the |G|^2 estimate was not positive, so "
                                   "B_simple lies beyond what the window measured")
    return record.b_simple_avg, record.step, f"window ending at step {record.step} ({record.method})"


def b_simple_curve(base: Base) -> list[list[float]]:
    """The base run's resolved B_simple per window (the first network by name), as [samples, B_simple]."""
    curve = base.run.noise_curve
    if not curve:
        return []
    network = min(record.network for record in curve)
    return [[float(record.samples), record.b_simple_avg] for record in curve
            if record.network == network and record.b_simple_avg is not None]


def point_row(study_id: str, plan: StudyPlan, point: Point, rows: list[CriticalBatchBranchRow]) -> CriticalBatchRow:
    trained = {row.factor for row in rows}
    factors = tuple(factor for factor in plan.config.all_factors if factor in trained)
    spreads = {factor: Spread(tuple(row.value for row in rows if row.factor == factor)) for factor in factors}
    judged = judge(plan.base.global_batch, spreads, plan.op, plan.config.tolerance)
    reference = spreads[1.0].mean
    b_simple, b_simple_step, note = noise_scale_at(plan.base, point.step)
    tolerance = judged.tolerance
    return CriticalBatchRow(
        study_id=study_id, at=point.at, step=point.step, samples=point.samples,
        fraction=point.samples / plan.base.samples, base_global_batch=plan.base.global_batch, lr_at_step=point.lr,
        lr_rule=plan.lr_rule, metric=plan.metric, op=plan.op, factors=list(factors),
        global_batches=[plan.batch(factor) for factor in factors], lrs=[plan.lr(point, factor) for factor in factors],
        values=[list(spreads[factor].values) for factor in factors], means=[spreads[f].mean for f in factors],
        sds=[spreads[f].sd for f in factors], min_max=[list(spreads[f].min_max) for f in factors],
        worse_by=[worse_by(spreads[f].mean, reference, plan.op) for f in factors],
        matches=[tolerance is not None and worse_by(spreads[f].mean, reference, plan.op) <= tolerance.value
                 for f in factors],
        tolerance=None if tolerance is None else tolerance.value,
        tolerance_rule="none: a factor-1 branch diverged" if tolerance is None else tolerance.rule,
        critical_batch=None if judged.critical is None else judged.critical.batch,
        critical_factor=None if judged.critical is None else judged.critical.factor,
        critical_at_least=judged.critical is not None and judged.critical.at_least, critical_text=judged.text(),
        b_simple=b_simple, b_simple_step=b_simple_step, b_simple_note=note, branch_runs=len(rows),
        samples_spent=sum(row.samples for row in rows),
        factors_not_trained=[factor for factor in plan.config.all_factors if factor not in trained])


def time_to_target_samples(path: str, workload: str, size: str) -> int:
    """The samples the runs of a `study time-to-target` trained, added up: each to the validation
    that met its goal (it stopped there), or its whole budget. Its rows must be of this workload
    and size; UsageError otherwise, or where it holds no runs."""
    from trainspeed.report.reading import read_inputs
    from trainspeed.studies.time_to_target.report import PART
    from trainspeed.studies.time_to_target.rows import ROWS_FILE as TT_ROWS_FILE
    from trainspeed.studies.time_to_target.rows import TimeToTargetRunRow, TimeToTargetSettingsRow

    rows = Path(path) / TT_ROWS_FILE if Path(path).is_dir() else Path(path)
    try:
        inputs = read_inputs([rows], [PART])
    except UsageError as error:
        raise _refused(f"--compare-study: {error}") from None
    others = {(read.row.workload, read.row.size) for read in inputs.of(TimeToTargetSettingsRow)}
    if others - {(workload, size)}:
        found = ", ".join(f"{name} {of}" for name, of in sorted(others))
        raise _refused(f"--compare-study {path} holds a time-to-target study of {found}, not of {workload} {size}; give "
                       "that study's rows for the base run's workload and size")
    runs = [read.row for read in inputs.of(TimeToTargetRunRow)]
    if not runs or not others:
        raise _refused(f"--compare-study {path} holds no runs of a time-to-target study (OUT/time_to_target.jsonl of "
                       "`trainspeed study time-to-target`)")
    return sum(run.validated_step * run.global_batch if run.reached and run.validated_step is not None
               else run.max_samples for run in runs)


def run(config: CriticalBatchConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    """The whole study; returns the rows file it wrote."""
    plan = resolve_plan(config)
    study_id = f"critical-batch-{int(time.time())}"
    started = time.perf_counter()
    trained, processes = train_branches(plan, progress)
    branches = [branch_row(study_id, plan, branch) for branch in trained]
    points = [point_row(study_id, plan, point, [row for row in branches if row.step == point.step])
              for point in plan.points]
    spent = sum(row.samples for row in branches)
    compared = plan.time_to_target_samples
    summary = plan.base.run.summary
    header = CriticalBatchSettingsRow(
        study_id=study_id, settings=config, base_run=str(plan.base.directory), workload=plan.base.config.workload,
        size=plan.size, base_target=summary.target, base_nproc=summary.world_size,
        base_global_batch=plan.base.global_batch, base_steps=plan.base.steps, base_samples=plan.base.samples,
        target=config.target or summary.target, nproc=config.nproc or 1, metric=plan.metric, op=plan.op,
        lr_rule=plan.lr_rule, branch_samples=plan.branch_samples, b_simple_curve=b_simple_curve(plan.base),
        branch_runs=len(branches), samples_spent=spent, fraction_of_base_run=spent / plan.base.samples,
        time_to_target_rows=config.compare_study,
        time_to_target_samples=compared, fraction_of_time_to_target=None if not compared else spent / compared,
        total_s=time.perf_counter() - started,
        **Provenance(command=command, machine=branches[0].machine if branches else None, **plan.identity)
        .fields_of(CriticalBatchSettingsRow), branch_processes=processes)
    out = Path(config.out) / ROWS_FILE
    for row in [header, *branches, *points]:
        append_row(out, row)
    print(table(header, points))
    return [out]


def table(header: CriticalBatchSettingsRow, points: list[CriticalBatchRow]) -> str:
    """The study's findings as printed: per point, the critical batch beside B_simple; then what it spent."""
    lines = [f"| step | samples | critical batch (base batch {header.base_global_batch}) | B_simple | tolerance | "
             f"{header.metric} per factor (mean) |", "|---:|---:|---|---:|---:|---|"]
    for row in points:
        simple = "–" if row.b_simple is None else f"{row.b_simple:,.0f}"
        tolerance = "–" if row.tolerance is None else f"{row.tolerance:.4g}"
        means = ", ".join(f"x{factor:g}: {mean:.4g}{'' if ok else ' (worse)'}"
                          for factor, mean, ok in zip(row.factors, row.means, row.matches))
        lines.append(f"| {row.step} | {row.samples:,} | {row.critical_text} | {simple} | {tolerance} | {means} |")
    spent = (f"critical batch: {header.branch_runs} branches spent {header.samples_spent:,} samples, "
             f"{header.fraction_of_base_run:.1%} of the base run's {header.base_samples:,}")
    if header.time_to_target_samples:
        spent += (f", {header.fraction_of_time_to_target:.1%} of the {header.time_to_target_samples:,} the "
                  f"time-to-target study in {header.time_to_target_rows} spent")
    else:
        spent += " (no time-to-target study given: --compare-study DIR)"
    return "\n".join([*lines, spent])


# --- the study's face ------------------------------------------------------------------------------

def units(config: CriticalBatchConfig) -> int:
    return len(config.at) * sum(len(config.seeds_of(factor)) for factor in config.all_factors)


def estimate_s(config: CriticalBatchConfig) -> float:
    """Seconds on a 2-core CPU: a command's start per warm process, then per branch its start in
    that process and its samples at ESTIMATED_SAMPLES_PER_S."""
    processes = min(config.parallel_runs, units(config))
    per_branch = WARM_RUN_START_S + (config.branch_samples or 0) / ESTIMATED_SAMPLES_PER_S
    return COMMAND_START_S + units(config) * per_branch / processes


def _seeds_text(config: CriticalBatchConfig) -> str:
    if config.factor_seeds is None or config.factor_seeds == config.seeds:
        return f"{config.seeds} seeds"
    return f"{config.seeds} seeds at factor 1 and {config.factor_seeds} at the others"


def plan_lines(config: CriticalBatchConfig) -> list[str]:
    return [f"critical batch: branches of {config.base_run} at {', '.join(config.at)} x factors "
            f"{', '.join(f'{f:g}' for f in config.all_factors)} x {_seeds_text(config)}, {config.branch_samples:,} "
            f"samples each, on {config.target} x{config.nproc}"]


def preset_config(preset: str, out: Path) -> CriticalBatchConfig:
    raise UsageError(f"{STUDY_NAME}: give --from RUN_DIR, the run whose checkpoints the branches start from")


def config_from_args(args: argparse.Namespace, out: Path) -> CriticalBatchConfig:
    """The settings given over the preset's, the base run's filling in what the flags leave out
    (workload, data, target, ranks, threads, loader workers, the branches' samples), checked
    through and through before anything is written (`resolve_plan`)."""
    settings = preset_settings(CriticalBatchConfig, PRESETS, args)
    if settings.get("base_run") is None:
        raise _refused("give --from RUN_DIR: the run whose checkpoints the branches start from (a run keeps them "
                       f"with {KEEP_CHECKPOINTS})")
    given = CriticalBatchConfig(out=str(out), **settings)
    if given.factor_seeds is None:
        given = dataclasses.replace(given, factor_seeds=given.default_factor_seeds)
    base = read_base(given)
    launch = base.config.launch
    config = dataclasses.replace(
        given, workload=base.config.workload, data=given.data or base.config.data,
        target=given.target or base.config.target, nproc=given.nproc or launch.nproc,
        threads=given.threads or base.config.threads or 1,
        num_workers=given.num_workers if given.num_workers is not None else base.config.num_workers,
        branch_samples=given.branch_samples or DEFAULT_BRANCH_STEPS * round(base.config.global_batch
                                                                               * max(given.all_factors)))
    resolve_plan(config)
    return config


def rows_files(config: CriticalBatchConfig) -> dict[Path, tuple[str, ...]]:
    """The file of rows the study appends to, and the kinds of row it holds."""
    return {Path(config.out) / ROWS_FILE: ROW_KINDS}
