"""How far the steps to the goal of the one run a check makes may lie from what the steps model
says, so that the plan's interval is one for that run and not for the model's mean:

- **the seeds**: one run's steps scatter about the mean of its batch from seed to seed. A study
  measures that scatter (its seeds at each batch, pooled); a base run cannot (one seed), so the
  plan takes the committed studies' pooled scatter, and twice its variance: the base run's steps
  are one seed's, and so are the check's (`RunSpread`);
- **the model's own spread** (`trainspeed.plan.steps.StepsModel.draws`): the study's bootstrap of
  its fit, or, from a base run, its noise scale near the goal drawn from the readings there, each
  with the standard error of its |G|^2 (`noise_scale_draws`), or a critical batch between the
  largest batch its branches matched and the next one (`critical_batch_draws`);
- **where the learning-rate rule was never tried** (`TriedBatches`): a batch outside a study's
  batches, or more than 2x from a base run's. The model's curve is then a guess, and the steps
  are bounded only by what any critical batch allows: perfect scaling from the nearest batch
  tried, and no gain over it. The row says so (`extrapolated`), and its interval spans both.

Nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from trainspeed.gradients.rows import NoiseScaleRecord

if TYPE_CHECKING:
    from trainspeed.studies.time_to_target.rows import TimeToTargetBatchRow

NEAR_BASE_RUN = 2.0
"""A batch within this factor of the base run's counts as tried by it (one doubling or halving);
beyond it the base run's learning-rate rule was never tried from the start of a run."""
NEAR_GOAL_SHARE = 0.25
"""The noise scale near the goal is drawn from the windows of the last quarter of the steps to it."""


@dataclass(frozen=True)
class RunSpread:
    """How one run's measure (its steps to the goal, its start-up) scatters about the mean of runs
    like it: a standard deviation of its logarithm, with its degrees of freedom (its draws are
    t-distributed)."""

    log_sd: float
    degrees_of_freedom: int
    source: str

    def factors(self, count: int, generator: np.random.Generator) -> np.ndarray:
        """`count` factors a run's steps lie at from the mean: exp(log_sd x t)."""
        if self.log_sd <= 0:
            return np.ones(count)
        return np.exp(self.log_sd * generator.standard_t(self.degrees_of_freedom, count))


COMMITTED_STUDIES = RunSpread(0.14, 19, "the committed studies' seeds at one batch (log sd 0.14, 19 degrees of freedom)")
"""`docs/results/time_to_target_study_{mahjong,charlm}.jsonl` and `named_time_to_target_gpt2.jsonl`:
the log of each seed's steps about its batch's mean, pooled over every batch whose seeds all met the
goal (tiny Mahjong 0.065 over 8 degrees of freedom, the char-LM example 0.11 over 8, hf:gpt2 0.28
over 3, its batch 128 taking 75 and 149 steps). The plan takes it where its inputs measured no seeds
of their own (a base run is one seed)."""


def pooled_seed_spread(batches: Sequence["TimeToTargetBatchRow"], study: str) -> RunSpread | None:
    """The study's own scatter of seeds: the log of each seed's steps about its batch's mean, pooled
    over the batches whose seeds (two or more) all met the goal; None where no batch has two."""
    squares, freedom = 0.0, 0
    for row in batches:
        steps = row.steps_per_seed
        if len(steps) < 2 or any(value is None or value <= 0 for value in steps):
            continue
        logs = [math.log(value) for value in steps]  # type: ignore[arg-type]
        mean = sum(logs) / len(logs)
        squares += sum((value - mean) ** 2 for value in logs)
        freedom += len(logs) - 1
    if freedom == 0:
        return None
    log_sd = math.sqrt(squares / freedom)
    return RunSpread(log_sd, freedom, f"study {study}'s seeds at one batch (log sd {log_sd:.3f}, {freedom} degrees of "
                                      "freedom)")


