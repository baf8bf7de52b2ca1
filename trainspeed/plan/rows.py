"""`trainspeed plan`'s rows: one per configuration it ranked (or could not, for want of rows), and
one per prediction it checked by running it. Torch-free: the report reads them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trainspeed.machine import Machine
from trainspeed.rows import Batch, NonNegative, Positive, PositiveInterval, Share


@dataclass(frozen=True)
class Phase:
    """A stretch of a run at one global batch: its steps (a batch held fixed is one phase)."""

    global_batch: Batch
    steps: NonNegative

    @property
    def samples(self) -> float:
        return self.global_batch * self.steps


@dataclass(frozen=True)
class Compilation:
    """One graph a run of a compiled target compiles: which, at which per-device batch, and its
    seconds (None: nothing measured it, and the predicted time leaves it out)."""

    graph: str
    """"training", "micro-batch" or "validation"."""
    batch: Batch
    seconds: NonNegative | None
    source: str

    def line(self) -> str:
        seconds = "not measured" if self.seconds is None else f"{self.seconds:,.1f} s"
        return f"{self.graph} graph at {self.batch}/device: {seconds} ({self.source})"


@dataclass(frozen=True)
class PlanRow:
    """One configuration (target, devices, global batch): its predicted time to the goal, how it was
    predicted and from which rows; or "not measured" with what is missing."""

    KIND: ClassVar[str] = "plan"
    SCHEMA_VERSION: ClassVar[int] = 1

    plan_id: str
    config: str
    """`target/devices/global batch`, as `--check` takes it."""
    target: str
    devices: Batch
    global_batch: Batch
    batch_size_per_device: Batch
    workload: str
    size: str
    until: str
    status: str
    """"predicted" or "not measured"."""
    missing: str | None
    """What a "not measured" configuration lacks."""
    rank: int | None
    """1 for the fastest predicted; None where not measured."""
    predicted_s: Positive | None
    """Start-up and shutdown + compilation + steps trained x step time + validations x validation time."""
    predicted_s_ci95: PositiveInterval | None
    """Over draws of the steps of one run (the model's spread, a seed's, and the bounds of an
    extrapolated batch), the step time (the bench's windows and the scatter of its rows, the
    efficiency run's windows), the start-up and the validation (`interval_from`). Rows of plans
    before the seeds and the extrapolation were drawn hold the model's mean steps only."""
    steps: Positive | None
    steps_ci95: PositiveInterval | None
    """The steps of one run to the goal, drawn as in `predicted_s_ci95`."""
    steps_from: str
    """"fit of study X" (S_min (1 + B_crit / B)) or "noise scale of run X" (McCandlish's model)."""
    step_s: Positive | None
    """Seconds per step at this many devices."""
    step_s_from: str
    samples_per_s: Positive | None
    """Global samples/s the step time gives: what samples/s alone ranks by."""
    statistical_efficiency: Share | None
    """E_min / E(B) = 1 / (1 + B / B_crit)."""
    goodput: NonNegative | None
    """samples_per_s x statistical_efficiency (Pollux): useful samples per second."""
    overhead_s: NonNegative | None
    """Start-up, stop checkpoint and shutdown of one run (median over the study's runs); with no
    study, the base run's start-up (command start to first step)."""
    compile_s: NonNegative | None
    """Every compilation measured (`compilations`); rows of older plans: the bench's first step over
    its steady step, beyond the study target's."""
    validations: int | None
    validation_s: NonNegative | None
    """Seconds per validation (median over the study's runs)."""
    recommended: bool
    samples_per_s_pick: bool
    """The configuration samples/s alone would pick (the most global samples/s)."""
    vs_recommended: Positive | None
    """predicted_s / the recommended configuration's."""
    sources: list[str]
    """The rows each number came from (file:line, run directories)."""
    command: str
    machine: Machine | None = None
    """The machine of the bench rows the step time came from."""
    steps_trained: Positive | None = None
    """The steps the run trains: up to the first validation at or past the crossing `steps`, where
    it learns it met the goal (None in rows of plans that counted the crossing's steps)."""
    schedule: str = "fixed"
    """"fixed": the global batch held; "auto": from `global_batch` doubling up to `batch_max` while
    the noise scale says the doubled batch still scales."""
    batch_max: Batch | None = None
    phases: list[Phase] | None = None
    """The global batches the run trains at and the steps at each, to the validation where it stops."""
    compilations: list[Compilation] | None = None
    """Every graph the run compiles ([] on an eager target; None in rows of plans that counted one)."""
    interval_from: str | None = None
    """What the interval draws (steps, step time, start-up, validation), and why it is one point where it is."""
    extrapolated: bool = False
    """True where the learning-rate rule was never tried near a batch the run trains at (outside a
    study's batches, more than 2x from a base run's): the steps are then bounded only by perfect
    scaling from the nearest batch tried and no gain over it, and the interval spans both (rows of
    older plans: False, not assessed)."""
    extrapolated_why: str | None = None
    """Which batch lies where, in one line."""


@dataclass(frozen=True)
class PlanCheckRow:
    """One configuration of a plan run to the goal: predicted against measured."""

    KIND: ClassVar[str] = "plan-check"
    SCHEMA_VERSION: ClassVar[int] = 1

    plan_id: str
    config: str
    target: str
    devices: Batch
    global_batch: Batch
    workload: str
    size: str
    until: str
    recommended: bool
    samples_per_s_pick: bool
    predicted_s: Positive
    predicted_s_ci95: PositiveInterval | None
    measured_s: Positive
    """The whole `trainspeed train` command, to its stop at the goal."""
    ratio: Positive
    """measured_s / predicted_s."""
    within: bool | None
    """The ratio lies within 1 +- tolerance; None where the plan row was `extrapolated`: its steps
    were bounded, not predicted, so the check is judged by its interval alone (`inside`). Rows of
    older plans held those to the tolerance too; they read as judged by their interval all the same."""
    tolerance: Positive
    predicted_steps: Positive
    measured_steps: Positive | None
    """Interpolated between the validations bracketing the crossing (None: the goal was not met)."""
    predicted_step_s: Positive
    measured_step_s: Positive | None
    """Training seconds to the crossing over its steps (its compilations in them)."""
    reached: bool
    seed: int
    run_dir: str
    command: str
    machine: Machine | None = None
    schedule: str = "fixed"
    """"fixed", or "auto": `trainspeed train --batch-schedule auto` from `global_batch` up to `batch_max`."""
    batch_max: Batch | None = None
    batches: list[Batch] | None = None
    """auto: the global batches the run trained at, in order (its summary's switches)."""
    inside: bool | None = None
    """The measured seconds lie inside `predicted_s_ci95` (None: no interval, or a row of an older plan)."""
    extrapolated: bool = False
    """The plan row's `extrapolated`: its steps were bounded, not predicted (False in older rows)."""
    steady_step_s: Positive | None = None
    """A step after the run's first steps (its global batch over its steady samples/s): the step
    time `predicted_step_s` predicts, without the compilations `measured_step_s` holds. None for
    auto (its batch changes), a run too short to have one, and rows of older plans."""
    measured_from: str = "command"
    """"command": the plan ran the check (`measured_s` is its whole `trainspeed train` command);
    "run": a run made before, set beside the plan (`plan --checked`; `measured_s` is the run's
    start-up and its wall seconds to the goal, as it recorded them)."""
    bench_samples_per_s: Positive | None = None
    """`--check-rebench`: the plan's bench row the step time came from (None without it)."""
    rebench_samples_per_s: Positive | None = None
    """That row measured again just before the configuration's first check run (`plan.speed_now`)."""
    rebench_compile_s: NonNegative | None = None
    """The re-bench's first step beyond its steady one (None on an eager target)."""
    predicted_s_now: Positive | None = None
    """The prediction at the machine's speed now: its steps and validations at the step time the
    re-bench measured, its compilations at its compile, its start-up as planned."""
    predicted_s_now_ci95: PositiveInterval | None = None
    """`predicted_s_ci95` at the speed now: each end moved as the point is (`plan.speed_now`)."""
    ratio_now: Positive | None = None
    """measured_s / predicted_s_now."""
    inside_now: bool | None = None
    """The measured seconds lie inside `predicted_s_now_ci95`."""
    within_now: bool | None = None
    """ratio_now within 1 +- tolerance; None where not re-benched, or extrapolated (judged by its interval)."""
    rebench_source: str | None = None
    """The re-bench's row (file:line)."""
