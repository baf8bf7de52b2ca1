"""How `trainspeed plan` predicts the time to a goal of one configuration: a target, D devices, and
a global batch held fixed or one that grows (`auto`, from B_min doubling up to B_max):

    time = start-up(D) + compilations + sum over phases of steps trained x step(target, D, B / D)
           + validations x validation x D_measured / D

- the steps to the goal, and the phases of a growing batch: `trainspeed.plan.steps`;
- step(target, D, b) = b / (bench samples/s of the target at the batch a slice of the step runs on)
  / efficiency(D). The slice is b, or b/k where one rank steps in k micro-batches (a base run's
  recipe, and every one-rank `auto` run, to measure the noise scale): its forward and backward run
  k times on b/k, which on a small batch costs up to k times one pass over b, and on a large one
  about the same. The efficiency is a run's per-device samples/s over the bench's at its target and
  slice (data IO, the all-reduce, the loop), taken from a run of D devices (the nearest per-device
  batch, the same target where there is one). Where no run of D devices was given, the model is
  stated in the row: one device's efficiency with perfect scaling, or the bench alone. Where the
  bench lacks the slice's row, the whole batch's stands in for it, and the step time says so;
- start-up: with a study, the median over its runs of the command's seconds beyond the run's
  wall clock (start-up, the stop checkpoint, shutdown); with one base run, its own `startup_s`
  (command start to first step; shutdown is not measured). Starting D devices adds what the runs
  given measured (their start-up of D devices less that of the study's or base run's count);
- compilations: every graph a compiled target compiles (`trainspeed.plan.compiles`), at every
  per-device batch the run reaches; one nothing measured is "not measured" and left out, which
  the row says;
- validations: one per `eval_every_samples` (the study's, or the base run's cadence), each the
  median pause of the study's runs or of the base run's validations, shared by the D devices; a
  run trains and validates up to the first validation at or past the crossing, where it learns it
  met the goal (`stopping_point`).

The interval is one for the run a check makes, and draws every input that varies between that run
and the prediction: the steps of one run (`StepsModel.run_draws`: the study's bootstrap draws or
the base run's noise scale near the goal, at one seed's scatter, and between the bounds any critical
batch allows where the learning-rate rule was never tried near the batch, which the row calls
`extrapolated`; `trainspeed.plan.steps_spread`), the step time (the bench row's timed windows and
the efficiency run's windows, each a median resampled, and each bench row read at the scatter of
its target's rows about their curve, `trainspeed.plan.bench_scatter`), the start-up (one of the
runs', or one measured once at the scatter of one run's about another's) and the validation (its
pauses); the steps trained and the validations are counted in every draw, so the rounding to a
validation does not collapse the interval while anything else varies. Where nothing varies the
interval is one point, and the row says why. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from trainspeed.bench.results import ResultRow
from trainspeed.machine import Machine
from trainspeed.plan.bench_scatter import bench_scatter, row_factors
from trainspeed.plan.compiles import AUTO_MICRO_BATCHES, compilations, micro_batches_of, slice_batch, sliced_too
from trainspeed.plan.inputs import PlanInputs, bench_row
from trainspeed.plan.rows import Compilation, Phase
from trainspeed.plan.run_costs import steady_validation_s, steady_window_samples_per_s, validation_every_samples
from trainspeed.plan.steps import DRAWS, StepsModel, auto_phases, steps_model, stopping_phases
from trainspeed.plan.steps_spread import RunSpread
from trainspeed.report.inputs import Read
from trainspeed.stats import percentile_interval, resampled_medians
from trainspeed.train.runs import TrainRun
from trainspeed.train.time_to_target import parse_goal

__all__ = ["StepsModel", "steps_model", "bench_row", "predict", "predict_auto", "overheads", "Overheads",
           "Prediction", "stopping_point", "config_name", "auto_name"]


def _step_s(read: Read[ResultRow]) -> float:
    return read.row.batch_size / read.row.samples_per_s  # type: ignore[operator]


def _window_step_s(read: Read[ResultRow]) -> list[float]:
    """The seconds per step of each timed window of a bench row (its step time is their median)."""
    row = read.row
    if row.window_s and row.steps_per_window:
        return [seconds / row.steps_per_window for seconds in row.window_s if seconds > 0]
    return [_step_s(read)]


@dataclass(frozen=True)
class Efficiency:
    value: float
    source: str
    run: TrainRun | None = None
    """The run it was measured by (its windows are its spread); None where assumed."""
    bench: Read[ResultRow] | None = None
    """The bench row it was measured against."""

    def draws(self, generator: np.random.Generator, inputs: PlanInputs | None = None) -> np.ndarray:
        """The efficiency in every draw: the run's median window resampled, relative to its median,
        over its bench row's own draw of the rows' scatter (`bench_scatter`) where `inputs` are given."""
        windows = steady_window_samples_per_s(self.run) if self.run is not None else []
        spread = (resampled_medians(windows, generator, DRAWS) / statistics.median(windows) if len(windows) >= 2
                  else np.ones(DRAWS))
        if inputs is not None and self.bench is not None:
            spread = spread * row_factors(self.bench, bench_scatter(inputs.bench, self.bench.row.target), DRAWS)
        return self.value * spread


def slice_bench(inputs: PlanInputs, target: str, batch: int, micro_batches: int) -> Read[ResultRow] | None:
    """The bench row a step of `batch` per device in `micro_batches` slices costs as: the slice's,
    else the whole batch's."""
    return bench_row(inputs, target, slice_batch(batch, micro_batches)) or bench_row(inputs, target, batch)


