"""Steps and samples to a quality goal against the global batch, the learning rate tuned per batch.

Shallue et al. (2019) measured, for 35 workloads, the steps to a validation goal at each batch with
the learning rate tuned per batch: a region of perfect scaling (twice the batch, half the steps),
then diminishing returns, then a batch past which steps no longer fall. This study measures that
curve for any workload with validation metrics:

1. at every global batch, seed 0 trains at several multiples of the square-root-scaled learning
   rate, each run to the goal or its budget (`trainspeed train --until ... --stop-at-target`, the
   LR constant after warm-up so the steps do not depend on the budget); while the best factor lies
   at an edge of those tried, the sweep goes on past that edge;
2. the other seeds train at each batch's best factor;
3. the steps to the goal (interpolated between the validations that bracket the crossing) are
   fitted with S(B) = S_min (1 + B_crit / B), with bootstrap intervals over seeds
   (`trainspeed.stats`), and the noise scale B_simple each run measured near the goal is set
   beside B_crit.

A run that does not meet the goal says "not reached within N samples", and its batch is left out
of the fit with that reason; a run whose loss was not finite diverged, stopped there, and is not
reached either (an LR sweep's largest factors may diverge: the sweep goes on without them). Rows
go to OUT/time_to_target.jsonl under one study id; a rerun with the same settings skips the runs
already made, the diverged ones too.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from trainspeed.atomic import create_exclusive_text, move_to_new
from trainspeed.errors import UsageError
from trainspeed.gradients.rows import UNRESOLVED_REASON, NoiseScaleReading, bound_text, median_reading
from trainspeed.rows import Provenance, append_row
from trainspeed.stats import bootstrap_fit
from trainspeed.studies.common import (
    COMMAND_START_S,
    Progress,
    RunSpec,
    StudyFailed,
    no_progress,
    run_trainspeed,
    shown,
)
from trainspeed.studies.face import preset_settings
from trainspeed.studies.time_to_target.config import DEFAULT_WORKLOAD, LR_EDGE_FACTOR, PRESETS, TimeToTargetConfig
from trainspeed.studies.time_to_target.rows import (
    ROWS_FILE,
    TimeToTargetBatchRow,
    TimeToTargetFitRow,
    TimeToTargetRunRow,
    TimeToTargetSettingsRow,
    seeds_min_max,
)
from trainspeed.train.config import TrainConfig
from trainspeed.train.flags import config_of_command, train_command
from trainspeed.train.goal_runs import GoalRecipe
from trainspeed.train.runs import has_summary, read_run, read_run_summary
from trainspeed.train.time_to_target import QualityGoal, parse_goal
from trainspeed.user_files import FileRefused, read_regular
from trainspeed.user_json import loads

ESTIMATED_SAMPLES_PER_S = 1500.0
"""The estimate's training speed (tiny Mahjong on one core); the runs stop at the goal, mostly sooner."""
KEPT_DRAWS = 400
"""Bootstrap draws a fit row keeps, for the plan's intervals on predicted steps at other batches."""


@dataclass(frozen=True)
class StudyRecipe:
    """What every run shares beyond the settings: the goal and the learning rate factors multiply."""

    config: TimeToTargetConfig
    size: str
    goal: QualityGoal
    base_lr: float
    base_lr_from: str
    reference_batch: int
    identity: dict[str, str | None]

    @property
    def runs(self) -> GoalRecipe:
        """How each run trains: the settings' recipe at the size, base LR and reference batch resolved."""
        return GoalRecipe.from_settings(self.config, self.size, self.base_lr, self.reference_batch)

    def peak_lr(self, batch: int, factor: float) -> float:
        return self.runs.peak_lr(batch, factor)


def run_config(recipe: StudyRecipe, spec: RunSpec) -> TrainConfig:
    """The TrainConfig of one run to the goal, in its run directory."""
    return recipe.runs.run_config(spec.batch, spec.lr_factor, spec.seed, run_dir(recipe.config, spec))


