"""`trainspeed plan ... --check CONFIGS`: run configurations of the plan to the goal and set what
they took beside what was predicted: the fixed ones at their batch, the `auto` ones as
`trainspeed train --batch-schedule auto` over the range the plan predicted. Each run is the recipe
the plan's steps came from, on another seed than any input's, with the configuration's target and
devices, stopped at the goal (`--until ... --stop-at-target`):

- with a time-to-target study, the study's recipe at that batch (its best learning-rate factor,
  the same warm-up, validations and budget; `trainspeed.train.goal_runs.GoalRecipe`);
- without one (a base run, or a critical-batch study of it), the base run's own settings (its
  `train_config.json`: its learning-rate rule, warm-up, validations and goal) at the
  configuration's target, devices and batch (`base_run_config`).

Every check's command is its TrainConfig's own (`trainspeed.train.flags.train_command`).

Rows are data, never code: the rows name their workload, and a workload of the user's own
(`package.module:factory`) is code that training imports and runs. Rows may come from anyone (a
colleague's results, a download, a folder with a module beside them), so such a workload is
trained only where the user names it on the command line too (`--workload`); a built-in workload
or a library's model by name (`timm:resnet18`, `hf:gpt2`) runs no code of the rows' choosing."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from trainspeed.errors import UsageError
from trainspeed.plan import CHECK_KEYWORDS
from trainspeed.plan.compiles import AUTO_MICRO_BATCHES
from trainspeed.plan.inputs import PlanInputs
from trainspeed.plan.plain_count import within_tolerance
from trainspeed.plan.rows import PlanCheckRow, PlanRow
from trainspeed.plan.speed_now import Rebench
from trainspeed.plan.steps import StepsModel
from trainspeed.report.page import slug
from trainspeed.subcommands import run_trainspeed, shown
from trainspeed.train.config import BatchScheduleConfig, LRConfig, TrainConfig
from trainspeed.train.flags import train_command
from trainspeed.train.goal_runs import GoalRecipe
from trainspeed.train.rows import RunSummary
from trainspeed.train.runs import TrainRun, read_run_summary
from trainspeed.train.time_to_target import parse_goal

NOT_EXPORTED = "a growing batch is not run on exported steps"
BUDGET_MARGIN = 2.0
"""A base run's recipe at another batch trains up to this many times the samples the plan predicts
for it where that is more than the base run's own budget (a larger batch needs more samples)."""


def chosen(rows: Sequence[PlanRow], names: Sequence[str]) -> list[PlanRow]:
    """The rows `--check` names: configurations (`target/devices/batch`, `target/devices/auto:MIN..MAX`),
    `best`, `samples-per-s`, or `best-smaller` and `best-larger`: the batches either side of the
    best, so that a check of the best and its neighbours is named before any of them runs."""
    predicted = {row.config: row for row in rows if row.status == "predicted"}
    picked: list[PlanRow] = []
    for name in names:
        if name == "best":
            row = next((row for row in rows if row.recommended), None)
        elif name == "samples-per-s":
            row = next((row for row in rows if row.samples_per_s_pick), None)
        elif name in ("best-smaller", "best-larger"):
            row = _beside_best(rows, smaller=name == "best-smaller")
        else:
            row = predicted.get(name)
        if row is None and name in ("best-smaller", "best-larger"):
            side = "smaller" if name == "best-smaller" else "larger"
            raise UsageError(f"plan: --check {name}: no fixed batch {side} than the best configuration's was predicted "
                             f"on its target and devices; add one to --global-batches (and --schedules fixed)")
        if row is None:
            choices = ", ".join([*CHECK_KEYWORDS, *predicted][:12])
            raise UsageError(f"plan: --check {name!r} is not a predicted configuration of this plan; choose among "
                             f"{choices}")
        if row not in picked:
            picked.append(row)
    return picked


def _beside_best(rows: Sequence[PlanRow], smaller: bool) -> PlanRow | None:
    """The predicted fixed batch of the best's target and devices nearest below its batch (for an
    `auto` best, below the batch it starts at), or nearest above (above the batch it ends at)."""
    best = next((row for row in rows if row.recommended), None)
    if best is None:
        return None
    low = best.global_batch
    high = (best.batch_max or low) if best.schedule == "auto" else low
    same = [row for row in rows if row.status == "predicted" and row.schedule == "fixed"
            and (row.target, row.devices) == (best.target, best.devices)]
    if smaller:
        return max((row for row in same if row.global_batch < low), key=lambda row: row.global_batch, default=None)
    return min((row for row in same if row.global_batch > high), key=lambda row: row.global_batch, default=None)