def _run_bench(inputs: PlanInputs, run: TrainRun) -> Read[ResultRow] | None:
    """The bench row a run's steps are measured against: its slice's, else its batch's."""
    return slice_bench(inputs, run.row.target, run.row.batch_size_per_device, micro_batches_of(run))


def _run_efficiency(inputs: PlanInputs, run: TrainRun) -> float | None:
    bench = _run_bench(inputs, run)
    per_device = (run.row.steady_samples_per_s or run.row.end_to_end_samples_per_s) / run.row.world_size
    return per_device / bench.row.samples_per_s if bench is not None and per_device > 0 else None  # type: ignore[operator]


def efficiency(inputs: PlanInputs, target: str, devices: int, batch: int) -> Efficiency:
    """Runs of D devices against the bench, nearest per-device batch first, the same target first."""
    def candidates(count: int) -> list[tuple[TrainRun, float]]:
        found = [(run, _run_efficiency(inputs, run)) for run in inputs.runs
                 if run.row.world_size == count and not run.row.synthetic_data]
        return [(run, value) for run, value in found if value is not None]

    def nearest(found: list[tuple[TrainRun, float]]) -> tuple[TrainRun, float]:
        return min(found, key=lambda item: (item[0].row.target != target,
                                            abs(math.log(item[0].row.batch_size_per_device / batch))))

    measured = candidates(devices)
    if measured:
        run, value = nearest(measured)
        return Efficiency(value, f"{value:.2f} of the bench, measured by the {devices}-device run {run.source} "
                                 f"({run.row.target}, {run.row.batch_size_per_device}/device)", run,
                          _run_bench(inputs, run))
    single = candidates(1)
    if single:
        run, value = nearest(single)
        return Efficiency(value, f"{value:.2f} of the bench from the 1-device run {run.source}, with perfect scaling to "
                                 f"{devices} devices assumed (no {devices}-device run given)", run,
                          _run_bench(inputs, run))
    return Efficiency(1.0, "the bench alone: no run measured data IO or scaling (assumed perfect)")


@dataclass(frozen=True)
class StepTime:
    """Seconds per step of a target at D devices and a per-device batch: the value and its draws."""

    seconds: float
    draws: np.ndarray
    source: str
    bench: Read[ResultRow]
    scatter: str = ""
    """The bench rows' scatter its draws hold (`bench_scatter`), or why none ("" where nothing to say)."""


