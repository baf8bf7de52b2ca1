"""Means with confidence intervals for clustered results.

The games of one duplicate deal share their walls, so they are not independent: a deal that
favours the evaluated player favours it in all four rotations. The interval therefore treats each
deal (cluster) as one observation: the cluster means' mean, with a Student t interval on their
standard error. With equal cluster sizes this mean equals the plain mean over games.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence


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

    `bounds`: the range values can take (ranks 1 to 4); the interval is clipped to it, since a t
    interval near the edge of a bounded range would otherwise reach outside it."""
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

    Positive: the games of one deal resemble each other (the deal's luck did not cancel out), so
    they carry less information than independent games, which the clustered interval accounts for.
    None where it is undefined: fewer than two clusters, clusters of unequal or unit size, or no
    variation at all."""
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


Z_975 = NormalDist().inv_cdf(0.975)
Z_80 = NormalDist().inv_cdf(0.80)
DETECTABLE = Z_975 + Z_80
"""A difference this many standard errors wide is found with 80% power by a two-sided 5% test."""


@dataclass(frozen=True)
class PowerPlan:
    """The smallest difference in mean rank between two arms that a planned comparison would detect."""

    seeds: int
    deals: int
    games_per_deal: int
    game_rank_sd: float
    within_deal_correlation: float
    seed_sd: float
    """Spread of a policy's true strength between training seeds of one arm."""
    standard_error: float
    """Of the difference of the two arms' mean ranks."""
    minimum_detectable_difference: float


def plan_power(seeds: int, deals: int, *, games_per_deal: int = 4, game_rank_sd: float = 1.12,
               within_deal_correlation: float = 0.2, seed_sd: float = 0.03) -> PowerPlan:
    """Each arm: `seeds` policies, every one of them on the same `deals` (a crossed design).

    Seed s's mean rank on deal d is  y[s, d] = mu + S[s] + D[d] + E[s, d]:  S the seed's true
    strength (sd `seed_sd`), D the deal's luck that every seed meets, E what is left of that seed's
    games on that deal. D + E is one policy's mean over the deal's games, whose variance is

        v_deal = game_rank_sd^2 x (1 + (games_per_deal - 1) x within_deal_correlation) / games_per_deal.

    The arm's mean over the seeds x deals table has variance
    seed_sd^2 / seeds + Var(D) / deals + Var(E) / (seeds x deals): a deal shared by all seeds is one
    draw of its luck, however many seeds play it, so only E shrinks with the seeds. The plan does not
    know how v_deal splits into Var(D) and Var(E) and takes all of it as shared (the split that
    gives the largest variance):

        arm variance = seed_sd^2 / seeds + v_deal / deals.

    The difference of two arms has twice that (taking no credit for the deals both arms share, whose
    common luck would cancel, so the plan errs on the safe side); its standard error is the square
    root of that, and the minimum detectable difference `DETECTABLE` standard errors."""
    deal_variance = game_rank_sd ** 2 * (1 + (games_per_deal - 1) * within_deal_correlation) / games_per_deal
    arm_variance = seed_sd ** 2 / seeds + deal_variance / deals
    error = math.sqrt(2 * arm_variance)
    return PowerPlan(seeds=seeds, deals=deals, games_per_deal=games_per_deal, game_rank_sd=game_rank_sd,
                     within_deal_correlation=within_deal_correlation, seed_sd=seed_sd, standard_error=error,
                     minimum_detectable_difference=DETECTABLE * error)


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
    rng = np.random.default_rng(seed)
    estimate = float(sum(w * a.mean() for w, a in zip(weights, arrays)) + offset)
    draws = np.full(resamples, offset)
    deal_picks = rng.integers(0, count, (resamples, count))
    for weight, array in zip(weights, arrays):
        seed_picks = rng.integers(0, array.shape[0], (resamples, array.shape[0]))
        per_deal = array[seed_picks].mean(axis=1)  # (resamples, deals): the resampled seeds' mean per deal
        draws += weight * np.take_along_axis(per_deal, deal_picks, axis=1).mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5])
    return CrossedEstimate(estimate=estimate, ci95=(float(low), float(high)), standard_error=float(draws.std(ddof=1)),
                           seeds=tuple(a.shape[0] for a in arrays), deals=count)
