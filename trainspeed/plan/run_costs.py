"""What one run's own rows say about the costs of a run like it, read from a run directory
(`trainspeed.train.runs.TrainRun`): its start-up, each validation's pause, its step time window by
window, what its first step and its first validation took beyond the steady ones (where a compiled
target compiles its training and its validation graphs), how often it validated, and its gradient
noise scale near the goal and over the run.

A plan without a study reads all of this from the one run that met the goal (the base run), and
from the short runs it was given; with a study, from the same runs where the study's rows lack it.
Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from trainspeed.gradients.rows import NoiseScaleRecord
from trainspeed.train.runs import TrainRun


@dataclass(frozen=True)
class ValidationPause:
    """The seconds one validation paused its run (the validation, and a checkpoint at its step)."""

    step: int
    seconds: float


def validation_pauses(run: TrainRun) -> list[ValidationPause]:
    """Each validation's pause, in order, up to the first that met the goal (every one where the
    run had no goal or missed it), read from the run's clocks: a `train` row records the run's
    seconds with and without pauses (`run_wall_s`, `run_train_s`), so the pause of a validation is
    what their difference grew by from the window row at or before it to the next; the last one
    (the one that met the goal, where the run stopped) ends at its time-to-target row's `wall_s`.
    A validation that shares its window with another is left out (their pauses cannot be told
    apart); none where the rows hold no run clocks (rows of older runs)."""
    record = run.time_to_target
    last = record.step if record is not None and record.reached else None
    validations = sorted(run.validations(last))
    windows = [(row.step, row.run_wall_s - row.run_train_s) for row in run.train_curve
               if row.run_wall_s is not None and row.run_train_s is not None]
    if not windows:
        return []
    pauses = []
    for index, step in enumerate(validations):
        before = max((paused for at, paused in windows if at <= step), default=0.0)
        after_rows = [(at, paused) for at, paused in windows if at > step]
        if after_rows:
            next_step, after = after_rows[0]
            if index + 1 < len(validations) and validations[index + 1] < next_step:
                continue
        elif record is not None and record.reached and record.step == step:
            after = record.wall_s - record.train_s
        else:
            continue
        pauses.append(ValidationPause(step, max(0.0, after - before)))
    return pauses


def validations_to(run: TrainRun, step: int) -> int:
    """How many validations the run ran up to `step`, that one included."""
    return len(run.validations(step))


def mean_validation_s(run: TrainRun) -> float | None:
    """Seconds per validation up to the goal from the time-to-target row alone (its pauses over
    its validations): for runs whose rows hold no run clocks."""
    record = run.time_to_target
    if record is None or not record.reached:
        return None
    count = validations_to(run, record.step)
    return max(0.0, record.wall_s - record.train_s) / count if count else None


def steady_window_samples_per_s(run: TrainRun) -> list[float]:
    """Global samples/s of each logged window after the first (the first holds the first step and
    any compilation): the spread of the run's throughput from window to window."""
    return [row.samples_per_s for row in run.train_curve[1:] if row.samples_per_s > 0]


@dataclass(frozen=True)
class FirstStepExcess:
    """What a run's first logged window took beyond as many steady steps: the first step's
    compilation on a compiled target (its training graph, and its micro-batch graph where it split
    its steps into micro-batches)."""

    seconds: float
    steady_step_s: float


def first_step_excess(run: TrainRun) -> FirstStepExcess | None:
    """From the first window's training seconds against the median step of the windows after it;
    None where the run logged fewer than two windows or was resumed (its first window is then
    another invocation's)."""
    windows = run.train_curve
    if len(windows) < 2 or run.row.first_step != 0:
        return None
    steady = statistics.median(row.step_time_s for row in windows[1:])
    first = windows[0]
    return FirstStepExcess(max(0.0, first.elapsed_s - first.step * steady), steady)


def first_validation_excess(run: TrainRun) -> float | None:
    """What the first validation took beyond the median of the later ones: a compiled target
    compiles its validation graph there. None with fewer than two validations measured."""
    pauses = validation_pauses(run)
    if len(pauses) < 2:
        return None
    return max(0.0, pauses[0].seconds - statistics.median(pause.seconds for pause in pauses[1:]))


def steady_validation_s(run: TrainRun) -> list[float]:
    """Each validation's seconds after the first (the first may compile), or the first alone where
    it is the only one measured; the mean from the time-to-target row where no pause is measured."""
    pauses = [pause.seconds for pause in validation_pauses(run)]
    if len(pauses) > 1:
        return pauses[1:]
    if pauses:
        return pauses
    mean = mean_validation_s(run)
    return [mean] if mean is not None else []


