"""The statistics every part of trainspeed shares, so that one set of draws gives one interval
wherever it is printed (a study's table, the plan, a figure's band, the report).

- Percentile intervals over draws: one method, `percentile_interval` (and `percentile_band` for a
  curve of draws), linear interpolation between order statistics.
- Bootstraps: one resampling code, `resample`, seeded by its caller's generator; the crossed
  bootstrap over seeds and deals (`crossed_bootstrap`) and the S(B) fit's (`bootstrap_fit`) draw
  through it.
- Student t quantiles, Wilson intervals of a share, means of clustered values with a t interval.
- The steps to a goal against the global batch, S(B) = S_min (1 + B_crit / B), fitted
  (`fit_steps`) and bootstrapped over seeds (`bootstrap_fit`).

Torch-free, and numpy is imported inside the functions that use it: row classes name these types,
and a command's `--help` reads row classes without importing numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

LEVEL = 0.95
"""The confidence of every interval trainspeed prints (the `_ci95` fields)."""


# --- percentile intervals --------------------------------------------------------------------------

def _tails(level: float) -> tuple[Fraction, Fraction]:
    """The probabilities of an interval's ends, exact for a level written in decimals (0.95: 1/40
    and 39/40), so an end that falls on a draw is that draw, not a hair beside it."""
    if not 0 < level < 1:
        raise ValueError(f"a level must lie in (0, 1), got {level}")
    tail = (1 - Fraction(repr(level))) / 2
    return tail, 1 - tail


def _quantiles(ordered: "np.ndarray", probability: Fraction) -> "np.ndarray":
    """Linear interpolation between the order statistics along axis 0 (Hyndman and Fan's type 7);
    an end between two equal values is that value, so two unbounded draws give an unbounded end."""
    import numpy as np

    position = probability * (ordered.shape[0] - 1)
    below, above = math.floor(position), math.ceil(position)
    low, high = ordered[below], ordered[above]
    with np.errstate(invalid="ignore"):
        return np.where(low == high, low, low + (high - low) * float(position - below))


def _ordered(draws: object) -> "np.ndarray":
    import numpy as np

    values = np.sort(np.asarray(draws, dtype=float), axis=0)
    if values.ndim == 0 or values.shape[0] == 0 or np.isnan(values).any():
        raise ValueError("a percentile interval needs one or more draws, none of them nan")
    return values


def percentile_interval(draws: Sequence[float] | "np.ndarray", level: float = LEVEL) -> tuple[float, float]:
    """The central `level` interval of the draws: their (1 - level) / 2 and (1 + level) / 2 quantiles.

    The one method trainspeed uses for every interval over draws: linear interpolation between the
    order statistics, which is numpy's default (`np.percentile(draws, [2.5, 97.5])`) and R's, so
    anyone reproduces a printed interval from the draws a row keeps. With the thousands of draws a
    bootstrap makes, it and the nearest rank differ by less than the gap between neighbouring draws;
    linear interpolation moves continuously with the draws, the nearest rank jumps from one to the next.
    Draws may be infinite (a critical batch that is unbounded): an end between two infinite draws
    is infinite."""
    ordered = _ordered(draws)
    if ordered.ndim != 1:
        raise ValueError("percentile_interval takes one value per draw; percentile_band takes curves")
    low, high = _tails(level)
    return float(_quantiles(ordered, low)), float(_quantiles(ordered, high))


def percentile_band(draws: Sequence[Sequence[float]] | "np.ndarray",
                    level: float = LEVEL) -> tuple["np.ndarray", "np.ndarray"]:
    """`percentile_interval` at every point of a curve: `draws` is (draws, points), one curve per
    draw; the band's low and high edges, one value per point."""
    ordered = _ordered(draws)
    low, high = _tails(level)
    return _quantiles(ordered, low), _quantiles(ordered, high)


# --- t quantiles, Wilson intervals, clustered means ------------------------------------------------

def t_quantile(probability: float, degrees_of_freedom: int) -> float:
    """Quantile of Student's t distribution (no SciPy needed).

    Exact for 1 and 2 degrees of freedom; above that the Cornish-Fisher expansion of Abramowitz and
    Stegun 26.7.5, whose error at the 97.5% point is 0.004 for 3 degrees of freedom, 0.001 for 4 and
    below 0.0003 from 5 on (an evaluation has as many degrees of freedom as deals, less one)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {probability}")
    if degrees_of_freedom < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {degrees_of_freedom}")
    nu = degrees_of_freedom
    if nu == 1:
        return math.tan(math.pi * (probability - 0.5))
    if nu == 2:
        return (2 * probability - 1) / math.sqrt(2 * probability * (1 - probability))
    z = NormalDist().inv_cdf(probability)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / nu + g2 / nu**2 + g3 / nu**3 + g4 / nu**4


def wilson_interval(successes: int, trials: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson's score interval of a share `successes / trials`: unlike share ± z x standard error,
    it stays inside [0, 1] and does not shrink to a point at 0 or all successes, where a few trials
    (a coverage counted over a handful of seeds) would otherwise claim certainty."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes} of {trials}")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    share = successes / trials
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class ClusteredMean:
    mean: float
    ci95: tuple[float, float] | None
    """None with fewer than two clusters (no spread to measure)."""
    clusters: int
    standard_error: float | None
    half_width: float | None
    """t quantile x standard error: the interval's half width before any clipping."""


def clustered_mean(clusters: Sequence[Sequence[float]],
                   bounds: tuple[float, float] | None = None) -> ClusteredMean:
    """Mean over every value, and its 95% interval with each cluster as one observation.

    Values of one cluster are not independent (the games of one duplicate deal share their walls: a
    deal that favours a player favours it in all four rotations), so the interval is a Student t
    interval on the standard error of the cluster means. With equal cluster sizes the mean equals
    the plain mean over values. `bounds`: the range values can take (ranks 1 to 4); the interval is
    clipped to it, since a t interval near the edge of a bounded range would otherwise reach outside it."""
    if not clusters or any(len(cluster) == 0 for cluster in clusters):
        raise ValueError("need at least one cluster, and no empty cluster")
    means = [sum(cluster) / len(cluster) for cluster in clusters]
    count = len(means)
    total = sum(sum(cluster) for cluster in clusters)
    mean = total / sum(len(cluster) for cluster in clusters)
    if count < 2:
        return ClusteredMean(mean=mean, ci95=None, clusters=count, standard_error=None, half_width=None)
    cluster_mean = sum(means) / count
    variance = sum((m - cluster_mean) ** 2 for m in means) / (count - 1)
    error = math.sqrt(variance / count)
    half = t_quantile(0.975, count - 1) * error
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return ClusteredMean(mean=mean, ci95=(low, high), clusters=count, standard_error=error, half_width=half)


def within_cluster_correlation(clusters: Sequence[Sequence[float]]) -> float | None:
    """The intraclass correlation of values within a cluster (one-way ANOVA estimator, ICC(1)).

    Positive: the values of one cluster (the games of one deal) resemble each other, so they carry
    less information than independent values, which the clustered interval accounts for. None where
    it is undefined: fewer than two clusters, clusters of unequal or unit size, or no variation at all."""
    sizes = {len(cluster) for cluster in clusters}
    if len(clusters) < 2 or len(sizes) != 1 or min(sizes) < 2:
        return None
    size = sizes.pop()
    count = len(clusters)
    means = [sum(cluster) / size for cluster in clusters]
    grand = sum(means) / count
    between = size * sum((m - grand) ** 2 for m in means) / (count - 1)
    within = sum((value - m) ** 2 for cluster, m in zip(clusters, means) for value in cluster) / (count * (size - 1))
    if between + (size - 1) * within == 0:
        return None
    return (between - within) / (between + (size - 1) * within)


# --- bootstraps ------------------------------------------------------------------------------------

def resample(generator: "np.random.Generator", count: int, draws: int) -> "np.ndarray":
    """The one resampling code of every bootstrap here: `draws` resamples of `count` items drawn
    with replacement, as indices (draws, count), row i picking the items of resample i. The caller
    owns the generator (`np.random.default_rng(seed)`), so a bootstrap with several parts to
    resample draws them all from one seeded stream and is the same on every rerun."""
    return generator.integers(0, count, (draws, count))


def resampled_medians(values: Sequence[float], generator: "np.random.Generator", draws: int) -> "np.ndarray":
    """The median of each of `draws` resamples of `values` (the bootstrap of a median measured over
    timed windows or runs): a measurement that is a median keeps its spread in a model that draws
    from it. One value, or none varying, gives that value in every draw (no spread to draw)."""
    import numpy as np

    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0 or not np.isfinite(array).all():
        raise ValueError("resampled medians need one or more finite values")
    if array.size == 1:
        return np.full(draws, float(array[0]))
    return np.median(array[resample(generator, array.size, draws)], axis=1)


DETECTABLE = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.80)
"""A difference this many standard errors wide is found with 80% power by a two-sided 5% test."""


