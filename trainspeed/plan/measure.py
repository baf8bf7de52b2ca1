"""`trainspeed plan --measure --budget-s S --measure-dir DIR`: measure what the plan lacks, within S
seconds, before it predicts.

What a plan lacks, most needed first:
1. the bench rows of every target at every per-device batch its configurations run (the fixed
   batches, the batches a growing one reaches, the micro-batches of one rank), the base run's own
   target and the batch its steps' slices ran at first (its efficiency is measured against that row);
2. a short run of each device count no run was given of (their start-up and efficiency against
   the bench), on the base run's target at its per-device batch where the count divides it;
3. a short run of each compiled target at each per-device batch it runs, where no run of it
   validated twice there (what its validation graph takes to compile).

Each is a command built from a config (a BenchConfig's `bench_command`, a TrainConfig's
`train_command`: the base run's own settings, from its `train_config.json` or the study's recipe,
at the measurement's target, devices and batch), run by `trainspeed.subcommands.run_trainspeed`.
Its cost is estimated first, from what the inputs measured (a process's start-up, a step's time,
a compilation) and, where nothing did, from the stated guesses below. The budget takes them in
order, each that fits (a bench with as many of its batches as fit); one that does not is left out
and said. Even the smallest not fitting is one line, before anything is written.

Results go to DIR, a new or empty folder (nothing of anyone's is overwritten): the bench rows to
DIR/bench.jsonl (bench's own writer, through the shared rows-file check), the runs to
DIR/runs/NAME; the plan then reads them beside its inputs.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.flags import bench_command
from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.plan.compiles import AUTO_MICRO_BATCHES, bench_compile_s, compiles, micro_batches_of, slice_batch
from trainspeed.plan.inputs import PlanInputs, bench_row
from trainspeed.plan.model import goal_run
from trainspeed.plan.plan import PlanGrid
from trainspeed.plan.run_costs import first_step_excess, first_validation_excess, steady_validation_s
from trainspeed.plan.steps import StepsModel, auto_phases
from trainspeed.report.page import slug
from trainspeed.subcommands import CommandFailed, run_trainspeed, shown
from trainspeed.train.config import LaunchConfig, TrainConfig
from trainspeed.train.flags import train_command
from trainspeed.train.rows import CONFIG_FILE
from trainspeed.train.runs import TrainRun
from trainspeed.user_json import check_rows_file

PROCESS_START_S = 5.0
"""A trainspeed command's start (imports, the model, the data) where no run given recorded one."""
COMPILE_GUESS_S = 30.0
"""One graph's compilation on a compiled target where nothing given measured one."""
SHUTDOWN_S = 1.0
"""A run's end after its last step (its checkpoint, the ranks' exit)."""
BENCH_TIMING = TimingPlan(warmup_steps=3, windows=3, min_window_s=0.5)
"""The plan's bench timing: 3 windows of at least 0.5 s after 3 warm-up steps."""
RUN_SAMPLES = 16384
"""A short run's samples: between 20 and 120 steps of its batch."""
EVAL_BATCHES = 2
"""A short run validates three times (at a third, two thirds and its end), on this many batches per
rank: a validation's pause is read between the windows around it, so the end's is not measured,
and the first validation's compilation is its pause beyond a later one's."""


@dataclass(frozen=True)
class Measurement:
    """One command the plan may run: what it measures, its command, its estimated seconds, where it writes."""

    what: str
    command: tuple[str, ...]
    estimate_s: float
    output: Path

    def line(self) -> str:
        return f"~{self.estimate_s:,.0f} s: {self.what}"


@dataclass(frozen=True)
class BenchWant:
    """A target's bench rows the plan lacks, most needed first, and what each batch is estimated to cost."""

    target: str
    batches: tuple[int, ...]
    batch_s: tuple[float, ...]
    start_s: float
    workload: str
    """The workload as the bench names it (a user's module as `package.module:factory`)."""