def validation_every_samples(run: TrainRun) -> int | None:
    """The samples between the run's validations: the median gap between consecutive ones (the
    first's own samples where it validated once), from the steps its `val` rows name. A run of
    `--eval-every STEPS` validated every STEPS x its batch samples, which the plan takes as its
    cadence at every batch (as `--eval-every-samples` would)."""
    batch = run.row.global_batch
    samples = [step * batch for step in sorted(run.validations())]
    if not samples:
        return None
    gaps = [after - before for before, after in zip(samples, samples[1:]) if after > before]
    return int(statistics.median(gaps)) if gaps else samples[0]


# --- the noise scale ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class NoiseReading:
    """A noise scale as a window measured it: its value, or, where |G|^2 was within its noise of 0
    (unresolved), no value and at most a lower bound."""

    value: float | None
    lower: float | None
    step: int
    source: str

    @property
    def resolved(self) -> bool:
        return self.value is not None


def reading_of(record: NoiseScaleRecord, source: str) -> NoiseReading:
    """One noise-scale row as a reading: its smoothed B_simple where the row resolves it. A row
    that says it is unresolved (`resolved` false), or whose B_simple is missing or not above 0,
    has no value; its `b_simple_lower`, where it gives one, bounds it from below. (`resolved` None
    or absent: a row that was not assessed, read by its value.)"""
    value = record.b_simple_avg
    lower = getattr(record, "b_simple_lower", None)
    if getattr(record, "resolved", None) is False or value is None or not value > 0 or not math.isfinite(value):
        return NoiseReading(None, lower if lower is not None and lower > 0 else None, record.step, source)
    return NoiseReading(value, None, record.step, source)


def _network_rows(run: TrainRun) -> list[NoiseScaleRecord]:
    """The noise-scale rows of the run's first network by name (the one the summary names first)."""
    rows = run.noise_curve
    if not rows:
        return []
    network = min(row.network for row in rows)
    return [row for row in rows if row.network == network]


def noise_near(run: TrainRun, step: int) -> NoiseReading | None:
    """The noise scale of the last window at or before `step` (the goal's crossing): B_simple near
    the goal. Where that window is unresolved (one window's |G|^2 is often within its noise of 0)
    and the summary's reading over the last quarter of the run resolved, the quarter's: it pools
    more steps near the goal, where a lower bound of one window would predict at the bound. Where
    the rows hold no noise-scale windows, the summary's."""
    rows = [row for row in _network_rows(run) if row.step <= step]
    quarter = _last_quarter(run)
    if rows:
        window = reading_of(rows[-1], f"the noise-scale row of step {rows[-1].step} of {run.source}")
        if window.resolved or quarter is None or not quarter.resolved:
            return window
        return dataclasses.replace(quarter, source=f"{quarter.source}; the window before the goal, step "
                                                   f"{rows[-1].step}, was unresolved")
    return quarter


def _last_quarter(run: TrainRun) -> NoiseReading | None:
    """The summary's noise scale over the last quarter of the run's steps, as a reading."""
    readings = run.row.last_quarter_noise_scale()
    if not readings:
        return None
    reading = readings[min(readings)]
    summary = f"the summary of {run.source} (last quarter of its steps)"
    if reading.resolved is False or reading.value is None or not reading.value > 0:
        lower = reading.lower_bound if reading.lower_bound is not None and reading.lower_bound > 0 else None
        return NoiseReading(None, lower, run.row.last_step, summary)
    return NoiseReading(reading.value, None, run.row.last_step, summary)


def noise_rows_near(run: TrainRun, step: float, share: float) -> list[NoiseScaleRecord]:
    """The noise-scale rows of the run's first network in the last `share` of its steps up to
    `step` (the goal's): the readings near the goal, whose spread the plan draws."""
    return [row for row in _network_rows(run) if (1 - share) * step <= row.step <= step]


@dataclass(frozen=True)
class NoiseWindow:
    """One logged window of the base run as the profile of its noise scale reads it: its steps and
    what it measured."""

    steps: float
    reading: NoiseReading


def noise_windows(run: TrainRun, until_step: float) -> list[NoiseWindow]:
    """The run's noise-scale windows up to `until_step` (the last one cut there), each with the
    steps it spans."""
    windows = []
    previous = run.row.first_step
    for row in _network_rows(run):
        end = min(float(row.step), until_step)
        if end > previous:
            windows.append(NoiseWindow(end - previous, reading_of(row, f"{run.source}")))
        previous = row.step
        if row.step >= until_step:
            break
    if windows and previous < until_step:  # the crossing lies past the last window logged: its reading holds there
        windows.append(NoiseWindow(until_step - previous, windows[-1].reading))
    return windows
