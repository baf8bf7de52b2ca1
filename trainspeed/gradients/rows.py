"""The noise-scale meter's row (`metrics.jsonl`), read by the report and the studies, which import
no torch, so this module imports none; and what a reader may act on: a noise scale that is a
number only where its |G|^2 is resolved, else a lower bound (`NoiseScaleReading`, `noise_scale_at`).

When is |G|^2 resolved? The meter estimates |G|^2 once per measured step (the two-batch estimate
of `trainspeed.gradients.noise_scale`) and averages the estimates: over a window's steps, or with
the exponential moving average's weights w_i. The average's standard error is

    SE = sqrt(V x sum w_i^2)        V = (mean(g^2) - mean(g)^2) / (1 - sum w_i^2)

where g are the per-step estimates, V their variance (the weighted unbiased estimate) and
1 / sum w_i^2 the average's effective sample size (n for a plain mean of n steps; for the bias
corrected moving average of n steps with weight beta, (1 + beta)(1 - beta^n) / ((1 - beta)(1 + beta^n)),
199 at 0.99 after many steps). |G|^2 is **resolved** where its average exceeds `RESOLVED_Z` = 2
standard errors; B_simple = tr(Sigma) / |G|^2 is then a number. Otherwise the true |G|^2 may be 0
within its noise (near convergence, or at a batch far below B_simple) and the ratio is no number:
a positive upper bound |G|^2 + z SE on |G|^2 (|G|^2 taken as 0 where its estimate is below: the
true one is not negative) gives the lower bound

    B_simple > tr(Sigma) / (max(|G|^2, 0) + z SE)

which is all a reader may act on ("larger than this"), and none where tr(Sigma) is not positive
or the noise could not be estimated (a single step). The per-step estimates are taken as
independent; where they are not (the `previous-step` method: neighbouring estimates share a
gradient) the meter doubles V, and drift of the true |G|^2 within the steps averaged only adds
to V: both err towards "unresolved".

A meter that measures one step in K (`--noise-scale-every`) decays its moving averages by beta
per step, beta^gap between two measurements, and adds each measurement at the weight 1 - beta: its
horizon in steps is the same whatever K, and it holds about K times fewer measurements.
`AverageWeights` keeps the normalisation and the sum w_i^2 for weights that vary so (the formula
above is its case of a measurement every step); the standard error, and with it "resolved", follow
from the measurements it holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

from statistics import NormalDist

from trainspeed.rows import Batch, NonNegative, Share
from trainspeed.stats import t_quantile

RESOLVED_Z = 2.0
"""|G|^2 is resolved where its estimate exceeds this many standard errors (one-sided, about 2.3%
of estimates of a true |G|^2 of 0 pass it)."""

UNRESOLVED_REASON = "|G|^2 within its noise of 0"
"""Why a noise scale is unresolved, as the summary, the report and the studies say it."""


def ratio(trace_sigma: float, grad_sq: float) -> float | None:
    """tr(Sigma) / |G|^2 where |G|^2 is positive and the ratio a number (None otherwise: a |G|^2
    of 1e-310 beside a tr(Sigma) of 1 overflows)."""
    if not (grad_sq > 0 and math.isfinite(trace_sigma)):
        return None
    value = trace_sigma / grad_sq
    return value if math.isfinite(value) else None


def ema_weight_sq_sum(smoothing: float, count: int) -> float:
    """sum w_i^2 of the bias-corrected moving average of `count` values with weight `smoothing`:
    the inverse of its effective sample size (1 for a single value, 1/n for a plain mean of n)."""
    if count < 1:
        return 1.0
    if smoothing == 0.0:
        return 1.0
    power = smoothing ** count
    return (1.0 - smoothing) * (1.0 + power) / ((1.0 + smoothing) * (1.0 - power))


def student_z(z: float, measurements: float | None) -> float:
    """Student's t quantile at the one-sided level of z standard normal errors, for `measurements`
    less one degrees of freedom (at least 1); z itself where they are unknown."""
    if measurements is None or not math.isfinite(measurements):
        return z
    return t_quantile(NormalDist().cdf(z), max(1, int(measurements) - 1))


@dataclass
class AverageWeights:
    """The weights of a moving average whose values each come with a raw weight and whose sum
    decays by d_i before each: the average is sum(raw_i prod_{j>i} d_j x_i) / `correction`. With
    the constant decay beta and raw weight 1 - beta it is the bias-corrected exponential moving
    average (`correction` = 1 - beta^n, `ema_weight_sq_sum`). The meter gives every measurement the
    raw weight 1 - beta and decays by beta per step between two (beta^gap): each measurement counts
    alike, its weight fading with the steps since it was made, so measurements made close together
    (auto's first windows) keep their weight beside later ones K steps apart. Host numbers: they
    depend on when the meter measured, never on what."""

    correction: float = 0.0
    """sum raw_i prod_{j>i} d_j: what the decayed sum is divided by (0 before the first value)."""
    raw_weight_sq: float = 0.0
    """sum (raw_i prod_{j>i} d_j)^2."""

    def add(self, decay: float, weight: float) -> None:
        self.correction = decay * self.correction + weight
        self.raw_weight_sq = decay * decay * self.raw_weight_sq + weight * weight

    @property
    def weight_sq_sum(self) -> float:
        """sum w_i^2 of the normalised average (1 before any value, or where one holds all the weight)."""
        correction = self.correction
        return 1.0 if correction <= 0.0 else min(1.0, self.raw_weight_sq / (correction * correction))

    @classmethod
    def constant(cls, decay: float, count: int) -> "AverageWeights":
        """The weights of `count` values at one decay, each of raw weight 1 - decay (a checkpoint
        written before the meter kept its weights, which measured every step at the smoothing)."""
        correction = 1.0 - decay ** count
        return cls(correction=correction, raw_weight_sq=ema_weight_sq_sum(decay, count) * correction * correction)


def standard_error(mean: float, mean_sq: float, weight_sq_sum: float, inflation: float = 1.0) -> float | None:
    """The standard error of a weighted mean of per-step estimates, from their weighted mean and
    mean square and the weights' sum of squares (module docstring); None where one value (or one
    with all the weight) leaves their variance unknown. `inflation` multiplies the variance (2 for
    estimates that share a gradient with their neighbour)."""
    if not 0.0 < weight_sq_sum < 1.0 or not (math.isfinite(mean) and math.isfinite(mean_sq)):
        return None
    variance = max(mean_sq - mean * mean, 0.0) / (1.0 - weight_sq_sum) * inflation
    return math.sqrt(variance * weight_sq_sum)


@dataclass(frozen=True)
class NoiseScaleReading:
    """B_simple as a reader may act on it: `value` where |G|^2 is resolved, else `lower_bound`
    (None where none is known) and no value.

    A batch-size controller treats an unresolved noise scale as larger than any batch tried
    (`larger_than`); the plan refuses it as a value. `resolved` None: not assessed (a row or
    summary written before the meter kept a standard error), its value read as it was written."""

    value: float | None
    """tr(Sigma) / |G|^2 where |G|^2 is resolved (below 0 where the tr(Sigma) estimate is)."""
    lower_bound: NonNegative | None
    """tr(Sigma) / (max(|G|^2, 0) + z SE) where unresolved; None where resolved, or unknown."""
    resolved: bool | None
    grad_sq: float | None = None
    grad_sq_se: NonNegative | None = None
    """The standard error of `grad_sq` the criterion used (None: unknown or not assessed)."""
    trace_sigma: float | None = None
    measured_steps: int | None = None
    """Steps the meter measured so far in the run (None: not recorded, written before it was)."""
    measured_fraction: Share | None = None
    """Those steps over the steps trained: 1 where every step measured, 1/K with `--noise-scale-every K`."""
    effective_measurements: NonNegative | None = None
    """1 / sum w_i^2 of the average the reading is of: the measurements its standard error rests on
    (None: not recorded)."""

    def larger_than(self, batch: float) -> bool:
        """Whether B_simple is, or may be, above `batch`: a value above it, or unresolved."""
        if self.resolved is False:
            return True
        return self.value is not None and self.value > batch

    def text(self) -> str:
        """`1,951`, or `> 265 (unresolved: |G|^2 within its noise of 0)`, as the summary prints it."""
        if self.resolved is not False:
            return "–" if self.value is None else f"{self.value:,.4g}"
        if self.grad_sq_se is None:
            return "unresolved (too few steps to estimate the noise of |G|^2)"
        if self.lower_bound is None:
            return f"unresolved ({UNRESOLVED_REASON}, and tr(Sigma) not above 0)"
        return f"> {self.lower_bound:,.4g} (unresolved: {UNRESOLVED_REASON})"

    def confident_lower(self, z: float = RESOLVED_Z) -> float | None:
        """A lower confidence bound on B_simple, resolved or not: tr(Sigma) / (max(|G|^2, 0) + t SE),
        one-sided at the level of z standard normal errors (z = 2: about 97.7%), taking tr(Sigma) as
        known (its relative noise is far below that of |G|^2 at batches below B_simple). t is
        Student's quantile at that level for the effective measurements less one degree of freedom,
        since the standard error is itself estimated from them (13.8 for 2 measurements, 2.3 for 20:
        an average of a few measurements bounds little); z where they are not recorded. None where
        the standard error or tr(Sigma) is unknown, or tr(Sigma) is not above 0; an unresolved
        reading without its estimates gives its `lower_bound`."""
        if self.grad_sq is None or self.grad_sq_se is None or self.trace_sigma is None:
            return self.lower_bound if self.resolved is False else None
        upper = max(self.grad_sq, 0.0) + student_z(z, self.effective_measurements) * self.grad_sq_se
        if not (upper > 0 and self.trace_sigma > 0 and math.isfinite(self.trace_sigma)):
            return None
        return ratio(self.trace_sigma, upper)


def assess(grad_sq: float, trace_sigma: float, grad_sq_se: float | None, z: float = RESOLVED_Z) -> NoiseScaleReading:
    """The reading of |G|^2 and tr(Sigma) estimates, given the standard error of |G|^2 (module docstring)."""
    if grad_sq_se is not None and grad_sq > z * grad_sq_se:
        return NoiseScaleReading(ratio(trace_sigma, grad_sq), None, True, grad_sq, grad_sq_se, trace_sigma)
    bound = None
    if grad_sq_se is not None:
        upper = max(grad_sq, 0.0) + z * grad_sq_se
        if upper > 0 and trace_sigma > 0 and math.isfinite(trace_sigma):
            bound = ratio(trace_sigma, upper)
    return NoiseScaleReading(None, bound, False, grad_sq, grad_sq_se, trace_sigma)


def median_reading(readings: Sequence[NoiseScaleReading]) -> NoiseScaleReading | None:
    """The median noise scale of several runs (seeds): the median value where every one has a
    value; else a lower bound, the median of each one's value or lower bound (0 where it has
    neither), since the median of numbers each at least its bound is at least the bounds' median.
    None where none was measured."""
    if not readings:
        return None
    if all(reading.resolved is not False and reading.value is not None for reading in readings):
        values = sorted(reading.value for reading in readings if reading.value is not None)
        resolved = True if all(reading.resolved for reading in readings) else None
        return NoiseScaleReading(_median(values), None, resolved)
    bounds = [max(reading.value, 0.0) if reading.value is not None and reading.resolved is not False
              else (reading.lower_bound or 0.0) for reading in readings]
    return NoiseScaleReading(None, _median(sorted(bounds)), False)


def _median(ordered: list[float]) -> float:
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def bound_text(value: float | None, lower_bound: float | None, form: str = "{:,.0f}") -> str:
    """A noise scale in a table: its value, `> N` where only a lower bound is known, else `–`."""
    if value is not None:
        return form.format(value)
    return "–" if lower_bound is None else "> " + form.format(lower_bound)


def summary_fields(readings: dict[str, NoiseScaleReading] | None) -> dict[str, Any]:
    """A run summary's noise-scale fields from the meter's last quarter: `noise_scale` holds the
    resolved values only (a reader of that field alone never takes an unresolved one for a value),
    `noise_scale_readings` every network's reading."""
    values = {name: reading.value for name, reading in (readings or {}).items()
              if reading.resolved and reading.value is not None}
    return {"noise_scale": values or None, "noise_scale_readings": readings}