@dataclass(frozen=True)
class CrossedEstimate:
    """A mean (or a difference of means) over seeds and deals, with a bootstrap interval that
    resamples both: the seeds of each arm on their own, the deals once for every arm (they played the
    same deals), so the interval holds the seed-to-seed spread of trained policies and the luck of
    the deals."""

    estimate: float
    ci95: tuple[float, float]
    standard_error: float
    seeds: tuple[int, ...]
    deals: int

    @property
    def minimum_detectable_difference(self) -> float:
        return DETECTABLE * self.standard_error


def _arm(deal_means: Sequence[Sequence[float]]) -> "np.ndarray":
    import numpy as np

    array = np.asarray(deal_means, dtype=float)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 2:
        raise ValueError("an arm is (seeds, deals) with at least one seed and two deals")
    return array


def crossed_bootstrap(arms: Sequence[Sequence[Sequence[float]]], weights: Sequence[float], offset: float = 0.0,
                      resamples: int = 4000, seed: int = 0) -> CrossedEstimate:
    """sum_i weights[i] x mean(arm i) + offset, where arm i holds each seed's mean rank per deal
    (seeds x deals, every arm on the same deals); e.g. weights (1, -1) for arm 0 minus arm 1, or
    (1,) with offset -2.5 for an arm against an even result."""
    import numpy as np

    arrays = [_arm(arm) for arm in arms]
    deals = {array.shape[1] for array in arrays}
    if len(deals) != 1 or len(weights) != len(arrays):
        raise ValueError("every arm must hold the same deals, and each needs a weight")
    count = deals.pop()
    generator = np.random.default_rng(seed)
    estimate = float(sum(w * a.mean() for w, a in zip(weights, arrays)) + offset)
    draws = np.full(resamples, offset)
    deal_picks = resample(generator, count, resamples)
    for weight, array in zip(weights, arrays):
        seed_picks = resample(generator, array.shape[0], resamples)
        per_deal = array[seed_picks].mean(axis=1)  # (resamples, deals): the resampled seeds' mean per deal
        draws += weight * np.take_along_axis(per_deal, deal_picks, axis=1).mean(axis=1)
    return CrossedEstimate(estimate=estimate, ci95=percentile_interval(draws), standard_error=float(draws.std(ddof=1)),
                           seeds=tuple(a.shape[0] for a in arrays), deals=count)


