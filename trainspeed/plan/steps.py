"""The steps to the goal at a global batch, and over a run whose batch grows.

Steps depend on the batch and the recipe, not on the device. They come from one of three sources,
the first the inputs hold:

- **a time-to-target study**: its fit S(B) = S_min (1 + B_crit / B), with its bootstrap draws;
- **one base run** that met the goal at batch B0 in S0 steps (interpolated between the two
  validations around the crossing), with its gradient noise scale near the goal B_noise (the
  window before the crossing), by McCandlish et al.'s model: the steps and samples to the goal
  trade along S(B) = S_min (1 + B_crit / B), and B_crit is about B_noise there, so
  S_min = S0 / (1 + B_noise / B0) and E_min = S_min x B_noise, which passes through the run's own
  steps at B0. The assumption: the noise scale near the goal stands for the critical batch of the
  whole run (the committed studies found it within 2x of the fitted B_crit);
- **critical-batch rows** of that base run (`CriticalBatchPoint`): the critical batch measured
  near the goal stands in for B_noise in the same model.

A noise scale that is unresolved near the goal (|G|^2 within its noise of 0) is no number: with a
lower bound L the steps at a batch above B0 lie between S(B) with B_noise = L and perfect scaling
through the run (S0 B0 / B, B_noise unbounded), and the plan predicts at L and says so in one line;
with no bound it refuses.

A growing batch (`auto`) follows McCandlish et al. (section 5 and appendix D): training is a
sequence of short segments, each with its own S_min and critical batch b; a segment of dS_min
optimal steps takes dS = dS_min (1 + b / B) steps at batch B, so a run of batch B(s) takes
S = integral of (1 + b / B) dS_min steps and E = integral of (B + b) dS_min samples. A batch held
fixed gives S_min + E_min / B back, with B_crit the S_min-weighted mean of b. The shape of b over the
run is the base run's (its noise scale window by window, or the critical-batch rows'); its level is
set so that its weighted mean is the B_crit of the fixed model (`Profile.calibrated`), so fixed
and auto configurations are predicted from one model, and the auto one with its batch held
fixed predicts what the fixed one does.

How far one run's steps may lie from the model's (a seed's scatter, the model's own draws, and a
batch where the learning-rate rule was never tried) is `trainspeed.plan.steps_spread`'s, drawn by
`StepsModel.run_draws`. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from trainspeed.errors import UsageError
from trainspeed.plan.inputs import CriticalBatchPoint, PlanInputs
from trainspeed.plan.rows import Phase
from trainspeed.plan.run_costs import NoiseReading, noise_near, noise_rows_near, noise_windows
from trainspeed.plan.steps_spread import (
    COMMITTED_STUDIES,
    NEAR_BASE_RUN,
    NEAR_GOAL_SHARE,
    RunSpread,
    TriedBatches,
    critical_batch_draws,
    extrapolated_factors,
    noise_scale_draws,
    one_run_spread,
    pooled_seed_spread,
)
from trainspeed.stats import StepsFit, percentile_interval
from trainspeed.train.runs import TrainRun
from trainspeed.train.time_to_target import parse_goal

DRAWS = 2000
"""Draws of every prediction's interval (the study's fits keep as many)."""
SEED = 1
"""The generator of the draws the steps model makes itself (a base run's noise scale, a run's seed):
the same draws at every batch and on every rerun."""


@dataclass(frozen=True)
class ProfilePiece:
    """A stretch of the base run: its steps, the critical batch's shape there (a measured noise
    scale or critical batch, before calibration), and what a run of `auto` batches measures there
    and doubles on (infinite where the measurement is unresolved: larger than any batch)."""

    steps: float
    level: float
    measured: float


@dataclass(frozen=True)
class Segment:
    """A stretch of training in optimal steps (`progress`, dS_min) with its critical batch `b`."""

    progress: float
    critical_batch: float
    measured: float


@dataclass(frozen=True)
class Profile:
    """How the critical batch changes over the base run (of global batch `base_batch`)."""

    base_batch: int
    pieces: tuple[ProfilePiece, ...]
    source: str

    def _progress(self, scale: float) -> list[float]:
        return [piece.steps / (1 + scale * piece.level / self.base_batch) for piece in self.pieces]

    def _mean(self, scale: float) -> float:
        progress = self._progress(scale)
        return sum(scale * piece.level * share for piece, share in zip(self.pieces, progress)) / sum(progress)

    def calibrated(self, b_crit: float, s_min: float) -> list[Segment]:
        """The pieces as segments whose critical batch is the shape times the one scale that makes
        its S_min-weighted mean `b_crit` (the mean grows with the scale, from 0 without bound, so one
        scale does), in progress summing to `s_min`. Where `b_crit` and `s_min` are the base run's
        (S_min = S0 / (1 + B_crit / B0)), the progress the run made sums to `s_min` by itself."""
        low, high = -40.0, 40.0  # log of the scale
        for _ in range(200):
            middle = (low + high) / 2
            if self._mean(math.exp(middle)) < b_crit:
                low = middle
            else:
                high = middle
        scale = math.exp((low + high) / 2)
        progress = self._progress(scale)
        total = sum(progress)
        return [Segment(share * s_min / total, scale * piece.level, piece.measured)
                for piece, share in zip(self.pieces, progress)]


@dataclass(frozen=True)
class StepsModel:
    fit: StepsFit
    draws: list[StepsFit]
    source: str
    bound: StepsFit | None = None
    """Where the noise scale near the goal was unresolved: perfect scaling through the base run,
    the other end of the steps from `fit` (which takes its lower bound)."""
    profile: Profile | None = None
    """The critical batch's shape over the run, which `auto` configurations are predicted with."""
    note: str | None = None
    """A line the verdict says (an unresolved noise scale and what was made of it)."""
    base_run: TrainRun | None = None
    """The run the steps were measured by (no study): its start-up and validations are the plan's too."""
    seeds: RunSpread | None = None
    """How one run's steps scatter about the model's from seed to seed (None: not drawn)."""
    tried: TriedBatches | None = None
    """The batches the learning-rate rule was tried at from the start of a run (None: not known, and
    nothing is called extrapolated)."""
    draws_from: str = ""
    """What `draws` are, as the interval's line says it."""

    def steps(self, batch: float) -> float:
        return self.fit.steps(batch)

    def interval(self, batch: float) -> list[float] | None:
        """The model's own interval of the steps at `batch` (its draws, or an unresolved noise
        scale's two ends): of the mean steps, not of one run's (`run_interval`)."""
        if self.bound is not None:
            return sorted([self.fit.steps(batch), self.bound.steps(batch)])
        if not self.draws:
            return None
        return list(percentile_interval([draw.steps(batch) for draw in self.draws]))

    def step_draws(self, batch: float, count: int = DRAWS) -> list[float] | None:
        """`count` draws of the steps at `batch`: the study's draws in turn, or the two ends of an
        unresolved noise scale's bound, half each; None where the steps have no spread (one run)."""
        if self.bound is not None:
            ends = (self.fit.steps(batch), self.bound.steps(batch))
            return [ends[index % 2] for index in range(count)]
        if not self.draws:
            return None
        return [self.draws[index % len(self.draws)].steps(batch) for index in range(count)]

    def run_draws(self, batch: float, extrapolated: bool = False, count: int = DRAWS) -> np.ndarray:
        """The steps of the one run a check makes at `batch`, `count` draws: the model's own draws
        (its value where it has none), each at one seed's scatter about them. `extrapolated`: the
        batch tried nearest to it, so drawn, at the two bounds any critical batch allows from there
        (perfect scaling, and no change), half the draws each."""
        generator = np.random.default_rng(SEED)
        seeds = self.seeds.factors(count, generator) if self.seeds is not None else np.ones(count)
        if extrapolated and self.tried is not None:
            anchor = self.tried.anchor(batch)
            return self._own_draws(anchor, count) * seeds * extrapolated_factors(batch, anchor, count)
        return self._own_draws(batch, count) * seeds

    def _own_draws(self, batch: float, count: int) -> np.ndarray:
        found = self.step_draws(batch, count)
        return np.asarray(found, dtype=float) if found is not None else np.full(count, self.steps(batch))

    def run_interval(self, batch: float, extrapolated: bool = False) -> list[float]:
        return list(percentile_interval(self.run_draws(batch, extrapolated)))

    def extrapolation(self, batches: Sequence[float]) -> str | None:
        """Why the steps at these batches are extrapolated (the rule never tried near one); None
        where they are not."""
        return self.tried.extrapolation(batches) if self.tried is not None else None

    @property
    def varies(self) -> bool:
        """Whether the steps of one run have a spread to draw."""
        return bool(self.draws) or self.bound is not None or (self.seeds is not None and self.seeds.log_sd > 0)

    @property
    def spread(self) -> str:
        if self.bound is not None:
            own = "the two ends of the unresolved noise scale's bound"
        elif self.draws:
            own = self.draws_from or f"{len(self.draws):,} bootstrap draws of the study's fit"
        else:
            own = ""
        seeds = f"one run's seed: {self.seeds.source}" if self.seeds is not None and self.seeds.log_sd > 0 else ""
        parts = [part for part in (own, seeds) if part]
        return f"the steps ({'; '.join(parts)})" if parts else "the steps (one run)"

    def segments(self) -> list[Segment] | None:
        """The run in optimal steps with its critical batch, calibrated to this model's S_min and
        B_crit; None where no profile was measured."""
        if self.profile is None or self.fit.s_min <= 0:
            return None
        return self.profile.calibrated(self.fit.b_crit, self.fit.s_min)