def one_run_spread(per_seed: RunSpread = COMMITTED_STUDIES) -> RunSpread:
    """A base run's steps are one seed's, and a check is another: their difference scatters by
    sqrt(2) times one seed's."""
    return RunSpread(math.sqrt(2) * per_seed.log_sd, per_seed.degrees_of_freedom,
                     f"the base run's seed and the check's, each at {per_seed.source}")


@dataclass(frozen=True)
class TriedBatches:
    """The global batches a learning-rate rule was tried at from the start of a run (a study's
    batches, or a base run's), and how far from them a batch still counts as tried."""

    batches: tuple[int, ...]
    near: float
    """1: only within the batches' range (a study's, whose rate was tuned at each); 2: within a
    doubling of them (a base run's)."""
    what: str
    """Whose batches: "the study's batches" or "the base run's batch"."""

    def outside(self, batch: float) -> bool:
        return batch < min(self.batches) / self.near * (1 - 1e-9) or batch > max(self.batches) * self.near * (1 + 1e-9)

    def anchor(self, batch: float) -> int:
        """The batch tried nearest to `batch` (in ratio)."""
        return min(self.batches, key=lambda tried: abs(math.log(batch / tried)))

    def extrapolation(self, batches: Sequence[float]) -> str | None:
        """Why the steps at `batches` (a fixed batch, or the batches a growing one reaches) are
        extrapolated, in one line; None where every one lies near a batch tried."""
        outside = sorted({int(batch) for batch in batches if self.outside(batch)})
        if not outside:
            return None
        low, high = min(self.batches), max(self.batches)
        tried = f"{low:,}" if low == high else f"{low:,}-{high:,}"
        where = (f"outside {self.what} ({tried})" if self.near == 1 else
                 f"more than {self.near:g}x from {self.what} ({tried})")
        anchors = ", ".join(f"{self.anchor(batch):,}" for batch in outside)
        return (f"batch {', '.join(f'{batch:,}' for batch in outside)} lies {where}: the learning-rate rule was never "
                f"tried there from the start of a run, so its steps are bounded only by perfect scaling from batch "
                f"{anchors} and no gain over it")


def extrapolated_factors(batch: float, anchor: int, count: int) -> np.ndarray:
    """The steps at `batch` over the steps at the batch tried, `anchor`, at the two bounds any
    critical batch allows, half the draws each: perfect scaling (anchor / batch) and no change (1).
    Above the anchor the steps fall by at most the batch's ratio; below it they rise by at most it."""
    ends = np.array([min(1.0, anchor / batch), max(1.0, anchor / batch)])
    return ends[np.arange(count) % 2]


def noise_scale_draws(rows: Sequence[NoiseScaleRecord], count: int, generator: np.random.Generator) -> np.ndarray | None:
    """B_noise near the goal, `count` draws: a window of `rows` (those near the goal) at random, and
    its |G|^2 drawn from its moving average's standard error, B_simple = tr(Sigma) / |G|^2
    (infinite where the draw of |G|^2 is not above 0: no critical batch bounds the steps). None
    where no window has a positive tr(Sigma) and a standard error."""
    usable = [row for row in rows if row.grad_sq_avg_se is not None and row.trace_sigma_avg > 0
              and math.isfinite(row.grad_sq_avg) and row.resolved is not False]
    if not usable:
        return None
    picks = generator.integers(0, len(usable), count)
    grad_sq = np.array([row.grad_sq_avg for row in usable])[picks]
    error = np.array([row.grad_sq_avg_se for row in usable], dtype=float)[picks]
    trace = np.array([row.trace_sigma_avg for row in usable])[picks]
    drawn = grad_sq + error * generator.standard_normal(count)
    with np.errstate(divide="ignore"):
        return np.where(drawn > 0, trace / np.maximum(drawn, 1e-300), math.inf)


def critical_batch_draws(critical: float, count: int, generator: np.random.Generator) -> np.ndarray:
    """A critical batch the rule read as `critical` (the largest batch that matched; the next,
    twice it, did not), `count` draws between the two, uniform in their logarithm."""
    return critical * 2.0 ** generator.uniform(0.0, 1.0, count)