def step_time(inputs: PlanInputs, target: str, devices: int, batch: int, generator: np.random.Generator,
              micro_batches: int = 1) -> StepTime | None:
    """A step of `batch` per device, in `micro_batches` slices: the bench's seconds per sample at
    the slice, times the batch, over the efficiency."""
    bench = slice_bench(inputs, target, batch, micro_batches)
    if bench is None:
        return None
    scaling = efficiency(inputs, target, devices, batch)
    batches_per_step = batch / bench.row.batch_size  # the bench's steps one step of `batch` is worth
    bench_draws = resampled_medians(_window_step_s(bench), generator, DRAWS) * batches_per_step
    piece = slice_batch(batch, micro_batches)
    sliced = ""
    if piece != batch and bench.row.batch_size == piece:
        sliced = f" (a step of {batch} in {batch // piece} micro-batches of {piece})"
    elif piece != batch:
        sliced = f" (a step of {batch} in {batch // piece} micro-batches; no bench row at {piece}, so the whole batch's)"
    scatter = bench_scatter(inputs.bench, target)
    bench_draws = bench_draws * row_factors(bench, scatter, DRAWS)
    said = (scatter.source if scatter is not None else
            f"the scatter of {target}'s bench rows not measured (fewer than four rows)")
    return StepTime(_step_s(bench) * batches_per_step / scaling.value,
                    bench_draws / scaling.draws(generator, inputs),
                    f"bench {bench.row.samples_per_s:,.1f} samples/s at {bench.row.batch_size}/device{sliced}; "
                    f"efficiency {scaling.source}", bench, said)


COMMITTED_START_UPS = RunSpread(0.16, 66, "the committed studies' runs' start-up and shutdown about their study's "
                                         "(log sd 0.16, 66 degrees of freedom)")
"""`docs/results/time_to_target_study_{mahjong,charlm}.jsonl` and `named_time_to_target_gpt2.jsonl`:
the log of each run's command seconds beyond its wall clock, about its study's mean, pooled (tiny
Mahjong 0.27 over 22 degrees of freedom, two runs at a time; the char-LM example 0.03 over 30; hf:gpt2
0.08 over 14)."""
BASE_AND_CHECK_START_UPS = RunSpread(math.sqrt(2) * COMMITTED_START_UPS.log_sd, COMMITTED_START_UPS.degrees_of_freedom,
                                     f"the one measured and the check's, each at {COMMITTED_START_UPS.source}")
"""A start-up measured once (a base run's) is one run's, and the check's is another: their ratio
scatters by sqrt(2) times one run's."""