def steps_model(inputs: PlanInputs) -> StepsModel:
    """The study's fit where there is one; else McCandlish's model through the base run (the
    critical batch near the goal from critical-batch rows where given, else its noise scale)."""
    borrowed = ("" if inputs.steps_size == inputs.identity.size else
                f"; steps of size {inputs.steps_size} assumed for size {inputs.identity.size} (--borrow-steps)")
    threshold = parse_goal(inputs.until).threshold
    goal_runs = [run for run in inputs.runs if run.row.time_to_target is not None
                 and run.row.time_to_target.crossing_samples(threshold)]
    if inputs.fit is not None:
        row = inputs.fit.row
        fit = StepsFit(row.s_min, row.e_min)
        profile = next((found for found in (run_profile(run, threshold, inputs.critical_points) for run in goal_runs)
                        if found is not None), None)
        seeds = pooled_seed_spread(inputs.study_batches, row.study_id) or dataclasses.replace(
            COMMITTED_STUDIES, source=f"{COMMITTED_STUDIES.source}, assumed: the study's seeds are not among the inputs")
        return StepsModel(fit, [StepsFit(s, e) for s, e in row.draws],
                          f"fit of study {row.study_id} ({inputs.fit.source}){borrowed}", profile=profile, seeds=seeds,
                          tried=TriedBatches(tuple(row.batches), 1.0, "the study's batches") if row.batches else None,
                          draws_from=f"{len(row.draws):,} bootstrap draws of the study's fit")
    refusals = []
    for run in goal_runs:
        model = base_run_model(run, threshold, inputs.critical_points, borrowed)
        if isinstance(model, StepsModel):
            return model
        refusals.append(model)
    if refusals:
        raise UsageError(refusals[0])
    raise UsageError("plan: no study fit and no run that met the goal with a noise scale above 0: give a time-to-target "
                     "study's rows, or a run of `trainspeed train --until ...` that met its goal")


