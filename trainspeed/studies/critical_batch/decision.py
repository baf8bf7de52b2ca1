"""The critical batch at one point of a run, from its branches' metrics: pure functions on numbers,
tested on numbers alone (torch-free; the report reads the rows they make).

At a point t, every factor f trains `seeds` branches at batch B x f for the same samples. A factor
**matches** when the mean of its branches' metric is no worse than the mean of the factor-1
branches by more than the tolerance (better always matches: a larger batch that learns more per
sample is no loss). The tolerance comes from the spread of the factor-1 seeds: the half width of a
two-sided 95% t interval of a difference of two means, of the n factor-1 seeds and of the m seeds of
the other factor (m = n unless --factor-seeds gives fewer), with the factor-1 seeds' standard
deviation s for both,

    tolerance = t(0.975, n - 1) x s x sqrt(1/n + 1/m)

so a factor whose mean lies within what the seeds alone would scatter it by matches. `--tolerance`
gives it in the metric's units instead. The **critical batch** is B x f for the largest factor f
such that it and every factor between 1 and f match: a batch past one that did not match is not
counted on the strength of a lucky draw. When even the largest factor matches, the critical batch
is only known to be at least B x f_max, and the rows say so. Since the first factor that does not
match ends the count, the factors past it are never trained (`factors_wanted`): the study climbs
each point's factors in order.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

from trainspeed.stats import LEVEL, t_quantile

LOWER_IS_BETTER = "<="
HIGHER_IS_BETTER = ">="


@dataclass(frozen=True)
class Spread:
    """One factor's branches' metric: each seed's value, their mean, standard deviation (None with
    one seed) and extremes."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    @property
    def min_max(self) -> tuple[float, float]:
        """The smallest and the largest seed's value (both NaN where a branch diverged)."""
        if not self.finite:
            return math.nan, math.nan
        return min(self.values), max(self.values)

    @property
    def finite(self) -> bool:
        return all(math.isfinite(value) for value in self.values)


@dataclass(frozen=True)
class Tolerance:
    """How much worse than the factor-1 branches a factor may be and still match, and the rule
    that gave it, in words with its numbers."""

    value: float
    rule: str


def lr_rule_factor(rule: str, factor: float) -> float:
    """How much larger a branch's learning rate is at `factor` x the base run's batch, by the base
    run's LR scaling rule: none (the same), linear (x f), sqrt (x sqrt(f), the rule for Adam)."""
    if rule == "none":
        return 1.0
    if rule == "linear":
        return factor
    if rule == "sqrt":
        return math.sqrt(factor)
    raise ValueError(f"unknown LR scaling rule {rule!r}")


def tolerance_from_seeds(reference: Sequence[float], compared_seeds: int | None = None,
                         given: float | None = None) -> Tolerance:
    """The tolerance at one point: `given` (--tolerance) where there is one, else the half width of
    the 95% t interval of a difference of the factor-1 mean and another factor's mean of
    `compared_seeds` seeds (as many as the reference by default), both with the factor-1 seeds'
    standard deviation. ValueError with fewer than two reference seeds and no `given`."""
    if given is not None:
        return Tolerance(given, f"--tolerance {given:g}, given")
    count = len(reference)
    if count < 2:
        raise ValueError("a tolerance from the seeds' spread needs two or more factor-1 seeds")
    others = compared_seeds or count
    sd = statistics.stdev(reference)
    quantile = t_quantile(0.5 + LEVEL / 2, count - 1)
    value = quantile * sd * math.sqrt(1 / count + 1 / others)
    return Tolerance(value, f"t({0.5 + LEVEL / 2:g}, {count - 1} df) {quantile:.3g} x sd {sd:.4g} of the {count} "
                            f"factor-1 seeds x sqrt(1/{count} + 1/{others}) = {value:.4g}")


def worse_by(mean: float, reference_mean: float, op: str) -> float:
    """How much worse `mean` is than `reference_mean` for a metric whose goal is `op` (<= lower is
    better, >= higher is better); negative where it is better."""
    return mean - reference_mean if op == LOWER_IS_BETTER else reference_mean - mean


def matches(mean: float, reference_mean: float, op: str, tolerance: float) -> bool:
    return worse_by(mean, reference_mean, op) <= tolerance


@dataclass(frozen=True)
class CriticalBatch:
    """The critical batch at one point: B x `factor`; `at_least` where the largest factor tried
    still matched (the true one lies at or above it)."""

    factor: float
    batch: int
    at_least: bool

    def text(self) -> str:
        return f"at least {self.batch:,}" if self.at_least else f"{self.batch:,}"


def critical_batch(base_batch: int, spreads: Mapping[float, Spread], op: str, tolerance: float) -> CriticalBatch:
    """The largest B x f such that f and every factor from 1 up to it match the factor-1 branches
    (`spreads` holds factor 1; factors below 1 are shown in the rows but do not count here)."""
    reference = spreads[1.0].mean
    counted = sorted(factor for factor in spreads if factor >= 1.0)
    critical = 1.0
    for factor in counted:
        if not matches(spreads[factor].mean, reference, op, tolerance):
            break
        critical = factor
    return CriticalBatch(factor=critical, batch=round(base_batch * critical), at_least=critical == counted[-1])


def factors_wanted(factors: Sequence[float], done: Mapping[float, Spread], op: str, given: float | None = None
                   ) -> list[float]:
    """The factors of one point whose branches must be trained, given the factors whose branches
    are all `done`: factors below 1 and 1 itself always, and each factor above 1 up to the first
    one that does not match. A factor past one that did not match cannot change the critical
    batch (`critical_batch` stops at the first), so its branches are never trained; the next
    factor is wanted once the one below it matched, and the first above 1 from the start, so the
    study trains branches of several factors and points at once."""
    reference = done.get(1.0)
    ladder = sorted(factor for factor in factors if factor > 1.0)
    wanted = sorted({1.0, *(factor for factor in factors if factor < 1.0)})
    for factor in ladder:
        wanted.append(factor)
        if reference is None or factor not in done:
            break
        if not reference.finite or not done[factor].finite:
            break
        tolerance = tolerance_from_seeds(reference.values, len(done[factor].values), given).value
        if not matches(done[factor].mean, reference.mean, op, tolerance):
            break
    return wanted


@dataclass(frozen=True)
class Judgement:
    """One point judged: its tolerance and critical batch, or None for both where a factor-1 branch
    diverged (nothing to compare with)."""

    tolerance: Tolerance | None
    critical: CriticalBatch | None

    def text(self) -> str:
        return self.critical.text() if self.critical is not None else "unknown: a factor-1 branch diverged"


def judge(base_batch: int, spreads: Mapping[float, Spread], op: str, given: float | None = None) -> Judgement:
    """The tolerance (`tolerance_from_seeds`) and the critical batch (`critical_batch`) at one
    point; a factor whose branch diverged (NaN) never matches."""
    reference = spreads[1.0]
    if not reference.finite:
        return Judgement(None, None)
    others = min(len(spread.values) for spread in spreads.values())
    tolerance = tolerance_from_seeds(reference.values, others, given)
    return Judgement(tolerance, critical_batch(base_batch, spreads, op, tolerance.value))