@dataclass(frozen=True)
class Overheads:
    overhead_s: float
    """Start-up, the stop checkpoint and shutdown of one run (on the study's or base run's device
    count): a study's runs' median; a base run's start-up alone."""
    validation_s: float
    eval_every_samples: int
    study_target: str | None
    study_devices: int
    source: str
    machine: Machine | None = None
    """The study's machine: its start-up and validation seconds hold for bench rows of that machine only."""
    startup_s: dict[int, float] = field(default_factory=dict)
    """Median start-up seconds (command start to first step) of the runs given, by device count."""
    overhead_values: tuple[float, ...] = ()
    """What `overhead_s` is the median of (the study's runs, or the base run's count's start-ups)."""
    validation_values: tuple[float, ...] = ()
    """What `validation_s` is the median of (each run's or each validation's seconds)."""
    micro_batches: int = 1
    """Slices of a one-rank step the planned runs take (a base run's recipe), each a graph of its own."""
    sliced: int = 1
    """Slices of the one step in K the planned runs measure their noise scale on, stepping the
    others whole (a base run's `--noise-scale-every` K > 1): both graphs are compiled."""

    def on(self, machine: Machine | None) -> "Overheads":
        """These overheads for bench rows of `machine`: left out (zero) where it is another one."""
        if self.machine is None or machine is None or _same_machine(self.machine, machine):
            return self
        return Overheads(0.0, 0.0, self.eval_every_samples, self.study_target, self.study_devices,
                         "start-up and validation left out: the study ran on another machine than the bench",
                         micro_batches=self.micro_batches, sliced=self.sliced)

    def at(self, devices: int) -> tuple[float, str]:
        """One run's overhead at `devices`: the study's, plus what the runs given say starting
        `devices` costs beyond starting the study's count."""
        if devices == self.study_devices or self.overhead_s == 0:
            return self.overhead_s, self.source
        if devices in self.startup_s and self.study_devices in self.startup_s:
            extra = self.startup_s[devices] - self.startup_s[self.study_devices]
            return max(0.0, self.overhead_s + extra), (
                f"{self.source}, {extra:+.1f} s to start {devices} devices instead of {self.study_devices} "
                f"(the runs given)")
        return self.overhead_s, f"{self.source}; starting {devices} devices assumed to cost the same (no runs of both)"

    def overhead_draws(self, devices: int, generator: np.random.Generator) -> np.ndarray:
        """The overhead of the one run a check makes, `DRAWS` draws: one of the runs measured at
        random (a study's), or, measured once (a base run's start-up), that value at one run's
        scatter about another's (`BASE_AND_CHECK_START_UPS`); shifted to `devices` as `at` says.
        One no run measured is that value in every draw."""
        value, _ = self.at(devices)
        if value == 0 or not self.overhead_values:
            return np.full(DRAWS, value)
        if len(self.overhead_values) == 1:
            return value * BASE_AND_CHECK_START_UPS.factors(DRAWS, generator)
        measured = np.asarray(self.overhead_values, dtype=float)
        return np.maximum(0.0, measured[generator.integers(0, measured.size, DRAWS)] + (value - self.overhead_s))

    def validation_draws(self, generator: np.random.Generator) -> np.ndarray:
        if len(set(self.validation_values)) < 2 or self.validation_s == 0:
            return np.full(DRAWS, self.validation_s)
        return resampled_medians(self.validation_values, generator, DRAWS)

    @property
    def start_up_drawn(self) -> bool:
        return self.overhead_s > 0 and bool(self.overhead_values)

    @property
    def start_up_said(self) -> str:
        """The start-up as the interval's line names it: how it was drawn, where it was."""
        if not self.start_up_drawn:
            return "the start-up"
        if len(self.overhead_values) > 1:
            return "the start-up (one of the runs')"
        return f"the start-up (measured once: {BASE_AND_CHECK_START_UPS.source})"

    @property
    def validation_drawn(self) -> bool:
        return len(set(self.validation_values)) > 1


def _same_machine(one: Machine, other: Machine) -> bool:
    return (one.hostname, one.cpu_model, one.cores_total) == (other.hostname, other.cpu_model, other.cores_total)


def goal_run(inputs: PlanInputs) -> TrainRun | None:
    """The base run: the first run given that met the goal."""
    threshold = parse_goal(inputs.until).threshold
    return next((run for run in inputs.runs if run.row.time_to_target is not None
                 and run.row.time_to_target.crossing_samples(threshold)), None)