def grew_its_batch(run: TrainRun) -> str | None:
    """Why a run whose batch grew (a schedule that switched) is no base of the steps model, in one
    line; None for a run at one batch. McCandlish's model goes through the steps of one batch, and
    the run's steps at its last batch are not those (its samples over its last batch count its early
    small steps as fewer)."""
    schedule = run.row.batch_schedule
    if schedule is None or not schedule.switches:
        return None
    return (f"plan: run {run.source} grew its batch ({schedule.line()}): the steps model goes through the steps "
            "of one batch; plan from a run that trained at one batch, or give a critical-batch study of it")


def _crossing(run: TrainRun, threshold: float) -> tuple[float, int]:
    record = run.row.time_to_target
    assert record is not None
    samples = record.crossing_samples(threshold)
    assert samples is not None
    return samples / run.row.global_batch, run.row.global_batch


def critical_near(points: Sequence[CriticalBatchPoint], samples: float) -> CriticalBatchPoint | None:
    """The critical-batch point at or before the goal's crossing nearest to it (the first one where
    every point lies past it)."""
    before = [point for point in points if point.samples <= samples]
    if before:
        return max(before, key=lambda point: point.samples)
    return min(points, key=lambda point: point.samples) if points else None


def base_run_model(run: TrainRun, threshold: float, points: Sequence[CriticalBatchPoint],
                   borrowed: str = "") -> StepsModel | str:
    """McCandlish's model through the base run's steps, with the critical batch near the goal from
    critical-batch rows where given, else the run's noise scale near the goal; the refusal's line
    where that is no number and bounds nothing, or the run grew its batch."""
    grew = grew_its_batch(run)
    if grew is not None:
        return grew
    steps, batch = _crossing(run, threshold)
    point = critical_near(points, steps * batch)
    generator = np.random.default_rng(SEED)
    if point is not None:  # one every batch tried still matched bounds it from below, as an unresolved noise scale
        reading = (NoiseReading(None, point.critical_batch, 0, f"the largest batch tried still matched: {point.source}")
                   if point.lower_bound else NoiseReading(point.critical_batch, None, 0, point.source))
        what = f"the critical batch {point.critical_batch:,.0f} near the goal ({point.source})"
        drawn = None if point.lower_bound else critical_batch_draws(point.critical_batch, DRAWS, generator)
        drawn_from = (f"the critical batch between {point.critical_batch:,.0f}, the largest batch its branches matched, "
                      f"and the next, {2 * point.critical_batch:,.0f}")
    else:
        found = noise_near(run, run.row.time_to_target.step)  # type: ignore[union-attr]
        if found is None:
            return f"plan: run {run.source} met the goal but measured no noise scale: give a time-to-target study's rows"
        reading, what = found, f"B_noise {found.value or 0:,.0f} near the goal ({found.source})"
        near = noise_rows_near(run, run.row.time_to_target.step, NEAR_GOAL_SHARE)  # type: ignore[union-attr]
        drawn = noise_scale_draws(near, DRAWS, generator) if found.resolved else None
        drawn_from = (f"B_noise from the {len(near)} noise-scale windows of the last quarter of the steps to the goal, "
                      "each |G|^2 at its standard error")
    model = noise_model(steps, batch, reading, what,
                        f"through the {steps:,.1f} steps of run {run.source} at batch {batch} (no study: an estimate)"
                        f"{borrowed}", drawn, drawn_from)
    if isinstance(model, str):
        return f"plan: the noise scale of run {run.source} near its goal ({reading.source}) {model}"
    return dataclasses.replace(model, profile=run_profile(run, threshold, points), base_run=run, seeds=one_run_spread(),
                               tried=TriedBatches((batch,), NEAR_BASE_RUN, "the base run's batch"))


