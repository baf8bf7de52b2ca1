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