def overheads(inputs: PlanInputs, base: TrainRun | None = None) -> Overheads:
    """The study's start-up and validation, or, with no study, the base run's (`base`, else the
    first run that met the goal)."""
    starts: dict[int, list[float]] = {}
    for run in inputs.runs:
        if run.row.startup_s is not None:
            starts.setdefault(run.row.world_size, []).append(run.row.startup_s)
    startup = {devices: statistics.median(values) for devices, values in starts.items()}
    runs = inputs.study_runs
    if runs and inputs.settings is not None:
        per_validation = [max(0.0, run.wall_s - run.train_s) / run.validations for run in runs if run.validations]
        overhead = [max(0.0, run.command_s - run.wall_s) for run in runs]
        return Overheads(overhead_s=statistics.median(overhead),
                         validation_s=statistics.median(per_validation) if per_validation else 0.0,
                         eval_every_samples=inputs.settings.settings.eval_every_samples,
                         study_target=inputs.settings.settings.target, study_devices=inputs.settings.settings.nproc,
                         source=f"start-up and validation: medians over the {len(runs)} runs of study "
                                f"{inputs.settings.study_id}", machine=runs[0].machine, startup_s=startup,
                         overhead_values=tuple(overhead), validation_values=tuple(per_validation))
    base = base or goal_run(inputs)
    if base is None:
        return Overheads(0.0, 0.0, 0, None, 1, "no study runs: start-up, shutdown and validation left out",
                         startup_s=startup)
    validations = steady_validation_s(base)
    same_count = tuple(starts.get(base.row.world_size, [])) if base.row.startup_s is not None else ()
    start = statistics.median(same_count) if same_count else None
    said = (f"start-up {start:,.1f} s (command start to first step: run {base.source}"
            + (f" and {len(same_count) - 1} more of {base.row.world_size} device(s), median)" if len(same_count) > 1
               else ")") if start is not None else f"start-up not recorded by run {base.source} (left out)")
    validation = (f"validation {statistics.median(validations):,.2f} s (median of its {len(validations)} measured)"
                  if validations else "validation not measured (left out)")
    return Overheads(overhead_s=start or 0.0, validation_s=statistics.median(validations) if validations else 0.0,
                     eval_every_samples=validation_every_samples(base) or 0, study_target=base.row.target,
                     study_devices=base.row.world_size,
                     source=f"{said}; {validation}; shutdown not measured (no study)", machine=base.row.machine,
                     startup_s=startup, overhead_values=same_count, validation_values=tuple(validations),
                     micro_batches=micro_batches_of(base), sliced=sliced_too(base))


@dataclass(frozen=True)
class Prediction:
    target: str
    devices: int
    global_batch: int
    missing: str | None = None
    predicted_s: float | None = None
    predicted_s_ci95: list[float] | None = None
    steps: float | None = None
    steps_ci95: list[float] | None = None
    steps_trained: float | None = None
    step_s: float | None = None
    step_s_from: str = ""
    samples_per_s: float | None = None
    statistical_efficiency: float | None = None
    goodput: float | None = None
    overhead_s: float | None = None
    compile_s: float | None = None
    validations: int | None = None
    validation_s: float | None = None
    sources: tuple[str, ...] = ()
    bench: Read[ResultRow] | None = None
    schedule: str = "fixed"
    """"fixed", or "auto": from `global_batch` doubling up to `batch_max`."""
    batch_max: int | None = None
    phases: tuple[Phase, ...] = ()
    """The batches the run trains at and the steps at each, to the validation where it stops."""
    compilations: tuple[Compilation, ...] = ()
    interval_from: str = ""
    """What the interval draws, and why it is one point where it is."""
    extrapolated: str | None = None
    """Why its steps are extrapolated (a batch where the learning-rate rule was never tried); None where not."""

    @property
    def config(self) -> str:
        if self.schedule == "auto":
            return auto_name(self.target, self.devices, self.global_batch, self.batch_max or self.global_batch)
        return config_name(self.target, self.devices, self.global_batch)


def stopping_point(steps: float, global_batch: int, eval_every_samples: int) -> tuple[float, int]:
    """The steps a run to the goal trains and the validations it runs: the crossing itself lies
    between two validations, but a `--stop-at-target` run learns of it only at the first validation
    at or past it (validation k comes at the first step of at least k x eval_every_samples samples),
    so it trains and validates up to that one. With no validation cadence, the crossing's steps."""
    if not eval_every_samples:
        return steps, 0
    validations = max(1, math.ceil(steps * global_batch / eval_every_samples - 1e-9))
    return float(math.ceil(validations * eval_every_samples / global_batch - 1e-9)), validations


def config_name(target: str, devices: int, global_batch: int) -> str:
    return f"{target}/{devices}/{global_batch}"


def auto_name(target: str, devices: int, batch_min: int, batch_max: int) -> str:
    return f"{target}/{devices}/auto:{batch_min}..{batch_max}"