def through_run(steps: float, batch: int, b_noise: float) -> StepsFit:
    """S(B) = S_min (1 + B_noise / B) through `steps` at `batch`; an infinite B_noise is perfect
    scaling through them."""
    if not math.isfinite(b_noise):
        return StepsFit(0.0, steps * batch)
    s_min = steps / (1 + b_noise / batch)
    return StepsFit(s_min, s_min * b_noise)


def noise_model(steps: float, batch: int, reading: NoiseReading, what: str, through: str,
                drawn: np.ndarray | None = None, drawn_from: str = "") -> StepsModel | str:
    """S(B) = S_min (1 + B_noise / B) through `steps` at `batch`: S_min = steps / (1 + B_noise / batch),
    E_min = S_min B_noise; `drawn`, draws of B_noise, give the model's draws. An unresolved reading
    with a lower bound L predicts at L, bounded by perfect scaling through the run (B_noise
    unbounded); one without a bound is the refusal's words."""
    if reading.resolved and reading.value is not None and reading.value > 0:
        draws = [through_run(steps, batch, float(value)) for value in drawn] if drawn is not None else []
        return StepsModel(through_run(steps, batch, reading.value), draws,
                          f"McCandlish's model S_min (1 + B_noise / B) with {what}, {through}",
                          draws_from=drawn_from if draws else "")
    if reading.lower is None:
        return ("is unresolved (|G|^2 within its noise of 0) and bounds nothing, so it predicts no steps at another "
                "batch; give a time-to-target study's rows, a critical-batch study's, or a run whose noise scale near "
                "the goal resolved")
    lower = reading.lower
    s_min = steps / (1 + lower / batch)
    note = (f"the noise scale near the goal is unresolved ({reading.source}): at least {lower:,.0f}; steps predicted "
            f"with B_noise = {lower:,.0f}, bounded by perfect scaling through the run's {steps:,.1f} steps at batch "
            f"{batch} (B_noise unbounded)")
    return StepsModel(StepsFit(s_min, s_min * lower), [], f"McCandlish's model S_min (1 + B_noise / B) with B_noise "
                      f"at least {lower:,.0f} (unresolved near the goal), {through}", bound=StepsFit(0.0, steps * batch),
                      note=note)


