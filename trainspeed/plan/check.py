"""`trainspeed plan ... --check CONFIGS`: run configurations of the plan to the goal and set what
they took beside what was predicted. Each run is the study's recipe at that batch (its best
learning-rate factor, the same warm-up, validations and budget) on another seed than the study's,
with the configuration's target and devices: `trainspeed train --until ... --stop-at-target`.

Rows are data, never code: the study's rows name its workload, and a workload of the user's own
(`package.module:factory`) is code that training imports and runs. Rows may come from anyone (a
colleague's results, a download, a folder with a module beside them), so such a workload is
trained only where the user names it on the command line too (`--workload`); a built-in workload
or a library's model by name (`timm:resnet18`, `hf:gpt2`) runs no code of the rows' choosing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from trainspeed.data.sources import data_missing
from trainspeed.errors import UsageError
from trainspeed.plan import CHECK_KEYWORDS
from trainspeed.plan.inputs import PlanInputs
from trainspeed.plan.rows import PlanCheckRow, PlanRow
from trainspeed.report.page import slug
from trainspeed.subcommands import run_trainspeed, shown
from trainspeed.train.flags import train_command
from trainspeed.train.goal_runs import GoalRecipe
from trainspeed.train.runs import read_run_summary
from trainspeed.train.time_to_target import parse_goal


def chosen(rows: Sequence[PlanRow], names: Sequence[str]) -> list[PlanRow]:
    """The rows `--check` names: configurations (`target/devices/batch`), `best` or `samples-per-s`."""
    predicted = {row.config: row for row in rows if row.status == "predicted"}
    picked: list[PlanRow] = []
    for name in names:
        if name == "best":
            row = next((row for row in rows if row.recommended), None)
        elif name == "samples-per-s":
            row = next((row for row in rows if row.samples_per_s_pick), None)
        else:
            row = predicted.get(name)
        if row is None:
            choices = ", ".join([*CHECK_KEYWORDS, *predicted][:12])
            raise UsageError(f"plan: --check {name!r} is not a predicted configuration of this plan; choose among "
                             f"{choices}")
        if row not in picked:
            picked.append(row)
    return picked


def check_dirs(inputs: PlanInputs, rows: Sequence[PlanRow], out: Path) -> dict[str, Path]:
    """Each check's run directory, refused before anything runs where it exists (never overwritten)."""
    if inputs.settings is None:
        raise UsageError("plan: --check runs the study's recipe, and the inputs hold no time-to-target study "
                         "settings; give the study's rows")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"plan: --check-dir {out} exists and is not an empty folder; name a new --check-dir")
    best = {row.global_batch: row.best_lr_factor for row in inputs.study_batches}
    dirs = {}
    for row in rows:
        if best.get(row.global_batch) is None:
            raise UsageError(f"plan: --check {row.config}: the study tuned no learning rate at global batch "
                             f"{row.global_batch}; check a batch the study measured "
                             f"({', '.join(str(b) for b, f in best.items() if f is not None)})")
        dirs[row.config] = out / slug(row.config)
    return dirs


def check_runnable(inputs: PlanInputs, workload: str | None) -> None:
    """Before anything is written: the check's runs can start here, with code the user chose.

    The study's workload is the one `--workload` names where the user gave it (it must be the
    study's), and a module of the user's own that only the rows name is refused; the study's data
    must be here, and its settings train to the goal its rows say (which the inputs checked)."""
    from trainspeed.workloads import is_users_module

    settings = inputs.settings
    assert settings is not None
    where = inputs.settings_source or "the study's settings"
    named = settings.settings.workload
    if workload is not None and workload != named:
        raise UsageError(f"plan: --workload {workload}: the study ({where}) trained {named}; --check trains the "
                         "study's workload, so give its name or leave --workload out")
    if workload is None and is_users_module(named):
        raise UsageError(f"plan: --check would import {named}, a module the study's rows name ({where}); rows are "
                         f"data and never choose code to run: give --workload {named} if it is yours to run")
    missing = data_missing(settings.settings.data)
    if missing is not None:
        raise UsageError(f"plan: --check trains on the study's data {settings.settings.data} ({where}), which is not "
                         f"here ({missing}); run the plan from the folder the study ran in, where that path holds its "
                         "data")
    if settings.settings.until != settings.until:
        raise UsageError(f"plan: {where}: the study's settings train to {settings.settings.until!r} and its rows "
                         f"say {settings.until!r} (the file was edited or written by another program)")