def _trained_draws(phases: Sequence[Phase], ratio: np.ndarray, every: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per draw, with the steps to the crossing scaled by `ratio`: the steps trained at each phase
    but the last (draws, phases - 1), at the last, and the validations, counted as `stopping_phases`
    counts them."""
    steps = np.asarray([phase.steps for phase in phases])[None, :] * ratio[:, None]
    batches = np.asarray([phase.global_batch for phase in phases], dtype=float)
    if not every:
        return steps[:, :-1], steps[:, -1], np.zeros(len(ratio))
    samples = (steps * batches[None, :]).sum(axis=1)
    validations = np.maximum(1, np.ceil(samples / every - 1e-9))
    last = batches[-1]
    if len(phases) == 1:
        return steps[:, :-1], np.ceil(validations * every / last - 1e-9), validations
    more = np.ceil(np.maximum(0.0, validations * every - samples) / last - 1e-9)
    return steps[:, :-1], steps[:, -1] + more, validations


def predict(inputs: PlanInputs, model: StepsModel, costs: Overheads, target: str, devices: int,
            global_batch: int) -> Prediction:
    """A global batch held fixed: its steps drawn as one run's (`StepsModel.run_draws`), between the
    bounds any critical batch allows where the learning-rate rule was never tried near it."""
    steps = model.steps(global_batch)
    extrapolated = model.extrapolation([global_batch])
    draws = model.run_draws(global_batch, extrapolated is not None)
    return _predict(inputs, model, costs, target, devices, [Phase(global_batch, steps)], draws / steps,
                    list(percentile_interval(draws)),
                    Prediction(target, devices, global_batch, extrapolated=extrapolated))


def predict_auto(inputs: PlanInputs, model: StepsModel, costs: Overheads, target: str, devices: int,
                 batch_min: int, batch_max: int) -> Prediction:
    """A batch that starts at `batch_min` and doubles, up to `batch_max`, while the noise scale says
    the doubled batch still scales (`steps.auto_phases`). Its steps spread as one fixed run's at its
    samples-weighted mean batch; between the bounds any critical batch allows there where a batch
    it reaches lies where the learning-rate rule was never tried."""
    base = Prediction(target, devices, batch_min, schedule="auto", batch_max=batch_max)
    segments = model.segments()
    if segments is None:
        return _missing(base, "no profile of the critical batch over a run (a base run's noise-scale rows, or "
                              "critical-batch rows) to grow the batch by")
    phases = auto_phases(segments, batch_min, batch_max)
    samples = sum(phase.samples for phase in phases)
    steps = sum(phase.steps for phase in phases)
    mean_batch = samples / steps
    extrapolated = model.extrapolation([phase.global_batch for phase in phases])
    ratio = model.run_draws(mean_batch, extrapolated is not None) / model.steps(mean_batch)
    steps_interval = [steps * end for end in percentile_interval(ratio)]
    return _predict(inputs, model, costs, target, devices, phases, ratio, steps_interval,
                    dataclasses.replace(base, extrapolated=extrapolated))


def _missing(base: Prediction, why: str) -> Prediction:
    return Prediction(base.target, base.devices, base.global_batch, missing=why, schedule=base.schedule,
                      batch_max=base.batch_max, extrapolated=base.extrapolated)


def _predict(inputs: PlanInputs, model: StepsModel, costs: Overheads, target: str, devices: int,
             phases: list[Phase], ratio: np.ndarray, steps_interval: list[float] | None,
             base: Prediction) -> Prediction:
    generator = np.random.default_rng(0)
    per_device = [phase.global_batch // devices for phase in phases]
    micro = (max(AUTO_MICRO_BATCHES, costs.micro_batches) if base.schedule == "auto" else costs.micro_batches
             ) if devices == 1 else 1
    times = {batch: step_time(inputs, target, devices, batch, generator, micro) for batch in dict.fromkeys(per_device)}
    lacking = [slice_batch(batch, micro) for batch, found in times.items() if found is None]
    if lacking:
        sizes = ",".join(map(str, lacking))
        return _missing(base, f"no bench row of {target} at batch {sizes} (`trainspeed bench --targets {target} "
                              f"--batch-sizes {sizes}`)")
    first = times[per_device[0]]
    assert first is not None
    costs = costs.on(first.bench.row.machine)
    every = costs.eval_every_samples
    trained, validations = stopping_phases(phases, every)
    compiled = tuple(compilations(inputs, target, per_device, micro, validates=validations > 0,
                                  sliced=costs.sliced if devices == 1 and base.schedule == "fixed" else 1))
    compile_s = sum(item.seconds for item in compiled if item.seconds is not None)
    overhead_s, overhead_from = costs.at(devices)
    validation_share = costs.validation_s * costs.study_devices / devices
    step_seconds = [times[batch].seconds for batch in per_device]  # type: ignore[union-attr]
    training_s = sum(phase.steps * seconds for phase, seconds in zip(trained, step_seconds))
    predicted = overhead_s + compile_s + training_s + validations * validation_share

    step_draws = np.stack([times[batch].draws for batch in per_device], axis=1)  # type: ignore[union-attr]
    before, last, counted = _trained_draws(phases, ratio, every)
    totals = (costs.overhead_draws(devices, generator) + compile_s
              + (before * step_draws[:, :-1]).sum(axis=1) + last * step_draws[:, -1]
              + counted * costs.validation_draws(generator) * costs.study_devices / devices)
    interval = list(percentile_interval(totals))

    steps = sum(phase.steps for phase in phases)
    steps_trained = sum(phase.steps for phase in trained)
    samples = sum(phase.samples for phase in trained)
    samples_per_s = samples / training_s
    e_min = model.fit.e_min
    statistical = e_min / sum(phase.samples for phase in phases) if e_min > 0 else 1.0
    unmeasured = [item for item in compiled if item.seconds is None]
    return Prediction(
        target, devices, base.global_batch, predicted_s=predicted, predicted_s_ci95=interval, steps=steps,
        steps_ci95=steps_interval, steps_trained=steps_trained, step_s=training_s / steps_trained,
        step_s_from=first.source if len(times) == 1 else "; ".join(found.source for found in times.values()),  # type: ignore[union-attr]
        samples_per_s=samples_per_s, statistical_efficiency=min(1.0, statistical),
        goodput=samples_per_s * min(1.0, statistical), overhead_s=overhead_s, compile_s=compile_s,
        validations=validations, validation_s=costs.validation_s,
        sources=(str(first.bench.source), model.source, overhead_from,
                 *([f"{len(unmeasured)} compilation(s) not measured, left out of the time"] if unmeasured else [])),
        bench=first.bench, schedule=base.schedule, batch_max=base.batch_max, phases=tuple(trained),
        compilations=compiled, interval_from=_interval_from(model, costs, times, interval, base.extrapolated),
        extrapolated=base.extrapolated)


def _interval_from(model: StepsModel, costs: Overheads, times: dict[int, StepTime | None],
                   interval: list[float], extrapolated: str | None = None) -> str:
    """What the interval drew and what it could not (measured once), and why it is one point where it is."""
    found = [item for item in times.values() if item is not None]
    steps_vary = model.varies or extrapolated is not None
    step_time_varies = any(float(item.draws.min()) < float(item.draws.max()) for item in found)
    scatter = "; ".join(dict.fromkeys(item.scatter for item in found if item.scatter))
    steps_said = model.spread + (f"; extrapolated: {extrapolated}" if extrapolated else "")
    parts = [(steps_said, steps_vary),
             (f"the step time (the bench's timed windows, the efficiency run's windows{'; ' + scatter if scatter else ''})"
              if step_time_varies else "the step time (one timed window, or all alike)", step_time_varies),
             (costs.start_up_said, costs.start_up_drawn), ("the validation", costs.validation_drawn)]
    drawn = [text for text, varies in parts if varies]
    once = [text for text, varies in parts if not varies]
    said = ("draws " + ", ".join(drawn) if drawn else "draws nothing") + (
        "; measured once: " + ", ".join(once) if once else "")
    if interval[0] == interval[1]:
        said += "; one point: " + ("no input it draws varied" if not drawn else "every draw came out alike")
    return said