def run_profile(run: TrainRun, threshold: float, points: Sequence[CriticalBatchPoint]) -> Profile | None:
    """The critical batch's shape over the base run up to its crossing, and what an `auto` run
    doubles on there: its noise scale window by window, an unresolved window larger than any batch
    (`train --batch-schedule auto` reads its own noise scale, whatever rows the plan was given).
    The shape is the critical-batch rows' points where given (each holding from its samples to the
    next point's), else that noise scale, an unresolved window at its lower bound or the value
    before it. With points and no noise-scale windows, the points are what auto doubles on too.
    None for a run whose batch grew (its steps are not those of one batch)."""
    if grew_its_batch(run) is not None:
        return None
    steps, batch = _crossing(run, threshold)
    windows = noise_windows(run, steps)
    if points:
        ordered = sorted(points, key=lambda point: point.samples)
        if not windows:
            edges = [0.0, *(point.samples / batch for point in ordered[1:]), steps]
            pieces = [ProfilePiece(min(end, steps) - start, point.critical_batch, point.critical_batch)
                      for point, start, end in zip(ordered, edges, edges[1:]) if min(end, steps) > start]
        else:
            pieces, start = [], 0.0
            for window in windows:
                point = critical_near(ordered, start * batch)
                assert point is not None
                measured = window.reading.value if window.reading.resolved else math.inf
                pieces.append(ProfilePiece(window.steps, point.critical_batch, measured))  # type: ignore[arg-type]
                start += window.steps
        return Profile(batch, tuple(pieces), f"the {len(points)} critical-batch points of run {run.source}") if pieces else None
    known = [window.reading.value or window.reading.lower for window in windows]
    if not windows or not any(known):
        return None
    level = next(value for value in known if value)
    pieces = []
    for window, value in zip(windows, known):
        level = value or level
        measured = window.reading.value if window.reading.resolved else math.inf
        pieces.append(ProfilePiece(window.steps, level, measured))  # type: ignore[arg-type]
    return Profile(batch, tuple(pieces), f"the noise scale of run {run.source}, {len(windows)} windows")


# --- a batch that grows ---------------------------------------------------------------------------

PATIENCE = 2
"""Readings in a row that must say the doubled batch still scales before an `auto` run doubles it
(one reading per logged window; here, one per window of the base run's profile)."""


def next_batch_scales(batch: int, measured: float) -> bool:
    """An `auto` run doubles its batch where the critical batch it reads is at least the doubled
    batch (a batch up to the critical batch still nearly halves the steps). An unresolved noise
    scale is larger than any batch."""
    return measured >= 2 * batch


def auto_phases(segments: Sequence[Segment], batch_min: int, batch_max: int, patience: int = PATIENCE,
                scales: Callable[[int, float], bool] = next_batch_scales) -> list[Phase]:
    """The phases of a run that starts at `batch_min` and doubles, up to `batch_max`, once `patience`
    segments in a row said the doubled batch scales (read at each segment's start, one doubling at
    a time): each segment of dS_min optimal steps with critical batch b takes dS_min (1 + b / B)
    steps at the batch B it runs at."""
    batch, agreeing = batch_min, 0
    phases: list[Phase] = []
    for segment in segments:
        agreeing = min(patience, agreeing + 1) if scales(batch, segment.measured) else 0
        if agreeing >= patience and 2 * batch <= batch_max:
            batch, agreeing = 2 * batch, 0
        steps = segment.progress * (1 + segment.critical_batch / batch)
        if phases and phases[-1].global_batch == batch:
            phases[-1] = Phase(batch, phases[-1].steps + steps)
        else:
            phases.append(Phase(batch, steps))
    return phases


def stopping_phases(phases: Sequence[Phase], eval_every_samples: int) -> tuple[list[Phase], int]:
    """The phases a run trains and the validations it runs: it learns that it met the goal at the
    first validation at or past the crossing (one per `eval_every_samples`), so it trains on at its
    last batch to there (`model.stopping_point` for one batch)."""
    if not eval_every_samples or not phases:
        return list(phases), 0
    samples = sum(phase.samples for phase in phases)
    validations = max(1, math.ceil(samples / eval_every_samples - 1e-9))
    last = phases[-1]
    more = math.ceil(max(0.0, validations * eval_every_samples - samples) / last.global_batch - 1e-9)
    whole = [*phases[:-1], Phase(last.global_batch, last.steps + more)]
    if len(phases) == 1:  # one batch: whole steps, as model.stopping_point counts them
        whole = [Phase(last.global_batch, float(math.ceil(validations * eval_every_samples / last.global_batch - 1e-9)))]
    return whole, validations