def check_commands(inputs: PlanInputs, rows: Sequence[PlanRow], dirs: dict[str, Path], seed: int) -> dict[str, list[str]]:
    """Each check's `trainspeed train` arguments, by configuration: the study's recipe (what its
    settings row records) at the batch's best learning-rate factor, with the configuration's target
    and devices, and the previous step's gradient for the noise scale (the check measures time)."""
    settings = inputs.settings
    assert settings is not None
    recipe = GoalRecipe.from_settings(settings.settings, settings.size, settings.base_lr, settings.reference_batch)
    best = {row.global_batch: row.best_lr_factor for row in inputs.study_batches}
    return {row.config: train_command(recipe.run_config(row.global_batch, best[row.global_batch], seed,  # type: ignore[arg-type]
                                                        dirs[row.config], target=row.target, nproc=row.devices,
                                                        noise_scale_micro_batches=1))
            for row in rows}


def run_checks(inputs: PlanInputs, rows: Sequence[PlanRow], dirs: dict[str, Path], commands: dict[str, list[str]],
               seed: int, tolerance: float) -> list[PlanCheckRow]:
    settings = inputs.settings
    assert settings is not None
    goal = parse_goal(settings.until)
    checked = []
    for row in rows:
        args = commands[row.config]
        print(shown(*args), flush=True)
        started = time.perf_counter()
        run_trainspeed(*args)
        measured_s = time.perf_counter() - started
        summary = read_run_summary(dirs[row.config])
        record = summary.time_to_target
        samples = record.crossing_samples(goal.threshold) if record is not None else None
        steps = samples / row.global_batch if samples is not None else None
        ratio = measured_s / row.predicted_s  # type: ignore[operator]
        check = PlanCheckRow(
            plan_id=row.plan_id, config=row.config, target=row.target, devices=row.devices,
            global_batch=row.global_batch, workload=row.workload, size=row.size, until=row.until,
            recommended=row.recommended, samples_per_s_pick=row.samples_per_s_pick,
            predicted_s=row.predicted_s, predicted_s_ci95=row.predicted_s_ci95,  # type: ignore[arg-type]
            measured_s=measured_s, ratio=ratio, within=abs(ratio - 1) <= tolerance, tolerance=tolerance,
            predicted_steps=row.steps, measured_steps=steps, predicted_step_s=row.step_s,  # type: ignore[arg-type]
            measured_step_s=record.train_s / record.step if record is not None and record.step else None,
            reached=bool(record is not None and record.reached), seed=seed, run_dir=str(dirs[row.config]),
            **summary.provenance(shown(*args)).fields_of(PlanCheckRow))
        print(check_line(check), flush=True)
        checked.append(check)
    return checked


def check_line(row: PlanCheckRow) -> str:
    steps = "not reached" if row.measured_steps is None else f"{row.measured_steps:,.1f}"
    return (f"check {row.config}: measured {row.measured_s:,.1f} s, predicted {row.predicted_s:,.1f} s "
            f"(ratio {row.ratio:.2f}, {'within' if row.within else 'outside'} ±{row.tolerance:.0%}); steps {steps} "
            f"against {row.predicted_steps:,.1f} predicted")


def best_check_line(rows: Sequence[PlanCheckRow]) -> str | None:
    """Whether the predicted best was the measured best, or within the best's interval."""
    if len(rows) < 2:
        return None
    fastest = min(rows, key=lambda row: row.measured_s)
    best = next((row for row in rows if row.recommended), None)
    if best is None:
        return f"the fastest measured was {fastest.config} ({fastest.measured_s:,.1f} s); the recommended was not checked"
    if best is fastest:
        return f"the recommended configuration {best.config} was also the fastest measured ({best.measured_s:,.1f} s)"
    return (f"the fastest measured was {fastest.config} ({fastest.measured_s:,.1f} s); the recommended {best.config} "
            f"took {best.measured_s:,.1f} s, {best.measured_s / fastest.measured_s:.2f}x")