def run_dir(config: TimeToTargetConfig, spec: RunSpec) -> Path:
    return config.runs / spec.name


RECORD_SUFFIX = ".command.json"
"""The study's record of a run it made (the command's seconds and arguments), beside the run's folder."""

RECORD_NAME = re.compile(r"b(\d+)-lr([0-9.e+-]+)-s(\d+)" + re.escape(RECORD_SUFFIX))
"""The name of a run's record (`RunSpec.name`, the suffix): batch, LR factor (as `:g` writes it), seed."""

ROW_KINDS = tuple(row.KIND for row in (TimeToTargetSettingsRow, TimeToTargetRunRow, TimeToTargetBatchRow,
                                       TimeToTargetFitRow))


def _seconds_file(config: TimeToTargetConfig, spec: RunSpec) -> Path:
    return config.runs / f"{spec.name}{RECORD_SUFFIX}"


def is_done(recipe: StudyRecipe, spec: RunSpec) -> bool:
    """Whether an earlier study made this run, with this very config, to its goal, its budget or
    the step where it diverged (trained again, it would diverge again: its seed fixes its steps).
    A run whose summary cannot be read (damaged, or written by a trainspeed whose rows this one
    refuses) is not: it is set aside and trained again."""
    config = recipe.config
    if not has_summary(run_dir(config, spec)) or recorded_config(config, spec) != run_config(recipe, spec):
        return False
    try:
        found = read_run_summary(run_dir(config, spec))
    except UsageError as error:
        print(f"time-to-target: {run_dir(config, spec)} cannot be reused ({error}); training it again", flush=True)
        return False
    return found.time_to_target is not None and (found.time_to_target.reached or found.diverged
                                                 or found.last_step == config.steps(spec.batch))


def train(recipe: StudyRecipe, spec: RunSpec, progress: Progress) -> None:
    """One run to the goal unless an earlier study made it with the same arguments (another one,
    or an interrupted one, is set aside with its record and trained again). Its record is created
    new, never written over a file that appeared meanwhile."""
    config = recipe.config
    if not is_done(recipe, spec):
        set_aside(config, spec)
        args = train_command(run_config(recipe, spec))
        print(shown(*args), flush=True)
        started = time.perf_counter()
        run_trainspeed(*args)
        record = _seconds_file(config, spec)
        create_exclusive_text(record, json.dumps({"command_s": time.perf_counter() - started, "args": args}) + "\n",
                              f"time-to-target study: {record}")
    progress(1, f"time-to-target: trained {spec.name}")


def set_aside(config: TimeToTargetConfig, spec: RunSpec) -> None:
    """A run this study cannot reuse (unfinished, or of other arguments) is kept, its folder and
    its record renamed together (`NAME.set-aside-N`, `NAME.set-aside-N.command.json`), never
    deleted, trained on or written over: its time would not be the run's, and an earlier study's
    record of it stays beside it."""
    out, record = run_dir(config, spec), _seconds_file(config, spec)
    if not (out.exists() or out.is_symlink() or record.exists() or record.is_symlink()):
        return
    for number in range(1, 1000):
        kept = config.runs / f"{spec.name}.set-aside-{number}"
        kept_record = kept.with_name(kept.name + RECORD_SUFFIX)
        if kept.exists() or kept.is_symlink() or kept_record.exists() or kept_record.is_symlink():
            continue
        if (record.exists() or record.is_symlink()) and not move_to_new(record, kept_record):
            continue  # taken meanwhile
        if out.exists() or out.is_symlink():
            out.rename(kept)
        return
    raise StudyFailed(f"{out}: too many copies set aside beside it; remove them")


def record_problem(path: Path) -> str | None:
    """Why the file at `path` is no record this study wrote (None when it is one): a JSON object
    with the command's arguments and seconds, in a regular file."""
    try:
        recorded = loads(read_regular(path, str(path)))
    except FileRefused as refused:
        return refused.reason
    except ValueError:  # not UTF-8, or JSON the one policy refuses (`trainspeed.user_json`)
        return "is not JSON"
    if not isinstance(recorded, dict) or not isinstance(recorded.get("args"), list) or "command_s" not in recorded:
        return "is not a record of a run's command and seconds"
    return None