@dataclass(frozen=True)
class Estimates:
    """What the inputs say a measurement costs here."""

    inputs: PlanInputs
    base: TrainRun | None
    base_config: TrainConfig | None

    def process_start_s(self, devices: int = 1) -> float:
        starts = [run.row.startup_s for run in self.inputs.runs
                  if run.row.world_size == devices and run.row.startup_s is not None]
        if starts:
            return statistics.median(starts)  # type: ignore[type-var]
        one = [run.row.startup_s for run in self.inputs.runs if run.row.startup_s is not None]
        return (statistics.median(one) if one else PROCESS_START_S) * devices  # type: ignore[type-var]

    def step_s(self, target: str, batch: int) -> float:
        """One step at this per-device batch: the bench row, else the target's nearest row scaled by
        the batch, else the base run's step scaled so, else a millisecond per sample."""
        read = bench_row(self.inputs, target, batch)
        if read is not None:
            return batch / read.row.samples_per_s  # type: ignore[operator]
        rows = [read for read in self.inputs.bench if read.row.target == target and read.row.samples_per_s]
        if rows:
            near = min(rows, key=lambda read: abs(math.log(read.row.batch_size / batch)))
            return batch / near.row.samples_per_s  # type: ignore[operator]
        if self.base is not None:
            return self.base.row.step_time_s * batch / self.base.row.batch_size_per_device
        return 1e-3 * batch

    def compile_s(self, target: str) -> float:
        """One graph's compilation: the most any bench row or run of the target measured, else the guess."""
        if not compiles(target):
            return 0.0
        found = [excess for read in self.inputs.bench
                 if read.row.target == target and (excess := bench_compile_s(read.row)) is not None]
        found += [excess.seconds for run in self.inputs.runs if run.row.target == target
                  if (excess := first_step_excess(run)) is not None]
        return max(found) if found else COMPILE_GUESS_S

    def bench_batch_s(self, target: str, batch: int) -> float:
        step = self.step_s(target, batch)
        return (self.compile_s(target) + (BENCH_TIMING.warmup_steps + 2) * step
                + 1.5 * BENCH_TIMING.windows * max(BENCH_TIMING.min_window_s, step))

    def validation_s(self) -> float:
        values = steady_validation_s(self.base) if self.base is not None else []
        return min(1.0, statistics.median(values)) if values else 1.0

    def run_s(self, target: str, devices: int, batch: int, steps: int) -> float:
        return (self.process_start_s(devices) + steps * self.step_s(target, batch) + 2 * self.compile_s(target)
                + 3 * self.validation_s() + SHUTDOWN_S)


def base_config(inputs: PlanInputs, model: StepsModel) -> tuple[TrainConfig | None, str]:
    """The settings a short run is made of: the base run's (its `train_config.json`), else the
    study's recipe; None with the reason where neither is here."""
    base = model.base_run or goal_run(inputs)
    if base is not None:
        path = Path(str(base.source)).parent / CONFIG_FILE
        if path.is_file():
            from trainspeed.user_json import read_utf8

            return TrainConfig.from_json(read_utf8(path, str(path)), str(path)), f"the settings of run {path.parent}"
        if inputs.settings is None:
            return None, f"run {path.parent} holds no {CONFIG_FILE} (its data and settings)"
    if inputs.settings is not None:
        from trainspeed.train.goal_runs import GoalRecipe

        settings = inputs.settings
        recipe = GoalRecipe.from_settings(settings.settings, settings.size, settings.base_lr, settings.reference_batch)
        batch = settings.settings.global_batches[0]
        return recipe.run_config(batch, 1.0, 0, Path("run")), f"the recipe of study {settings.study_id}"
    return None, "no base run or study settings"


def bench_threads(inputs: PlanInputs, model: StepsModel) -> int | None:
    """The torch threads the bench rows are measured at: those the plan's runs train at (the base
    run's settings, else the study's recipe; else a run given), so that the bench times the steps
    and the compilations the runs will make: a run's efficiency against the bench corrects its
    steps, never its compilations. A count beyond this machine's CPUs is left to the short run's
    own check, whose one line says which settings it came from."""
    from trainspeed.flags import machine_cpus

    config, _ = base_config(inputs, model)
    wanted = config.threads if config is not None and config.threads else next(
        (run.row.threads for run in inputs.runs if run.row.threads), None)
    return wanted if wanted is not None and wanted <= machine_cpus() else None


def measured_workload(inputs: PlanInputs, config: TrainConfig | None, workload: str | None) -> str:
    """The workload the measurements run: the base run's (as its settings name it, a module of the
    user's own included), else the study's, else the rows' name. A module of the user's own that
    only the inputs name is refused: rows are data and never choose code to run."""
    from trainspeed.workloads import is_users_module

    named = (config.workload if config is not None else
             inputs.settings.settings.workload if inputs.settings is not None else inputs.identity.name)
    if workload is not None and workload != named:
        raise UsageError(f"plan: --workload {workload}: the inputs were measured on {named}; --measure runs that "
                         "workload, so give its name or leave --workload out")
    if workload is None and is_users_module(named):
        raise UsageError(f"plan: --measure would import {named}, a module the inputs name; rows are data and never "
                         f"choose code to run: give --workload {named} if it is yours to run")
    return named