# --- steps to a goal against the batch: S(B) and its bootstrap -------------------------------------
#
# McCandlish et al. (2018) derive that training to a given loss trades steps S for samples E = B S
# along (S / S_min - 1)(E / E_min - 1) = 1, which is S(B) = S_min + E_min / B with the critical batch
# B_crit = E_min / S_min: below it a doubled batch nearly halves the steps (perfect scaling), above it
# the steps barely fall. The model is linear in (S_min, E_min) against 1/B, so it is fitted by least
# squares on relative errors (steps to target span decades, and their spread over seeds grows with
# them), and the interval of every parameter comes from refitting on the seeds resampled within each
# batch. The time-to-target study fits it; the plan and the report read its rows.

BOOTSTRAP_DRAWS = 2000


@dataclass(frozen=True)
class StepsFit:
    """S(B) = s_min + e_min / B. `b_crit` is inf where the steps fell as fast as perfect scaling at
    every batch measured (s_min 0), 0 where they did not fall at all (e_min 0)."""

    s_min: float
    e_min: float

    @property
    def b_crit(self) -> float:
        if self.s_min <= 0:
            return math.inf
        return self.e_min / self.s_min

    def steps(self, batch: float) -> float:
        return self.s_min + self.e_min / batch

    def samples(self, batch: float) -> float:
        return batch * self.steps(batch)

    def statistical_efficiency(self, batch: float) -> float:
        """E_min / E(B) = 1 / (1 + B / B_crit): the share of samples at batch B that a batch far
        below B_crit would not have needed (Pollux's statistical efficiency, from this fit)."""
        samples = self.samples(batch)
        return self.e_min / samples if samples > 0 else math.nan