@dataclass(frozen=True)
class CheckRecipe:
    """How the checks train: a time-to-target study's recipe (`study`, with its best learning-rate
    factor per batch), or a base run's own settings (`base`)."""

    workload: str
    size: str | None
    data: str | None
    until: str
    source: str
    """Where the recipe was read, as a refusal names it."""
    study: GoalRecipe | None = None
    best_factors: dict[int, float | None] = dataclasses.field(default_factory=dict)
    base: TrainConfig | None = None
    base_run: TrainRun | None = None


def check_recipe(inputs: PlanInputs, model: StepsModel) -> CheckRecipe:
    """The study's recipe where the inputs hold a time-to-target study; else the base run's settings
    (its `train_config.json`); one line where neither is here."""
    settings = inputs.settings
    if settings is not None:
        recipe = GoalRecipe.from_settings(settings.settings, settings.size, settings.base_lr, settings.reference_batch)
        return CheckRecipe(settings.settings.workload, settings.size, settings.settings.data, settings.until,
                           inputs.settings_source or "the study's settings", study=recipe,
                           best_factors={row.global_batch: row.best_lr_factor for row in inputs.study_batches})
    from trainspeed.plan.measure import base_config
    from trainspeed.plan.model import goal_run

    base_run = model.base_run or goal_run(inputs)
    config, where = base_config(inputs, model)
    if config is None or base_run is None:
        raise UsageError(f"plan: --check trains the recipe the steps came from, and {where}; give a time-to-target "
                         "study's rows, or the base run's folder as `trainspeed train` wrote it (with its "
                         "train_config.json)")
    return CheckRecipe(config.workload, config.size, None if config.synthetic_data else config.data,
                       config.until or inputs.until,
                       where, base=config, base_run=base_run)


def check_dirs(recipe: CheckRecipe, rows: Sequence[PlanRow], out: Path) -> dict[str, Path]:
    """Each check's run directory, refused before anything runs where it exists (never overwritten)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"plan: --check-dir {out} exists and is not an empty folder; name a new --check-dir")
    dirs = {}
    for row in rows:
        if recipe.study is not None and recipe.best_factors.get(row.global_batch) is None:
            tuned = ", ".join(str(b) for b, f in recipe.best_factors.items() if f is not None)
            raise UsageError(f"plan: --check {row.config}: the study tuned no learning rate at global batch "
                             f"{row.global_batch}" + (" (where the growing batch starts)" if row.schedule == "auto"
                                                      else "") + f"; check a batch the study measured ({tuned})")
        dirs[row.config] = out / slug(row.config)
    return dirs


def check_runnable(inputs: PlanInputs, recipe: CheckRecipe, workload: str | None) -> None:
    """Before anything is written: the check's runs can start here, with code the user chose.

    The recipe's workload is the one `--workload` names where the user gave it (it must be the
    recipe's), and a module of the user's own that only the rows name is refused; the recipe's data
    must be here, and it trains to the goal the plan predicts."""
    from trainspeed.workloads import data_missing_for, is_users_module

    where = recipe.source
    named = recipe.workload
    trained = "the study" if recipe.study is not None else "the base run"
    if workload is not None and workload != named:
        raise UsageError(f"plan: --workload {workload}: {trained} ({where}) trained {named}; --check trains "
                         f"{trained}'s workload, so give its name or leave --workload out")
    if workload is None and is_users_module(named):
        raise UsageError(f"plan: --check would import {named}, a module {trained}'s rows name ({where}); rows are "
                         f"data and never choose code to run: give --workload {named} if it is yours to run")
    missing = data_missing_for(named, recipe.size, recipe.data) if recipe.data is not None else None
    if missing is not None:
        raise UsageError(f"plan: --check trains on {trained}'s data {recipe.data} ({where}), which is not here "
                         f"({missing}); run the plan from the folder {trained} ran in, where that path holds its data")
    if recipe.study is not None and inputs.settings is not None and inputs.settings.settings.until != recipe.until:
        raise UsageError(f"plan: {where}: the study's settings train to {inputs.settings.settings.until!r} and its "
                         f"rows say {recipe.until!r} (the file was edited or written by another program)")
    if recipe.base is not None and recipe.until != inputs.until:
        raise UsageError(f"plan: {where}: the base run trained to {recipe.until!r}, the plan predicts "
                         f"{inputs.until!r}; give that run's rows")


def check_config(recipe: CheckRecipe, row: PlanRow, seed: int, out: Path) -> TrainConfig:
    """One check's TrainConfig: the recipe at the row's target, devices and batch (fixed), or
    growing from the row's smallest to its largest global batch (`auto`)."""
    if recipe.study is not None:
        return study_check_config(recipe.study, recipe.best_factors, row, seed, out)
    assert recipe.base is not None and recipe.base_run is not None
    return base_run_config(recipe.base, recipe.base_run, row, seed, out)


