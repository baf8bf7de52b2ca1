"""Time to a quality target: the first validation at which `--until 'val/accuracy>=0.95'` holds.

Samples/s ranks configurations by speed, but a user wants a model of a given quality soonest, and a
larger batch can be faster per sample yet slower to a good model. So every run with a goal records
when its validation first met it: the step, the samples, the training seconds (the clock of
samples/s, pauses left out) and the wall seconds with validation and checkpoints, together with the
validation before it, which brackets the crossing (a validation every E samples resolves it to E).

The clock is the run's, not one invocation's: a checkpoint carries the seconds so far, a resumed
run continues from them and adds the seconds a killed invocation spent after that checkpoint (its
logged windows say how many; the steps it redoes count twice, as they cost twice). The row says how
often the run was resumed. This module imports no torch: the report and the studies read its rows.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from trainspeed.errors import UsageError
from trainspeed.train.rows import EvalRecord, TimeToTargetRecord

GOAL_PATTERN = re.compile(r"\s*(?:val/)?([A-Za-z_][A-Za-z0-9_.\-]*)\s*(>=|<=)\s*(\S+)\s*")
METRIC_PREFIX = "val/"


@dataclass(frozen=True)
class QualityGoal:
    """A validation metric, a direction and a threshold: `val/loss<=0.3`."""

    metric: str
    """The workload's validation metric, without the `val/` of its TensorBoard name."""
    op: str
    """`>=` (higher is better) or `<=` (lower is better)."""
    threshold: float

    def __str__(self) -> str:
        return f"{METRIC_PREFIX}{self.metric}{self.op}{self.threshold:g}"

    def is_met(self, value: float) -> bool:
        return value >= self.threshold if self.op == ">=" else value <= self.threshold

    def better(self, value: float, than: float | None) -> bool:
        if than is None or math.isnan(than):
            return not math.isnan(value)
        return value > than if self.op == ">=" else value < than


def parse_goal(text: str) -> QualityGoal:
    """`val/NAME>=X` or `val/NAME<=X` (the `val/` may be left out); UsageError saying the form."""
    match = GOAL_PATTERN.fullmatch(text)
    if match is None:
        raise UsageError(f"train: --until {text!r}: write METRIC>=VALUE or METRIC<=VALUE, e.g. "
                         "'val/accuracy>=0.95' or 'val/loss<=0.3'")
    metric, op, value_text = match.groups()
    try:
        threshold = float(value_text)
    except ValueError:
        threshold = math.nan
    if not math.isfinite(threshold):
        raise UsageError(f"train: --until {text!r}: {value_text!r} is not a finite number")
    return QualityGoal(metric=metric, op=op, threshold=threshold)


def check_goal_metric(goal: QualityGoal, metric_names: list[str], workload: str) -> None:
    if goal.metric not in metric_names:
        produced = ", ".join(METRIC_PREFIX + name for name in metric_names) or "none"
        raise UsageError(f"train: --until {goal}: workload {workload!r} has no validation metric {goal.metric!r} "
                         f"(its metrics: {produced})")