def per_device_batches(grid: PlanGrid, model: StepsModel, micro_batches: int) -> list[int]:
    """Every per-device batch the grid's configurations run, and on one rank the slices they step in."""
    found: list[int] = []
    for devices in grid.devices:
        if "fixed" in grid.schedules:
            found += [batch // devices for batch in grid.global_batches if batch % devices == 0]
        extent = grid.auto_range(devices)
        segments = model.segments() if "auto" in grid.schedules else None
        growing = ([phase.global_batch // devices for phase in auto_phases(segments, *extent)]
                   if extent is not None and segments is not None else [])
        if devices == 1:  # its step time, and a compiled target's graph, at the slice
            found += [slice_batch(batch, micro_batches) for batch in found]
        found += growing
        if devices == 1:  # a one-rank auto run always steps in micro-batches
            found += [slice_batch(batch, max(AUTO_MICRO_BATCHES, micro_batches)) for batch in growing]
    return list(dict.fromkeys(found))


def short_run(config: TrainConfig, target: str, devices: int, batch: int, out: Path) -> TrainConfig:
    """The base settings as a short run: `target` on `devices` at `batch` per device, 20 to 120 steps,
    validated at a third, two thirds and its end on a few batches (two pauses measured between
    windows: the first's compilation beyond the second), no goal, no checkpoint before its end."""
    steps = max(20, min(120, RUN_SAMPLES // (batch * devices)))
    micro = config.noise_scale_micro_batches if devices == 1 and batch % config.noise_scale_micro_batches == 0 else 1
    return dataclasses.replace(
        config, target=target, batch_size_per_device=batch, steps=steps, epochs=None, samples=None, seed=0,
        launch=LaunchConfig(nproc=devices, collective_timeout_s=config.launch.collective_timeout_s),
        out_dir=str(out), resume=False, checkpoint_every=0, eval_every=steps // 3, eval_every_samples=0,
        eval_batches=EVAL_BATCHES, until=None, stop_at_target=False, noise_scale_micro_batches=micro,
        log_every=max(1, steps // 6), bench_jsonl=None, progress=False)


def lacking(inputs: PlanInputs, grid: PlanGrid, model: StepsModel, micro_batches: int, out: Path,
            workload: str | None = None) -> tuple[list[BenchWant], list[Measurement], str | None]:
    """The bench rows and the short runs the plan lacks, most needed first, each estimated; and why
    no run can be measured, where none can. `workload`: the user's --workload (UsageError where the
    inputs name a module of the user's own and it does not)."""
    base = model.base_run or goal_run(inputs)
    config, from_where = base_config(inputs, model)
    named = measured_workload(inputs, config, workload)
    costs = Estimates(inputs, base, config)
    first_target = base.row.target if base is not None else (inputs.settings.settings.target if inputs.settings else None)
    first_batch = slice_batch(base.row.batch_size_per_device, micro_batches_of(base)) if base is not None else None
    targets = sorted(grid.targets, key=lambda target: target != first_target)
    wants = []
    for target in targets:
        needed = per_device_batches(grid, model, micro_batches)
        needed = sorted(needed, key=lambda batch: (batch != first_batch or target != first_target, batch))
        missing = tuple(batch for batch in needed if bench_row(inputs, target, batch) is None)
        if missing:
            wants.append(BenchWant(target, missing, tuple(costs.bench_batch_s(target, batch) for batch in missing),
                                   costs.process_start_s(), named))
    runs: list[Measurement] = []
    if config is None:
        return wants, runs, from_where
    from trainspeed.workloads import data_missing_for

    missing = data_missing_for(named, config.size, config.data) if config.data and not config.synthetic_data else None
    if missing is not None:
        return wants, runs, (f"they would train on the data {config.data} of {from_where}, which is not here "
                             f"({missing}); run the plan from the folder the base run ran in")
    run_target = first_target or config.target
    have = {run.row.world_size for run in inputs.runs if not run.row.synthetic_data}
    for devices in grid.devices:
        if devices in have:
            continue
        global_batch = base.row.global_batch if base is not None else config.global_batch
        batch = global_batch // devices if global_batch % devices == 0 else max(1, global_batch // devices)
        runs.append(_run(costs, config, run_target, devices, batch, out, f"{devices}-device start-up and efficiency"))
    for target in targets:
        if not compiles(target):
            continue
        for batch in per_device_batches(grid, model, 1):
            measured = [run for run in inputs.runs if run.row.target == target and run.row.batch_size_per_device == batch
                        and first_validation_excess(run) is not None]
            if not measured:
                runs.append(_run(costs, config, target, 1, batch, out, "its validation graph's compilation"))
    return wants, runs, None


def _run(costs: Estimates, config: TrainConfig, target: str, devices: int, batch: int, out: Path,
         why: str) -> Measurement:
    folder = out / "runs" / slug(f"ranks{devices}", target, f"b{batch}")
    run_config = short_run(config, target, devices, batch, folder)
    return Measurement(f"a short run of {target} on {devices} device(s) at {batch}/device ({why})",
                       tuple(train_command(run_config)), costs.run_s(target, devices, batch, run_config.steps or 0),
                       folder)


def bench_measurement(inputs: PlanInputs, want: BenchWant, batches: Sequence[int], out: Path,
                      threads: int | None) -> Measurement:
    config = BenchConfig(workload=want.workload, size=inputs.identity.size, targets=[want.target],
                         batch_sizes=sorted(batches), out=out / "bench.jsonl", plan=BENCH_TIMING, threads=threads)
    estimate = want.start_s + sum(seconds for batch, seconds in zip(want.batches, want.batch_s) if batch in batches)
    return Measurement(f"bench rows of {want.target} at {','.join(map(str, sorted(batches)))} per device",
                       tuple(bench_command(config)), estimate, out / "bench.jsonl")


def within_budget(inputs: PlanInputs, wants: Sequence[BenchWant], runs: Sequence[Measurement], budget_s: float,
                  out: Path, threads: int | None) -> tuple[list[Measurement], list[str]]:
    """The measurements the budget takes, in order (a bench with as many of its batches, most needed
    first, as fit), and a line for each left out; UsageError where even the smallest does not fit."""
    smallest = [(want.start_s + min(want.batch_s), f"bench rows of {want.target}") for want in wants]
    smallest += [(run.estimate_s, run.what) for run in runs]
    if not smallest:
        return [], []
    least, what = min(smallest)
    if least > budget_s:
        raise UsageError(f"plan: --budget-s {budget_s:g} is less than the smallest measurement (~{least:,.0f} s: "
                         f"{what}); give a larger budget, or the rows it would measure")
    chosen: list[Measurement] = []
    left_out: list[str] = []
    remaining = budget_s
    for want in wants:
        taken: list[int] = []
        for batch, seconds in zip(want.batches, want.batch_s):
            if want.start_s + sum(s for b, s in zip(want.batches, want.batch_s) if b in taken) + seconds <= remaining:
                taken.append(batch)
            else:
                left_out.append(f"bench of {want.target} at {batch}/device (~{seconds:,.0f} s more)")
        if taken:
            measurement = bench_measurement(inputs, want, taken, out, threads)
            chosen.append(measurement)
            remaining -= measurement.estimate_s
    for run in runs:
        if run.estimate_s <= remaining:
            chosen.append(run)
            remaining -= run.estimate_s
        else:
            left_out.append(run.line())
    return chosen, left_out


def check_measure_dir(out: Path) -> None:
    """A new or empty folder (the plan never writes over anyone's files), its bench file one the
    shared rows-file check lets bench rows be appended to."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"plan: --measure-dir {out} exists and is not an empty folder; name a new --measure-dir "
                         "(and give the rows an earlier one measured as inputs)")
    check_rows_file(out / "bench.jsonl", f"plan: --measure-dir {out}", kinds=(ResultRow.KIND,))


def run_measurements(measurements: Sequence[Measurement], budget_s: float) -> list[Path]:
    """Run each in turn while the budget holds its estimate; the outputs written."""
    started = time.monotonic()
    outputs: list[Path] = []
    for measurement in measurements:
        spent = time.monotonic() - started
        if spent + measurement.estimate_s > budget_s:
            print(f"measure: left out after {spent:,.0f} s of the budget: {measurement.line()}", flush=True)
            continue
        print(f"measure: {measurement.line()}\n  {shown(*measurement.command)}", flush=True)
        began = time.monotonic()
        try:
            run_trainspeed(*measurement.command)
        except CommandFailed as error:
            raise UsageError(f"plan: --measure: {error}") from None
        print(f"  took {time.monotonic() - began:,.1f} s", flush=True)
        if measurement.output not in outputs:
            outputs.append(measurement.output)
    return outputs