def study_check_config(recipe: GoalRecipe, best: dict[int, float | None], row: PlanRow, seed: int,
                       out: Path) -> TrainConfig:
    """The study's run at the row's batch and its best LR factor, with the configuration's target and
    devices, the previous step's gradient for the noise scale (a fixed check measures time). `auto`
    starts as the study's run at its smallest batch and follows the study's rule as it grows: the
    peak LR base x factor x sqrt(B / reference) at every batch B, the same warm-up samples, the
    study's budget in samples."""
    start = row.global_batch
    factor = best[start]
    assert factor is not None
    config = recipe.run_config(start, factor, seed, out, target=row.target, nproc=row.devices,
                               noise_scale_micro_batches=1)
    if row.schedule != "auto":
        return config
    lr = dataclasses.replace(config.lr, base_lr=float(f"{recipe.base_lr * factor:.6g}"), scaling="sqrt",
                             reference_batch=recipe.reference_batch)
    return _auto(config, row, lr, recipe.max_samples)


def base_run_config(base: TrainConfig, run: TrainRun, row: PlanRow, seed: int, out: Path) -> TrainConfig:
    """The base run's settings at the row's target, devices and batch: its LR rule (the peak scaled
    to the batch by its own rule), its warm-up and its validations counted in samples, so every
    batch warms up and validates at the same samples as the base run did; its goal, stopped there;
    its noise-scale meter. The budget is the base run's in samples, or `BUDGET_MARGIN` x the
    samples the plan predicts where that is more."""
    from trainspeed.plan.run_costs import validation_every_samples

    base_batch = base.global_batch
    start = row.global_batch
    budget = (base.samples or (base.steps * base_batch if base.steps else None)
              or run.row.samples or 0)
    predicted = sum(phase.global_batch * phase.steps for phase in row.phases or []) or start * (row.steps or 0)
    budget = max(budget, math.ceil(BUDGET_MARGIN * predicted))
    every = base.eval_every_samples or validation_every_samples(run) or 0
    per_device = start // row.devices
    validation_samples = base.eval_batches * base.batch_size_per_device * base.world_size if base.eval_batches else None
    lr = base.lr
    if lr.warmup_steps is not None:
        lr = dataclasses.replace(lr, warmup_steps=max(1, round(lr.warmup_steps * base_batch / start)))
    micro = base.noise_scale_micro_batches if row.devices == 1 else 1
    config = dataclasses.replace(
        base, target=row.target, launch=dataclasses.replace(base.launch, nproc=row.devices),
        batch_size_per_device=per_device, steps=None, epochs=None, samples=budget, seed=seed, lr=lr,
        eval_every=0 if every else base.eval_every, eval_every_samples=every,
        eval_batches=None if validation_samples is None else max(1, validation_samples // start),
        until=row.until, stop_at_target=True, checkpoint_every=0, resume=False, init_from=None, init_step=None,
        noise_scale_micro_batches=micro if per_device % micro == 0 else 1,
        batch=BatchScheduleConfig(max_batch_per_device=base.batch.max_batch_per_device), bench_jsonl=None,
        out_dir=str(out), progress=False)
    if row.schedule != "auto":
        return config
    return _auto(config, row, lr, budget)


def _auto(config: TrainConfig, row: PlanRow, lr: LRConfig, samples: int) -> TrainConfig:
    """`config` as `--batch-schedule auto` from the row's smallest to its largest global batch: its
    length in samples (auto decides its steps), `--noise-scale-micro-batches` on one rank, and
    `--auto-step-times off`: the plan grows the batch where the noise scale says
    (`steps.auto_phases`), so the check runs that rule, not the run's own step times."""
    micro = max(AUTO_MICRO_BATCHES, config.noise_scale_micro_batches) if row.devices == 1 else 1
    return dataclasses.replace(
        config, lr=lr, steps=None, epochs=None, samples=samples, noise_scale="on", noise_scale_micro_batches=micro,
        batch=dataclasses.replace(config.batch, schedule="auto", global_batch_min=row.global_batch,
                                  global_batch_max=row.batch_max or row.global_batch, auto_step_times="off"))


@dataclass(frozen=True)
class CheckRun:
    """One run of a checked configuration: its plan row, training seed, run folder and arguments."""

    row: PlanRow
    seed: int
    run_dir: Path
    command: list[str]


def check_commands(recipe: CheckRecipe, rows: Sequence[PlanRow], dirs: dict[str, Path],
                   seed: int) -> dict[str, list[str]]:
    """Each check's `trainspeed train` arguments at one seed, by configuration, from its TrainConfig."""
    return {run.row.config: run.command for run in check_runs(recipe, rows, dirs, [seed])}


def check_runs(recipe: CheckRecipe, rows: Sequence[PlanRow], dirs: dict[str, Path],
               seeds: Sequence[int], exported: Path | None = None) -> list[CheckRun]:
    """Every run the checks make, configuration by configuration, a run per seed: one seed's in the
    configuration's folder, several seeds' each in its `seed-N` folder there. With `exported`, each
    run trains that folder's steps (`train --exported`), as on a host with JAX only."""
    runs = []
    for row in rows:
        for seed in seeds:
            run_dir = dirs[row.config] if len(seeds) == 1 else dirs[row.config] / f"seed-{seed}"
            config = check_config(recipe, row, seed, run_dir)
            command = train_command(config) if exported is None else exported_command(config, exported)
            runs.append(CheckRun(row, seed, run_dir, command))
    return runs


def exported_command(config: TrainConfig, folder: Path) -> list[str]:
    """A check's run as `train --exported FOLDER` takes it: the folder fixes the target (so the
    command names none), and the settings a torch run has and an exported one refuses (threads,
    loader workers) are left at their defaults, which an exported run records as it ran them."""
    defaults = TrainConfig()
    command = train_command(dataclasses.replace(config, exported=str(folder), target=defaults.target,
                                                threads=defaults.threads, num_workers=defaults.num_workers))
    at = command.index("--target")
    return command[:at] + command[at + 2:]


def check_exported(folder: Path, rows: Sequence[PlanRow]) -> None:
    """Before anything runs: the exported folder trains each checked configuration (its target, one
    device, a batch it was exported at); one line where it does not."""
    from trainspeed.exported.folder import read_manifest

    manifest = read_manifest(folder)
    for row in rows:
        if row.target != manifest.target:
            raise UsageError(f"plan: --check-exported {folder} holds {manifest.target}'s step, and --check "
                             f"{row.config} trains {row.target}; check configurations of {manifest.target}")
        if row.devices != 1:
            raise UsageError(f"plan: --check-exported trains on one device, and --check {row.config} is of "
                             f"{row.devices}; check one-device configurations")
        if row.schedule != "fixed":
            raise UsageError(f"plan: --check-exported runs fixed batches ({NOT_EXPORTED}); --check {row.config} "
                             "grows its batch")
        if row.global_batch not in manifest.batch_sizes:
            sizes = ",".join(str(size) for size in manifest.batch_sizes)
            raise UsageError(f"plan: --check {row.config}: batch {row.global_batch} was not exported to {folder} "
                             f"(it holds {sizes}); export it with --batch-sizes")


def run_checks(runs: Sequence[CheckRun], tolerance: float,
               rebench: Callable[[PlanRow], Rebench | None] | None = None) -> list[PlanCheckRow]:
    """Each run to its goal, a check row of each; after a configuration's last run of several seeds,
    the line of their mean (the prediction is of a run's expected time, and one run's scatters about
    it from seed to seed). With `rebench`, a configuration's bench row is measured again before its
    first run, and each of its checks holds the prediction at that speed (`plan.speed_now`)."""
    checked: list[PlanCheckRow] = []
    speed: dict[str, Rebench | None] = {}
    for index, run in enumerate(runs):
        if rebench is not None and run.row.config not in speed:
            speed[run.row.config] = found = rebench(run.row)
            if found is not None:
                print(found.line(run.row), flush=True)
        print(shown(*run.command), flush=True)
        started = time.perf_counter()
        run_trainspeed(*run.command)
        measured_s = time.perf_counter() - started
        check = check_row(run.row, read_run_summary(run.run_dir), run.run_dir, measured_s, run.seed, tolerance,
                          shown(*run.command), rebenched=speed.get(run.row.config))
        print(check_line(check), flush=True)
        checked.append(check)
        last_of_config = index + 1 == len(runs) or runs[index + 1].row.config != run.row.config
        if last_of_config:
            line = mean_check_line([row for row in checked if row.config == run.row.config])
            if line:
                print(line, flush=True)
    return checked


def check_row(row: PlanRow, summary: RunSummary, run_dir: Path, measured_s: float, seed: int, tolerance: float,
              command: str, measured_from: str = "command", rebenched: Rebench | None = None) -> PlanCheckRow:
    """The plan's row and the run of its configuration, side by side (and the prediction at the
    machine's speed now, where its bench row was measured again: `rebenched`)."""
    goal = parse_goal(row.until)
    record = summary.time_to_target
    steps = record.crossing_step(goal.threshold) if record is not None else None
    ratio = measured_s / row.predicted_s  # type: ignore[operator]
    within = None if row.extrapolated else within_tolerance(ratio, tolerance)
    steady = summary.steady_samples_per_s
    steady_step_s = row.global_batch / steady if steady and row.schedule == "fixed" else None
    return PlanCheckRow(
        plan_id=row.plan_id, config=row.config, target=row.target, devices=row.devices,
        global_batch=row.global_batch, workload=row.workload, size=row.size, until=row.until,
        recommended=row.recommended, samples_per_s_pick=row.samples_per_s_pick,
        predicted_s=row.predicted_s, predicted_s_ci95=row.predicted_s_ci95,  # type: ignore[arg-type]
        measured_s=measured_s, ratio=ratio, within=within, tolerance=tolerance,
        predicted_steps=row.steps, measured_steps=steps, predicted_step_s=row.step_s,  # type: ignore[arg-type]
        measured_step_s=record.train_s / record.step if record is not None and record.step else None,
        reached=bool(record is not None and record.reached), seed=seed, run_dir=str(run_dir),
        schedule=row.schedule, batch_max=row.batch_max,
        batches=_batches_trained(summary) if row.schedule == "auto" else None,
        inside=inside(row.predicted_s_ci95, measured_s), extrapolated=row.extrapolated, steady_step_s=steady_step_s,
        measured_from=measured_from, **_speed_now(row, measured_s, tolerance, rebenched),
        **summary.provenance(command).fields_of(PlanCheckRow))


def _speed_now(row: PlanRow, measured_s: float, tolerance: float, rebenched: Rebench | None) -> dict[str, Any]:
    """A check row's fields of the speed now (none where its bench row was not measured again)."""
    if rebenched is None:
        return {}
    predicted_now = rebenched.predicted_s(row)
    ratio_now = measured_s / predicted_now
    interval_now = rebenched.interval(row)
    return dict(bench_samples_per_s=rebenched.planned.samples_per_s,
                rebench_samples_per_s=rebenched.now.samples_per_s, rebench_compile_s=rebenched.compile_now_s,
                predicted_s_now=predicted_now, predicted_s_now_ci95=interval_now, ratio_now=ratio_now,
                inside_now=inside(interval_now, measured_s),
                within_now=None if row.extrapolated else within_tolerance(ratio_now, tolerance),
                rebench_source=rebenched.source)


def checks_of_runs(rows: Sequence[PlanRow], run_dirs: Sequence[Path], tolerance: float,
                   command: str) -> list[PlanCheckRow]:
    """`plan --checked RUN`: runs made before, by hand or on a machine the plan never ran on (a
    TPU host with JAX only, `train --exported`), each beside the plan's row of its configuration
    (target, devices, global batch, fixed). Its measured seconds are what the run recorded: its
    start-up (command to first step, where it kept one) and its wall seconds to the goal. A run of
    another goal, or of a configuration the plan has no row for, is one line: every run is read
    before the plan writes anything."""
    by_config = {row.config: row for row in rows if row.schedule == "fixed"}
    checked = []
    for run_dir in run_dirs:
        summary = read_run_summary(run_dir)
        record = summary.time_to_target
        if record is None or not record.reached:
            raise UsageError(f"plan: --checked {run_dir}: the run did not reach a goal (train it with --until "
                             "... --stop-at-target)")
        if rows and record.until != rows[0].until:
            raise UsageError(f"plan: --checked {run_dir}: the run's goal is {record.until}, the plan's {rows[0].until}")
        config = f"{summary.target}/{summary.world_size}/{summary.global_batch}"
        row = by_config.get(config)
        if row is None:
            raise UsageError(f"plan: --checked {run_dir}: the plan has no row of its configuration {config}; give "
                             f"--targets {summary.target} --devices {summary.world_size} --global-batches "
                             f"{summary.global_batch}")
        if summary.startup_s is None:
            print(f"plan: --checked {run_dir}: the run kept no start-up seconds; its wall seconds to the goal alone")
        measured_s = (summary.startup_s or 0.0) + record.wall_s
        checked.append(check_row(row, summary, run_dir, measured_s, _run_seed(run_dir), tolerance, command,
                                 measured_from="run"))
    return checked


def _run_seed(run_dir: Path) -> int:
    """The training seed in the run's settings (`train_config.json`)."""
    from trainspeed.train.rows import CONFIG_FILE
    from trainspeed.user_json import read_utf8

    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise UsageError(f"plan: --checked {run_dir}: holds no {CONFIG_FILE}; give the run's own folder")
    return TrainConfig.from_json(read_utf8(path, str(path)), str(path)).seed


def inside(interval: Sequence[float] | None, measured_s: float) -> bool | None:
    """Whether a check's measured seconds lie inside its prediction's 95% interval (ends included);
    None where the prediction had none."""
    return None if interval is None else interval[0] <= measured_s <= interval[1]


def _batches_trained(summary: RunSummary) -> list[int] | None:
    """The global batches a growing run trained at, in order (its summary's schedule)."""
    schedule = summary.batch_schedule
    if schedule is None:
        return None
    return [schedule.start_global_batch, *(entry.to_global_batch for entry in schedule.switches)]


def check_line(row: PlanCheckRow) -> str:
    """A check's seconds against its prediction, then the two parts it is made of: steps, and a
    step's time after the first steps (the steady step, without the compilations)."""
    steps = "not reached" if row.measured_steps is None else f"{row.measured_steps:,.1f}"
    batches = f" (batches {' -> '.join(map(str, row.batches))})" if row.batches else ""
    step = (f"; steady step {row.steady_step_s * 1e3:,.1f} ms against {row.predicted_step_s * 1e3:,.1f} predicted"
            if row.steady_step_s is not None else "")
    if row.extrapolated and row.predicted_s_ci95 is not None:
        return (f"check {row.config}{batches}: measured {row.measured_s:,.1f} s, "
                f"{_against_bounds(row.measured_s, row)}; steps {steps} against {row.predicted_steps:,.1f} at "
                f"the model's point{step}{_now_part(row, row.measured_s)}")
    interval = ""
    if row.predicted_s_ci95 is not None:
        interval = (f", {'inside' if row.inside else 'outside'} its 95% interval [{row.predicted_s_ci95[0]:,.1f}, "
                    f"{row.predicted_s_ci95[1]:,.1f}]")
    return (f"check {row.config}{batches}: measured {row.measured_s:,.1f} s, predicted {row.predicted_s:,.1f} s "
            f"(ratio {row.ratio:.2f}, {'within' if row.within else 'outside'} ±{row.tolerance:.0%}{interval}); "
            f"steps {steps} against {row.predicted_steps:,.1f} predicted{step}{_now_part(row, row.measured_s)}")


def _now_part(row: PlanCheckRow, measured_s: float) -> str:
    """The seconds against the prediction at the machine's speed now, where the check re-benched."""
    if row.predicted_s_now is None or not row.rebench_samples_per_s or not row.bench_samples_per_s:
        return ""
    ratio = measured_s / row.predicted_s_now
    verdict = ("the model's point, not held to the tolerance" if row.extrapolated else
               f"{'within' if within_tolerance(ratio, row.tolerance) else 'outside'} ±{row.tolerance:.0%}")
    interval = row.predicted_s_now_ci95
    if interval is not None:
        verdict += (f", {'inside' if inside(interval, measured_s) else 'outside'} its 95% interval "
                    f"[{interval[0]:,.1f}, {interval[1]:,.1f}]")
    return (f"; at the speed now (the bench row again {row.rebench_samples_per_s:,.1f} samples/s against "
            f"{row.bench_samples_per_s:,.1f}) predicted {row.predicted_s_now:,.1f} s (ratio {ratio:.2f}, {verdict})")


def _against_bounds(measured_s: float, row: PlanCheckRow) -> str:
    """An extrapolated configuration's seconds against its interval: its steps were bounded, not
    predicted, so its ratio to the model's point is said but not held to the tolerance."""
    low, high = row.predicted_s_ci95  # type: ignore[misc]
    where = "inside" if inside(row.predicted_s_ci95, measured_s) else "outside"
    ratio = measured_s / row.predicted_s
    plainly = "within" if within_tolerance(ratio, row.tolerance) else "outside"
    return (f"predicted {row.predicted_s:,.1f} s (ratio {ratio:.2f}, {plainly} ±{row.tolerance:.0%}, {where} its 95% "
            f"interval [{low:,.1f}, {high:,.1f}]); extrapolated: its steps were bounded, not predicted, so the plan "
            f"judges it by its interval: {where}")


def mean_check_line(rows: Sequence[PlanCheckRow]) -> str | None:
    """The mean of one configuration's check runs beside its prediction; None for a single run."""
    if len(rows) < 2:
        return None
    first = rows[0]
    mean_s = sum(row.measured_s for row in rows) / len(rows)
    seconds = ", ".join(f"{row.measured_s:,.1f}" for row in rows)
    if first.extrapolated and first.predicted_s_ci95 is not None:
        against = _against_bounds(mean_s, first)
    else:
        ratio = mean_s / first.predicted_s
        within = within_tolerance(ratio, first.tolerance)
        against = (f"predicted {first.predicted_s:,.1f} s (ratio {ratio:.2f}, "
                   f"{'within' if within else 'outside'} ±{first.tolerance:.0%})")
    return (f"check {first.config}, mean of {len(rows)} seeds ({', '.join(str(row.seed) for row in rows)}): "
            f"measured {mean_s:,.1f} s ({seconds}), {against}{_now_part(first, mean_s)}; reached the goal in "
            f"{sum(row.reached for row in rows)} of {len(rows)}")


def mean_seconds(rows: Sequence[PlanCheckRow]) -> dict[str, float]:
    """Each checked configuration's mean measured seconds over its runs, in the order first checked."""
    by_config: dict[str, list[float]] = {}
    for row in rows:
        by_config.setdefault(row.config, []).append(row.measured_s)
    return {config: sum(seconds) / len(seconds) for config, seconds in by_config.items()}


def best_check_line(rows: Sequence[PlanCheckRow]) -> str | None:
    """Whether the predicted best was the measured best (by the mean of its runs, where a
    configuration ran at several seeds)."""
    means = mean_seconds(rows)
    if len(means) < 2:
        return None
    runs = len(rows) // len(means)
    what = "" if runs == 1 else f", mean of {runs} runs"
    fastest = min(means, key=means.__getitem__)
    best = next((row.config for row in rows if row.recommended), None)
    if best is None:
        return f"the fastest measured was {fastest} ({means[fastest]:,.1f} s{what}); the recommended was not checked"
    if best == fastest:
        return f"the recommended configuration {best} was also the fastest measured ({means[best]:,.1f} s{what})"
    return (f"the fastest measured was {fastest} ({means[fastest]:,.1f} s{what}); the recommended {best} "
            f"took {means[best]:,.1f} s, {means[best] / means[fastest]:.2f}x")