def fit_steps(batches: Sequence[float], steps: Sequence[float], iterations: int = 8) -> StepsFit:
    """The least-squares fit of relative errors, each parameter kept non-negative: where the free
    fit makes one negative, the model without it is fitted instead (S = E_min / B or S = S_min)."""
    import numpy as np

    batch = np.asarray(batches, dtype=float)
    measured = np.asarray(steps, dtype=float)
    if len(batch) < 2 or np.any(measured <= 0) or np.any(batch <= 0):
        raise ValueError("a fit needs positive steps at two or more batches")
    design = np.stack([np.ones_like(batch), 1.0 / batch], axis=1)
    predicted = measured.copy()
    s_min = e_min = 0.0
    for _ in range(iterations):
        weights = 1.0 / predicted
        s_min, e_min = np.linalg.lstsq(design * weights[:, None], measured * weights, rcond=None)[0]
        if s_min < 0 or e_min < 0:
            break
        predicted = np.maximum(design @ np.array([s_min, e_min]), 1e-12)
    tiny = 1e-9 * float(measured.max())
    if s_min < tiny or e_min < tiny * float(batch.min()):
        return _one_term_fit(batch, measured, perfect_scaling=s_min < tiny)
    return StepsFit(s_min=float(s_min), e_min=float(e_min))


def _one_term_fit(batch: "np.ndarray", measured: "np.ndarray", perfect_scaling: bool) -> StepsFit:
    """The best single-parameter model on relative errors: the geometric mean of the one ratio."""
    import numpy as np

    if perfect_scaling:
        return StepsFit(s_min=0.0, e_min=float(np.exp(np.mean(np.log(measured * batch)))))
    return StepsFit(s_min=float(np.exp(np.mean(np.log(measured)))), e_min=0.0)


@dataclass(frozen=True)
class BootstrapFit:
    """A fit of S(B), and the same fit on bootstrap draws; its intervals are `percentile_interval`s
    over the draws (the plan's, from the draws a study row keeps, are the same method)."""

    fit: StepsFit
    draws: list[StepsFit]

    def interval(self, value: str, level: float = LEVEL) -> tuple[float, float]:
        """Of one of the fit's values over the draws: "s_min", "e_min" or "b_crit" (inf where unbounded)."""
        return percentile_interval([getattr(draw, value) for draw in self.draws], level)

    def steps_interval(self, batch: float, level: float = LEVEL) -> tuple[float, float]:
        return percentile_interval([draw.steps(batch) for draw in self.draws], level)


def bootstrap_fit(steps_per_batch: dict[int, Sequence[float]], draws: int = BOOTSTRAP_DRAWS,
                  seed: int = 0) -> BootstrapFit:
    """The fit on each batch's mean steps over its seeds, and `draws` refits on the seeds of each
    batch drawn with replacement (the batches stay: they are the design, not a sample). Each draw
    resamples every batch in turn, draw after draw, the order the study has always drawn in, so the
    same steps and seed give the same draws as the fit rows already written."""
    import numpy as np

    batches = sorted(steps_per_batch)
    seeds = [np.asarray(steps_per_batch[batch], dtype=float) for batch in batches]
    fit = fit_steps(batches, [float(values.mean()) for values in seeds])
    generator = np.random.default_rng(seed)
    refits = []
    for _ in range(draws):
        drawn = [float(values[resample(generator, len(values), 1)].mean()) for values in seeds]
        refits.append(fit_steps(batches, drawn))
    return BootstrapFit(fit=fit, draws=refits)