@dataclass
class RunTotals:
    """The run's seconds over every invocation, as a checkpoint carries them."""

    train_s: float = 0.0
    """Training seconds (pauses for validation and checkpoints left out)."""
    wall_s: float = 0.0
    """Seconds from the run's first step with its pauses."""
    resumes: int = 0
    lost_train_s: float = 0.0
    """Training seconds of invocations killed after their last checkpoint (their steps were redone)."""
    lost_wall_s: float = 0.0

    def as_state(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_state(cls, state: Any) -> "RunTotals":
        """The clock a checkpoint carries; zero for a checkpoint written before checkpoints carried one."""
        if not isinstance(state, dict):
            return cls()
        names = {field.name for field in dataclasses.fields(cls)}
        wrong = [key for key in names & set(state)
                 if not isinstance(state[key], (int, float)) or isinstance(state[key], bool)]
        if wrong:
            raise TypeError(f"the run's clock records {wrong[0]} as {type(state[wrong[0]]).__name__}, not a number")
        return cls(**{key: state[key] for key in names & set(state)})


@dataclass(frozen=True)
class Validation:
    """One validation's value of the goal's metric, and when it came."""

    step: int
    samples: int
    value: float
    train_s: float
    wall_s: float


@dataclass(frozen=True)
class TrackerState:
    """What a checkpoint keeps of a `TargetTracker`: the goal it watched and the validations it
    holds (a checkpoint written before one of them was kept has none)."""

    until: str
    reached: Validation | None = None
    previous: Validation | None = None
    last: Validation | None = None
    best: Validation | None = None
    reached_clock: RunTotals | None = None

    @classmethod
    def parse(cls, raw: Any) -> "TrackerState":
        """A state as a checkpoint's JSON or payload holds it, every field of its type and no other
        (`trainspeed.typed_json`); ValueError naming the first that is not."""
        import dacite

        from trainspeed.typed_json import first_line, typed

        try:
            return typed(cls, raw)
        except (dacite.DaciteError, TypeError) as error:
            raise ValueError(f"the goal's watch is not one ({first_line(error)})") from None


class TargetTracker:
    """Watches each validation for the goal; holds the first crossing, the last and the best value."""

    def __init__(self, goal: QualityGoal, until_text: str) -> None:
        self.goal = goal
        self.until = until_text
        self.reached: Validation | None = None
        self.previous: Validation | None = None
        """The validation before the crossing."""
        self.last: Validation | None = None
        self.best: Validation | None = None
        self.reached_clock: RunTotals | None = None
        """The run's resumes and lost seconds when the goal was met (later ones are not its)."""

    def observe(self, record: EvalRecord, samples: int, train_s: float, wall_s: float) -> bool:
        """Take one validation; True when it is the first that meets the goal."""
        value = record.metrics.get(self.goal.metric, math.nan)
        seen = Validation(step=record.step, samples=samples, value=value, train_s=train_s, wall_s=wall_s)
        if self.reached is not None:
            return False
        if self.best is None or self.goal.better(value, self.best.value):
            self.best = seen
        if not math.isnan(value) and self.goal.is_met(value):
            self.previous, self.reached = self.last, seen
        self.last = seen
        return self.reached is seen

    def record(self, clock: RunTotals, *, step: int, samples: int, global_batch: int, world_size: int,
               target: str) -> TimeToTargetRecord:
        """The row of the crossing, or (not reached) of the run so far with its best value."""
        hit = self.reached
        if hit is not None:
            self.reached_clock = self.reached_clock or clock
            clock = self.reached_clock
        before = self.previous if hit is not None else self.last
        return TimeToTargetRecord(
            until=str(self.goal), metric=self.goal.metric, reached=hit is not None,
            step=hit.step if hit else step, samples=hit.samples if hit else samples,
            value=hit.value if hit else None,
            train_s=hit.train_s if hit else clock.train_s, wall_s=hit.wall_s if hit else clock.wall_s,
            previous_step=before.step if before else None, previous_samples=before.samples if before else None,
            previous_value=_finite(before.value) if before else None,
            previous_train_s=before.train_s if before else None, previous_wall_s=before.wall_s if before else None,
            best_value=_finite(self.best.value) if self.best else None, best_step=self.best.step if self.best else None,
            resumes=clock.resumes, lost_train_s=clock.lost_train_s, lost_wall_s=clock.lost_wall_s,
            global_batch=global_batch, world_size=world_size, target=target,
        )

    # --- checkpoint --------------------------------------------------------------------------------
    def state(self) -> TrackerState:
        clock = dataclasses.replace(self.reached_clock) if self.reached_clock is not None else None
        return TrackerState(self.until, self.reached, self.previous, self.last, self.best, clock)

    def as_state(self) -> dict[str, Any]:
        return dataclasses.asdict(self.state())

    def load_state(self, state: TrackerState | dict[str, Any] | None) -> None:
        """Continue from a checkpoint's state when it watched the same goal (a resume may change
        --until: the new goal then starts watching from the resume on); ValueError for a state
        that is not one (`TrackerState.parse`)."""
        if state is None:
            return
        kept = state if isinstance(state, TrackerState) else TrackerState.parse(state)
        if kept.until != self.until:
            return
        self.reached, self.previous, self.last, self.best = kept.reached, kept.previous, kept.last, kept.best
        self.reached_clock = dataclasses.replace(kept.reached_clock) if kept.reached_clock is not None else None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
