"""How `trainspeed plan` predicts the time to a goal of one configuration (target, devices D, global batch B):

    time = overhead + compilation + steps(S(B)) x step(target, D, B / D) + validations(S(B)) x validation / D

- S(B), the steps to the goal, depend on the batch and the recipe, not on the device: from a
  time-to-target study's fit S_min (1 + B_crit / B) with its bootstrap draws, or, with no study,
  from one run that met the goal and measured its noise scale, by McCandlish et al.'s model
  S = S_min (1 + B_noise / B), S_min set so that it passes through that run's steps. B_noise is
  the run's noise scale over its last quarter where that is resolved; an unresolved one is only a
  lower bound (`trainspeed.gradients.rows`), never taken as a value: such a run is left out, and
  the steps' source says so.
- step(target, D, b) = b / (bench samples/s of the target at per-device batch b) / efficiency(D):
  the efficiency is a run's per-device samples/s over the bench's at its target and per-device batch
  (data IO, the all-reduce, the loop), taken from a run of D devices (the nearest per-device batch,
  the same target where there is one). Where no run of D devices was given, the model is stated in
  the row: one device's efficiency with perfect scaling, or the bench alone.
- overhead (start-up, the stop checkpoint, shutdown) and seconds per validation are medians over the
  study's runs, and starting D devices adds what the runs given measured (their start-up of D
  devices less that of the study's count); validations are one per `eval_every_samples`, shared by
  the D devices, and a run trains and validates up to the first validation at or past the
  crossing, where it learns it met the goal (`stopping_point`); compilation is the bench's first
  step beyond its steady step, less the study target's.

The interval is the steps' (the throughput is taken as measured). Nothing here imports torch.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.gradients.rows import UNRESOLVED_REASON
from trainspeed.machine import Machine
from trainspeed.plan.inputs import PlanInputs
from trainspeed.report.inputs import Read
from trainspeed.stats import StepsFit, percentile_interval
from trainspeed.train.runs import TrainRun
from trainspeed.train.time_to_target import parse_goal


@dataclass(frozen=True)
class StepsModel:
    fit: StepsFit
    draws: list[StepsFit]
    source: str

    def steps(self, batch: int) -> float:
        return self.fit.steps(batch)

    def interval(self, batch: int) -> list[float] | None:
        if not self.draws:
            return None
        return list(percentile_interval([draw.steps(batch) for draw in self.draws]))


def steps_model(inputs: PlanInputs) -> StepsModel:
    """The study's fit where there is one; else McCandlish's model through one run's steps."""
    borrowed = ("" if inputs.steps_size == inputs.identity.size else
                f"; steps of size {inputs.steps_size} assumed for size {inputs.identity.size} (--borrow-steps)")
    if inputs.fit is not None:
        row = inputs.fit.row
        return StepsModel(StepsFit(row.s_min, row.e_min), [StepsFit(s, e) for s, e in row.draws],
                          f"fit of study {row.study_id} ({inputs.fit.source}){borrowed}")
    threshold = parse_goal(inputs.until).threshold
    unresolved: list[str] = []
    for run in inputs.runs:
        record, readings = run.row.time_to_target, run.row.last_quarter_noise_scale()
        samples = record.crossing_samples(threshold) if record is not None else None
        if samples is None or samples <= 0 or not readings:
            continue
        name, reading = next(iter(readings.items()))
        if reading.resolved is False:
            bound = "" if reading.lower_bound is None else f" > {reading.lower_bound:,.0f}"
            unresolved.append(f"run {run.source}'s B_simple of {name} is unresolved{bound} ({UNRESOLVED_REASON} "
                              "over its last quarter)")
            continue
        if reading.value is None or reading.value <= 0:
            continue  # a noise scale of 0 or below (a tr(Sigma) estimate below 0) predicts no steps
        b_noise = reading.value
        steps = samples / run.row.global_batch
        s_min = steps / (1 + b_noise / run.row.global_batch)
        assessed = "" if reading.resolved else " (not assessed for resolution: a summary written before that)"
        left_out = "".join(f"; left out: {reason}" for reason in unresolved)
        return StepsModel(StepsFit(s_min, s_min * b_noise), [],
                          f"McCandlish's model S_min (1 + B_noise / B) with B_noise {b_noise:,.0f}{assessed}, through "
                          f"the {steps:,.1f} steps of run {run.source} (no study: an estimate){borrowed}{left_out}")
    if unresolved:
        raise UsageError(f"plan: no study fit, and {'; '.join(unresolved)}: a lower bound is no B_noise to predict "
                         "steps from; give a time-to-target study's rows, or a run whose noise scale is resolved")
    raise UsageError("plan: no study fit and no run that met the goal with a noise scale above 0: give a time-to-target "
                     "study's rows, or a run of `trainspeed train --until ...` that met its goal")


def bench_row(inputs: PlanInputs, target: str, batch: int) -> Read[ResultRow] | None:
    """The newest ok bench row of the target at that per-device batch."""
    rows = [read for read in inputs.bench if read.row.target == target and read.row.batch_size == batch
            and read.row.samples_per_s]
    return max(rows, key=lambda read: read.row.timestamp) if rows else None


def _step_s(read: Read[ResultRow]) -> float:
    return read.row.batch_size / read.row.samples_per_s  # type: ignore[operator]


@dataclass(frozen=True)
class Efficiency:
    value: float
    source: str