def _assessed_later(record: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept no standard error, so its noise scale cannot be assessed: `resolved` None
    ("not assessed"), the values as written, no lower bound."""
    return {**record, "grad_sq_se": None, "grad_sq_avg_se": None, "resolved": None, "b_simple_lower": None}


@dataclass(frozen=True)
class NoiseScaleRecord:
    """One `kind: noise-scale` row: a network's gradient noise scale over one logged window.

    |G|^2 and tr(Sigma) come from the squared norms of gradients over a small and a big batch
    (McCandlish et al. 2018, appendix A); `*_avg` are their exponential moving averages (bias
    corrected) and `b_simple_avg` their ratio, the figure to read, where |G|^2 is resolved (the
    module docstring); else `b_simple_lower`. `trainspeed.gradients.noise_scale`.

    Version 2 added the standard errors, `resolved` and `b_simple_lower`; a row of version 1 reads
    with `resolved` None (not assessed) and its values as written."""

    KIND: ClassVar[str] = "noise-scale"
    SCHEMA_VERSION: ClassVar[int] = 2
    OLDER_VERSIONS: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: _assessed_later}

    step: int
    samples: int
    network: str
    method: str
    """How the two batches came about: `ranks` (each rank's batch and the all-reduced one),
    `micro-batches` (k slices of one rank's batch) or `previous-step` (this step's and the last one's)."""
    biased: bool
    """True for `previous-step`: the two gradients are at different weights."""
    small_batch: Batch
    big_batch: Batch
    grad_sq: float
    """|G|^2 over this window's steps."""
    trace_sigma: float
    """tr(Sigma), the per-sample gradient variance, over this window's steps."""
    b_simple: float | None
    """tr(Sigma) / |G|^2 over this window where its |G|^2 is resolved over the window's own steps
    (None otherwise: not positive, within its noise of 0, or a window of one step)."""
    grad_sq_avg: float
    trace_sigma_avg: float
    b_simple_avg: float | None
    """The moving averages' ratio where `resolved`; None where not (read `b_simple_lower`)."""
    window_steps: int
    grad_sq_se: NonNegative | None
    """The standard error of `grad_sq` (None: one step, or a row of version 1)."""
    grad_sq_avg_se: NonNegative | None
    """The standard error of `grad_sq_avg` the criterion used (None: too few steps, or version 1)."""
    resolved: bool | None
    """`grad_sq_avg` > 2 `grad_sq_avg_se`; None: a row of version 1, not assessed."""
    b_simple_lower: NonNegative | None
    """Where not resolved: tr(Sigma)_avg / (max(|G|^2_avg, 0) + 2 SE), a lower bound on B_simple
    (None where tr(Sigma)_avg is not positive or the standard error unknown)."""
    measured_steps: int | None = None
    """Steps measured from the run's start to `step` (None: a row written before the meter counted
    them, when it measured every step). `window_steps` are the measurements of this window."""
    measured_fraction: Share | None = None
    """`measured_steps` / `step`: 1 where every step measured, about 1/K with `--noise-scale-every K`."""
    measure_every: int | None = None
    """The K of `--noise-scale-every` (1: every step; None: a row written before the flag)."""
    effective_measurements: NonNegative | None = None
    """1 / sum w_i^2 of the moving averages: the measurements `grad_sq_avg_se` rests on (about 199 at
    a smoothing of 0.99 measuring every step, K times fewer measuring one step in K)."""

    @property
    def reading(self) -> NoiseScaleReading:
        """The moving averages' noise scale as a reader may act on it."""
        return NoiseScaleReading(None if self.resolved is False else self.b_simple_avg, self.b_simple_lower,
                                 self.resolved, self.grad_sq_avg, self.grad_sq_avg_se, self.trace_sigma_avg,
                                 self.measured_steps, self.measured_fraction, self.effective_measurements)


def noise_scale_at(records: Sequence[NoiseScaleRecord], samples: int,
                   network: str | None = None) -> NoiseScaleReading | None:
    """The noise scale of the last row at or before `samples`, of `network` (the first by name
    where None: a run may measure several); None where none was measured by then."""
    measured = [record for record in records if record.samples <= samples]
    if network is None and measured:
        network = min(record.network for record in measured)
    mine = [record for record in measured if record.network == network]
    return mine[-1].reading if mine else None


def noise_scale_allows(batch: float, record: NoiseScaleRecord) -> bool:
    """Whether a row's noise scale says `batch` still scales (B_simple above it): a resolved value
    above `batch`, or an unresolved window, which counts as larger than any batch tried (its
    lower bound says only how large it is at least). What a batch-size controller asks of a row."""
    return record.reading.larger_than(batch)