def check_records(config: TimeToTargetConfig) -> None:
    """Before anything trains: the runs folder is a folder, and every file in it named like the
    record of a run this study may make (its batches and seeds, any LR factor) is a record a study
    wrote, which it reuses (same arguments) or sets aside with its run (other ones). A file of
    anyone else's there is refused in one line: the study never renames or writes over it."""
    if config.runs.exists() and not config.runs.is_dir():
        raise UsageError(f"time-to-target study: --runs-dir {config.runs} is a file; name a folder for the runs")
    if not config.runs.is_dir():
        return
    for path in sorted(config.runs.iterdir()):
        name = RECORD_NAME.fullmatch(path.name)
        if name is None or int(name[1]) not in config.global_batches or int(name[3]) not in config.seed_list:
            continue
        problem = record_problem(path)
        if problem is not None:
            raise UsageError(f"time-to-target study: {path} is named like the record of one of its runs but "
                             f"{problem}; it is never written over: move it away or give another --runs-dir")


def _recorded(config: TimeToTargetConfig, spec: RunSpec) -> dict:
    """What the study recorded of a run it made: the command's seconds and arguments ({} where none)."""
    path = _seconds_file(config, spec)
    try:
        recorded = loads(read_regular(path, str(path)))
    except (FileRefused, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def recorded_config(config: TimeToTargetConfig, spec: RunSpec) -> TrainConfig | None:
    """The TrainConfig of the command the study recorded for a run (None: no record, or one train
    would refuse); compared as configs, so a record of the same run in flags of another order or
    with defaults spelt out is the same run."""
    args = _recorded(config, spec).get("args")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return None
    try:
        return config_of_command(args)
    except UsageError:
        return None


def _command_s(config: TimeToTargetConfig, spec: RunSpec) -> float:
    value = _recorded(config, spec).get("command_s")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
        raise StudyFailed(f"{_seconds_file(config, spec)}: no command_s in seconds; remove it and its run to train "
                          "the run again")
    return float(value)


def run_row(study_id: str, recipe: StudyRecipe, spec: RunSpec, purpose: str) -> TimeToTargetRunRow:
    config = recipe.config
    run = read_run(run_dir(config, spec))
    summary, record = run.summary, run.time_to_target
    if record is None:
        raise StudyFailed(f"run {run_dir(config, spec)} recorded no time to target; train it again")
    validations = len(run.validations(until_step=record.step))
    near = run.noise_scale_at(record.step)
    reading = near.reading if near is not None else None
    samples = steps = None
    if record.reached and record.value is not None:
        samples = record.crossing_samples(recipe.goal.threshold)
        steps = samples / spec.batch
        outcome = f"reached at {samples:,.0f} samples ({steps:,.1f} steps)"
    elif summary.diverged:
        outcome = f"not reached: diverged at step {summary.diverged_at_step} (the training loss was not finite)"
    else:
        best = "no validation" if record.best_value is None else f"best {record.best_value:.4g}"
        outcome = f"not reached within {record.samples:,} samples ({best})"
    return TimeToTargetRunRow(
        study_id=study_id, run=spec.name, run_dir=str(run_dir(config, spec)), purpose=purpose,
        target=summary.target, nproc=summary.world_size, global_batch=spec.batch, lr_factor=spec.lr_factor,
        peak_lr=recipe.peak_lr(spec.batch, spec.lr_factor), seed=spec.seed, max_samples=config.steps(spec.batch) * spec.batch,
        reached=record.reached, outcome=outcome, steps=steps, samples=samples,
        validated_step=record.step if record.reached else None, value=record.value, best_value=record.best_value,
        train_s=record.train_s, wall_s=record.wall_s, validations=validations, command_s=_command_s(config, spec),
        b_simple=reading.value if reading is not None else None,
        noise_scale_method=near.method if near is not None else None,
        end_to_end_samples_per_s=summary.end_to_end_samples_per_s,
        b_simple_lower=reading.lower_bound if reading is not None else None,
        diverged_at_step=summary.diverged_at_step,
        **summary.provenance(shown(*train_command(run_config(recipe, spec)))).fields_of(TimeToTargetRunRow))


# --- the learning-rate sweep ----------------------------------------------------------------------

def best_factor(rows: list[TimeToTargetRunRow]) -> float | None:
    """The factor whose run met the goal in the fewest samples (None: none met it)."""
    reached = [row for row in rows if row.reached and row.samples is not None]
    return min(reached, key=lambda row: (row.samples, row.lr_factor)).lr_factor if reached else None


def next_factor(tried: list[float], best: float | None) -> float | None:
    """The factor past the edge the best one lies at; None when it lies inside (or none reached)."""
    if best is None or len(tried) < 1:
        return None
    if best == max(tried):
        return max(tried) * LR_EDGE_FACTOR
    if best == min(tried):
        return min(tried) / LR_EDGE_FACTOR
    return None


def _in_parallel(recipe: StudyRecipe, specs: list[RunSpec], progress: Progress) -> None:
    with ThreadPoolExecutor(max_workers=recipe.config.parallel_runs) as pool:
        list(pool.map(lambda spec: train(recipe, spec, progress), specs))


def sweep(study_id: str, recipe: StudyRecipe, progress: Progress) -> dict[int, list[TimeToTargetRunRow]]:
    """Every batch's sweep on seed 0, run batch by batch in parallel, extended while its best factor is at an edge."""
    config = recipe.config
    factors = {batch: sorted(config.lr_factors) for batch in config.global_batches}
    _in_parallel(recipe, [RunSpec(batch, factor, 0) for batch in config.global_batches for factor in factors[batch]],
                 progress)
    for _ in range(config.max_lr_extensions):
        more = {}
        for batch in config.global_batches:
            rows = [run_row(study_id, recipe, RunSpec(batch, factor, 0), "lr sweep") for factor in factors[batch]]
            extra = next_factor(factors[batch], best_factor(rows))
            if extra is not None:
                more[batch] = extra
        if not more:
            break
        for batch, extra in more.items():
            factors[batch] = sorted([*factors[batch], extra])
            print(f"time-to-target: batch {batch}'s best LR factor is at the edge of those tried; trying {extra:g}",
                  flush=True)
        _in_parallel(recipe, [RunSpec(batch, extra, 0) for batch, extra in more.items()], progress)
    return {batch: [run_row(study_id, recipe, RunSpec(batch, factor, 0), "lr sweep") for factor in factors[batch]]
            for batch in config.global_batches}


# --- batches and the fit ---------------------------------------------------------------------------

def batch_row(study_id: str, recipe: StudyRecipe, batch: int, tuned: list[TimeToTargetRunRow],
              seeds: list[TimeToTargetRunRow]) -> TimeToTargetBatchRow:
    config = recipe.config
    best = best_factor(tuned)
    tried = sorted(row.lr_factor for row in tuned)
    extensions = len(tried) - len(config.lr_factors)
    at_edge = best is not None and len(tried) > 1 and best in (tried[0], tried[-1])
    steps = [row.steps for row in seeds]
    reached = [value for value in steps if value is not None]
    everyone = len(reached) == len(seeds) and bool(seeds)
    simple = median_reading(seed_readings(seeds))
    spread = seeds_min_max(reached, batch) if everyone else (None, None)
    if best is None:
        outcome = f"not reached within {config.steps(batch) * batch:,} samples at any LR factor tried"
    elif everyone:
        outcome = f"reached by all {len(seeds)} seeds"
    else:
        missed = [row.seed for row in seeds if row.steps is None]
        outcome = (f"not reached within {config.steps(batch) * batch:,} samples by seed"
                   f"{'s' if len(missed) > 1 else ''} {', '.join(map(str, missed))}")
    return TimeToTargetBatchRow(
        study_id=study_id, global_batch=batch, best_lr_factor=best,
        peak_lr=None if best is None else recipe.peak_lr(batch, best),
        lr_sweep={f"{row.lr_factor:g}": row.samples for row in sorted(tuned, key=lambda r: r.lr_factor)},
        best_at_edge=at_edge, extensions=extensions, seeds=[row.seed for row in seeds], reached=len(reached),
        outcome=outcome, steps_per_seed=steps,
        steps_mean=statistics.fmean(reached) if everyone else None, steps_min_max=spread[0],
        samples_mean=statistics.fmean(reached) * batch if everyone else None, samples_min_max=spread[1],
        b_simple=simple.value if simple is not None else None,
        wall_s_mean=statistics.fmean(row.wall_s for row in seeds) if everyone else None,
        b_simple_lower=simple.lower_bound if simple is not None else None)


def seed_readings(runs: list[TimeToTargetRunRow]) -> list[NoiseScaleReading]:
    """Each run's noise scale near the goal (a value, or a lower bound), of the runs that measured one."""
    return [NoiseScaleReading(run.b_simple, run.b_simple_lower, run.b_simple is not None)
            for run in runs if run.b_simple is not None or run.b_simple_lower is not None
            or run.noise_scale_method is not None]


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def fit_row(study_id: str, recipe: StudyRecipe, batches: list[TimeToTargetBatchRow],
            seeds: dict[int, list[TimeToTargetRunRow]]) -> TimeToTargetFitRow | None:
    fitted = [row for row in batches if row.steps_mean is not None]
    left_out = [f"batch {row.global_batch}: {row.outcome}" for row in batches if row.steps_mean is None]
    if len(fitted) < 2:
        print(f"time-to-target: no fit of S(B): {len(fitted)} batch(es) reached the goal with every seed "
              f"({'; '.join(left_out)})", flush=True)
        return None
    fit = bootstrap_fit({row.global_batch: [v for v in row.steps_per_seed if v is not None] for row in fitted})
    simple = median_reading(seed_readings([run for row in fitted for run in seeds[row.global_batch]]))
    errors = [(fit.fit.steps(row.global_batch) - row.steps_mean) / row.steps_mean for row in fitted]
    return TimeToTargetFitRow(
        study_id=study_id, workload=recipe.config.workload, size=recipe.size, until=recipe.config.until,
        batches=[row.global_batch for row in fitted], left_out=left_out,
        s_min=fit.fit.s_min, s_min_ci95=list(fit.interval("s_min")), e_min=fit.fit.e_min,
        e_min_ci95=list(fit.interval("e_min")),
        b_crit=_finite(fit.fit.b_crit), b_crit_ci95=[_finite(value) for value in fit.interval("b_crit")],
        draws=[[draw.s_min, draw.e_min] for draw in fit.draws[:KEPT_DRAWS]], bootstrap_draws=len(fit.draws),
        b_simple=simple.value if simple is not None else None,
        b_simple_per_batch={str(row.global_batch): row.b_simple for row in fitted},
        relative_rms=math.sqrt(statistics.fmean(error * error for error in errors)),
        b_simple_lower=simple.lower_bound if simple is not None else None,
        **Provenance(**recipe.identity).fields_of(TimeToTargetFitRow))


# --- the study ------------------------------------------------------------------------------------

def units(config: TimeToTargetConfig) -> int:
    return len(config.global_batches) * (len(config.lr_factors) + config.seeds - 1)


def estimate_s(config: TimeToTargetConfig) -> float:
    """Seconds on a 2-core CPU if every run used its whole budget at ESTIMATED_SAMPLES_PER_S (an
    upper bound: runs stop at the goal), a command's start per run, the first sweep only."""
    per_batch = [(len(config.lr_factors) + config.seeds - 1)
                 * (COMMAND_START_S + config.steps(batch) * batch / ESTIMATED_SAMPLES_PER_S)
                 for batch in config.global_batches]
    return sum(per_batch) / config.parallel_runs


def plan_lines(config: TimeToTargetConfig) -> list[str]:
    return [f"time-to-target: goal {config.until} at global batches {', '.join(map(str, config.global_batches))}; "
            f"LR factors {', '.join(f'{f:g}' for f in config.lr_factors)} on seed 0 (extended up to "
            f"{config.max_lr_extensions} times past an edge), then seeds 1..{config.seeds - 1}; budget "
            f"{config.max_samples:,} samples per run"]


def run(config: TimeToTargetConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    """The whole study; returns the rows file it wrote."""
    recipe = resolve_recipe(config)
    study_id = f"time-to-target-{int(time.time())}"
    started = time.perf_counter()
    tuned = sweep(study_id, recipe, progress)
    best = {batch: best_factor(rows) for batch, rows in tuned.items()}
    others = [RunSpec(batch, factor, seed) for batch, factor in best.items() if factor is not None
              for seed in config.seed_list if seed != 0]
    _in_parallel(recipe, others, progress)
    seeds: dict[int, list[TimeToTargetRunRow]] = {}
    for batch in config.global_batches:
        factor = best[batch]
        tuning = [row for row in tuned[batch] if row.lr_factor == factor] if factor is not None else []
        seeds[batch] = tuning + [run_row(study_id, recipe, RunSpec(batch, factor, seed), "seed")
                                 for seed in config.seed_list if seed != 0 and factor is not None]
    batches = [batch_row(study_id, recipe, batch, tuned[batch], seeds[batch]) for batch in config.global_batches]
    fit = fit_row(study_id, recipe, batches, seeds)
    runs = [row for batch in config.global_batches for row in tuned[batch]]
    runs += [row for batch in config.global_batches for row in seeds[batch] if row.purpose == "seed"]
    header = TimeToTargetSettingsRow(
        study_id=study_id, settings=config, workload=config.workload, size=recipe.size, until=config.until,
        metric=recipe.goal.metric, base_lr=recipe.base_lr, base_lr_from=recipe.base_lr_from,
        reference_batch=recipe.reference_batch, total_s=time.perf_counter() - started,
        **Provenance(command=command, machine=runs[0].machine if runs else None, **recipe.identity)
        .fields_of(TimeToTargetSettingsRow))
    out = Path(config.out) / ROWS_FILE
    for row in [header, *runs, *batches, *([fit] if fit else [])]:
        append_row(out, row)
    print(table(batches, fit))
    return [out]


def table(batches: list[TimeToTargetBatchRow], fit: TimeToTargetFitRow | None) -> str:
    lines = ["| global batch | best LR factor | steps to goal, mean [min, max] over seeds | samples | B_simple near goal | outcome |",
             "|---:|---:|---|---:|---:|---|"]
    for row in batches:
        steps = ("–" if row.steps_mean is None else
                 f"{row.steps_mean:,.1f} [{row.steps_min_max[0]:,.1f}, {row.steps_min_max[1]:,.1f}]")  # type: ignore[index]
        factor = "–" if row.best_lr_factor is None else f"{row.best_lr_factor:g}" + (" (at an edge)" if row.best_at_edge else "")
        lines.append(f"| {row.global_batch} | {factor} | {steps} | "
                     f"{'–' if row.samples_mean is None else f'{row.samples_mean:,.0f}'} | "
                     f"{bound_text(row.b_simple, row.b_simple_lower)} | {row.outcome} |")
    if fit is not None:
        lines.append(fit_line(fit))
    return "\n".join(lines)


def fit_line(fit: TimeToTargetFitRow) -> str:
    def bound(value: float | None) -> str:
        return "no bound" if value is None else f"{value:,.0f}"

    b_crit = "beyond every batch fitted (perfect scaling throughout)" if fit.b_crit is None else f"{fit.b_crit:,.0f}"
    simple = ("" if fit.b_simple is None and fit.b_simple_lower is None else
              f"; B_simple near the goal {bound_text(fit.b_simple, fit.b_simple_lower)}"
              + ("" if fit.b_simple is not None else f" (unresolved: {UNRESOLVED_REASON})"))
    return (f"S(B) = S_min (1 + B_crit / B): S_min {fit.s_min:,.1f} [{fit.s_min_ci95[0]:,.1f}, {fit.s_min_ci95[1]:,.1f}], "
            f"E_min {fit.e_min:,.0f} [{fit.e_min_ci95[0]:,.0f}, {fit.e_min_ci95[1]:,.0f}], B_crit {b_crit} "
            f"[{bound(fit.b_crit_ci95[0])}, {bound(fit.b_crit_ci95[1])}]{simple}; relative rms {fit.relative_rms:.1%}")


def resolve_recipe(config: TimeToTargetConfig) -> StudyRecipe:
    """The size, goal and learning rate every run gets, checked as `trainspeed train` checks them
    (the goal names one of the workload's validation metrics) before anything is written."""
    from trainspeed.train.evaluation import metric_names
    from trainspeed.train.lr_schedule import first_group_lrs
    from trainspeed.train.time_to_target import check_goal_metric
    from trainspeed.workloads import get_workload, reference_batch, resolve_size
    from trainspeed.workloads.base import setup_optimizers
    from trainspeed.workloads.identity import identify

    try:
        goal = parse_goal(config.until)
        workload = get_workload(config.workload)
        size = resolve_size(workload, config.size or None)
        trainable = workload.build(size, seed=0)
        check_goal_metric(goal, metric_names(trainable, workload, size), workload.name)
    except UsageError as error:
        raise UsageError(f"time-to-target study: {error}") from None
    setup_optimizers(trainable, fused=False)
    lrs = first_group_lrs(trainable.optimizers)
    if len(lrs) != 1 and config.base_lr is None:
        raise UsageError(f"time-to-target study: workload {workload.name!r} has {len(lrs)} optimizers; give --base-lr")
    reference = config.reference_batch or reference_batch(workload) or min(config.global_batches)
    return StudyRecipe(config=config, size=size, goal=goal,
                       base_lr=config.base_lr if config.base_lr is not None else next(iter(lrs.values())),
                       base_lr_from="--base-lr" if config.base_lr is not None else "workload",
                       reference_batch=reference, identity=identify(workload).row_fields())


def preset_config(preset: str, out: Path) -> TimeToTargetConfig:
    return TimeToTargetConfig(workload=DEFAULT_WORKLOAD, data=str(out / "time_to_target_data"), until="val/accuracy>=0.5",
                              out=str(out), **PRESETS[preset])


def config_from_args(args: argparse.Namespace, out: Path) -> TimeToTargetConfig:
    if args.data is None or args.until is None:
        raise UsageError("time-to-target study: give --data (the workload's dataset) and --until (the goal, e.g. "
                         "'val/accuracy>=0.8')")
    settings = {"workload": DEFAULT_WORKLOAD, **preset_settings(TimeToTargetConfig, PRESETS, args)}
    config = TimeToTargetConfig(out=str(out), **settings)  # type: ignore[arg-type]
    config.check()
    from trainspeed.workloads import data_missing_for

    missing = data_missing_for(config.workload, config.size or None, config.data)
    if missing is not None:
        raise UsageError(f"time-to-target study: --data {missing}; give the workload's dataset: a shard set "
                         "(`trainspeed data ...`) or data read where it lies (docs/data_in_place.md)")
    resolve_recipe(config)
    check_records(config)
    return config


def rows_files(config: TimeToTargetConfig) -> dict[Path, tuple[str, ...]]:
    """The file of rows the study appends to, and the kinds of row it holds."""
    return {Path(config.out) / ROWS_FILE: ROW_KINDS}