def _run_efficiency(inputs: PlanInputs, run: TrainRun) -> float | None:
    bench = bench_row(inputs, run.row.target, run.row.batch_size_per_device)
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
                                 f"({run.row.target}, {run.row.batch_size_per_device}/device)")
    single = candidates(1)
    if single:
        run, value = nearest(single)
        return Efficiency(value, f"{value:.2f} of the bench from the 1-device run {run.source}, with perfect scaling to "
                                 f"{devices} devices assumed (no {devices}-device run given)")
    return Efficiency(1.0, "the bench alone: no run measured data IO or scaling (assumed perfect)")


@dataclass(frozen=True)
class Overheads:
    overhead_s: float
    """Start-up, the stop checkpoint and shutdown of one study run (on the study's device count)."""
    validation_s: float
    eval_every_samples: int
    study_target: str | None
    study_devices: int
    source: str
    machine: Machine | None = None
    """The study's machine: its start-up and validation seconds hold for bench rows of that machine only."""
    startup_s: dict[int, float] = field(default_factory=dict)
    """Median start-up seconds (command start to first step) of the runs given, by device count."""

    def on(self, machine: Machine | None) -> "Overheads":
        """These overheads for bench rows of `machine`: left out (zero) where it is another one."""
        if self.machine is None or machine is None or _same_machine(self.machine, machine):
            return self
        return Overheads(0.0, 0.0, self.eval_every_samples, self.study_target, self.study_devices,
                         "start-up and validation left out: the study ran on another machine than the bench")

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


def _same_machine(one: Machine, other: Machine) -> bool:
    return (one.hostname, one.cpu_model, one.cores_total) == (other.hostname, other.cpu_model, other.cores_total)


def overheads(inputs: PlanInputs) -> Overheads:
    starts: dict[int, list[float]] = {}
    for run in inputs.runs:
        if run.row.startup_s is not None:
            starts.setdefault(run.row.world_size, []).append(run.row.startup_s)
    startup = {devices: statistics.median(values) for devices, values in starts.items()}
    runs = inputs.study_runs
    if not runs or inputs.settings is None:
        return Overheads(0.0, 0.0, 0, None, 1, "no study runs: start-up, shutdown and validation left out",
                         startup_s=startup)
    per_validation = [max(0.0, run.wall_s - run.train_s) / run.validations for run in runs if run.validations]
    return Overheads(overhead_s=statistics.median(max(0.0, run.command_s - run.wall_s) for run in runs),
                     validation_s=statistics.median(per_validation) if per_validation else 0.0,
                     eval_every_samples=inputs.settings.settings.eval_every_samples,
                     study_target=inputs.settings.settings.target, study_devices=inputs.settings.settings.nproc,
                     source=f"start-up and validation: medians over the {len(runs)} runs of study "
                            f"{inputs.settings.study_id}", machine=runs[0].machine, startup_s=startup)


def compile_s(inputs: PlanInputs, target: str, batch: int, study_target: str | None) -> float:
    """The bench's first step beyond its steady one (compilation), less the study target's own."""
    def extra(name: str) -> float | None:
        read = bench_row(inputs, name, batch)
        if read is None or read.row.first_step_s is None:
            return None
        return max(0.0, read.row.first_step_s - _step_s(read))

    own = extra(target) or 0.0
    base = extra(study_target) if study_target else None
    return max(0.0, own - (base or 0.0))


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

    @property
    def config(self) -> str:
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


def predict(inputs: PlanInputs, model: StepsModel, costs: Overheads, target: str, devices: int,
            global_batch: int) -> Prediction:
    per_device = global_batch // devices
    bench = bench_row(inputs, target, per_device)
    if bench is None:
        return Prediction(target, devices, global_batch,
                          missing=f"no bench row of {target} at batch {per_device} (`trainspeed bench --targets {target} "
                                  f"--batch-sizes {per_device}`)")
    scaling = efficiency(inputs, target, devices, per_device)
    costs = costs.on(bench.row.machine)
    step_s = _step_s(bench) / scaling.value
    steps = model.steps(global_batch)
    trained, validations = stopping_point(steps, global_batch, costs.eval_every_samples)
    compiling = compile_s(inputs, target, per_device, costs.study_target)
    overhead_s, overhead_from = costs.at(devices)
    fixed = overhead_s + compiling

    def total(step_count: float) -> float:
        run_steps, run_validations = stopping_point(step_count, global_batch, costs.eval_every_samples)
        return fixed + run_steps * step_s + run_validations * costs.validation_s / devices

    interval = model.interval(global_batch)
    samples_per_s = global_batch / step_s
    efficiency_of_batch = model.fit.statistical_efficiency(global_batch)
    return Prediction(
        target, devices, global_batch, predicted_s=total(steps),
        predicted_s_ci95=[total(interval[0]), total(interval[1])] if interval else None,
        steps=steps, steps_ci95=interval, steps_trained=trained, step_s=step_s,
        step_s_from=f"bench {bench.row.samples_per_s:,.1f} samples/s at {per_device}/device; efficiency {scaling.source}",
        samples_per_s=samples_per_s, statistical_efficiency=efficiency_of_batch,
        goodput=samples_per_s * efficiency_of_batch, overhead_s=overhead_s, compile_s=compiling,
        validations=validations, validation_s=costs.validation_s, sources=(str(bench.source), model.source, overhead_from),
        bench=bench)
