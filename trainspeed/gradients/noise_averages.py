"""The noise-scale meter's arithmetic, apart from where its squared norms come from: the two-batch
estimates, the moving averages and their windows, the rows and the last quarter's reading.

The method and its estimator are described in `trainspeed.gradients.noise_scale`, whose torch
meter (its hooks on the optimizers, DDP's buckets and the accumulation's slices) is this class with
the norms fed from torch. The arithmetic here takes any scalar that supports `+` and `*` with
Python floats: torch tensors on any device, JAX arrays, NumPy numbers. So it imports no torch,
and the trainer of exported steps (`trainspeed.exported.train`), which runs where only JAX is,
measures with the same averages and writes the same rows from the norms its exported step in
slices returns. The norms stay where they were computed until a window is read (`host_floats`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from trainspeed.gradients.rows import (
    AverageWeights,
    NoiseScaleReading,
    NoiseScaleRecord,
    assess,
    standard_error,
)

SumOverRanks = Callable[[list[float]], list[float]]


def two_batch_estimates(small_sq: Any, big_sq: Any, small_batch: int, big_batch: int) -> tuple[Any, Any]:
    """(|G|^2, tr(Sigma)) from the mean squared norms over batches of `small_batch` and `big_batch`."""
    grad_sq = (big_batch * big_sq - small_batch * small_sq) / (big_batch - small_batch)
    trace_sigma = (small_sq - big_sq) / (1.0 / small_batch - 1.0 / big_batch)
    return grad_sq, trace_sigma


def partition_seed(seed: int, measurements: int) -> int:
    """The seed of the random partition of a step into micro-batches: the run's seed and the
    measurements so far, so a resumed run draws the partitions an uninterrupted one does."""
    return seed * 1_000_003 + measurements


@dataclass
class NetworkNorms:
    """One network's squared norms where they were computed: the open window's sums (0.0 until
    its first measurement) and the moving averages (None until the run's first measurement)."""

    window_small: Any = 0.0
    window_big: Any = 0.0
    window_grad_sq_sq: Any = 0.0
    """The window's sum of each step's |G|^2 estimate squared (its standard error)."""
    window_count: int = 0
    average_small: Any = None
    average_big: Any = None
    average_grad_sq_sq: Any = None
    """The moving average of each step's |G|^2 estimate squared."""
    count: int = 0
    """Measurements since the start of the run (a micro-batch of N ranks is one)."""
    weights: AverageWeights = field(default_factory=AverageWeights)
    """The moving averages' bias correction and effective sample size."""
    measured_steps: int = 0
    """Steps measured since the start of the run."""
    last_step: int | None = None
    """The step of the last measurement (None: none yet, or a checkpoint that did not keep it)."""
    pending_small: list[Any] = field(default_factory=list)
    """This step's per-bucket (ranks) or per-micro-batch squared norms, before the step closes them."""
    carried_small: float = 0.0
    """Moving averages restored from a checkpoint (host numbers), until the first measurement."""
    carried_big: float = 0.0
    carried_grad_sq_sq: float = 0.0

    def add(self, small: Any, big: Any, decay: float, weight: float, weights: tuple[float, float],
            step: int | None = None) -> None:
        """One measurement, at step `step`, added at raw weight `weight` to moving averages decayed by
        `decay` first (`AverageWeights`); `weights` (B/(B-b), b/(B-b)) make this step's |G|^2
        estimate of the two."""
        if self.average_small is None:
            self.average_small, self.average_big = self.carried_small, self.carried_big
            self.average_grad_sq_sq = self.carried_grad_sq_sq
        grad_sq = big * weights[0] - small * weights[1]
        grad_sq_sq = grad_sq * grad_sq
        self.window_small = self.window_small + small
        self.window_big = self.window_big + big
        self.window_grad_sq_sq = self.window_grad_sq_sq + grad_sq_sq
        self.average_small = self.average_small * decay + small * weight
        self.average_big = self.average_big * decay + big * weight
        self.average_grad_sq_sq = self.average_grad_sq_sq * decay + grad_sq_sq * weight
        self.window_count += 1
        self.count += 1
        self.weights.add(decay, weight)
        if step is None or step != self.last_step:
            self.measured_steps += 1
        self.last_step = step

    def close_window(self) -> None:
        self.window_small = self.window_big = self.window_grad_sq_sq = 0.0
        self.window_count = 0


@dataclass(frozen=True)
class WindowEstimate:
    """One network's reading over one logged window (host numbers, averaged over ranks)."""

    network: str
    steps: int
    small_sq: float
    big_sq: float
    average_small_sq: float
    average_big_sq: float
    grad_sq_sq: float
    """The window's mean of each step's |G|^2 estimate squared."""
    average_grad_sq_sq: float
    """Its moving average (bias corrected)."""
    count: int
    """Measurements the moving averages hold (since the start of the run)."""
    weight_sq_sum: float = 1.0
    """The moving averages' sum of squared weights (`AverageWeights`): 1 / their effective sample size."""

    @property
    def finite(self) -> bool:
        """Whether the squared norms are numbers: not where a step's gradients overflowed or
        were NaN (a diverging run), which the moving averages then hold for good. (The squares
        of the |G|^2 estimates may overflow alone: their standard error is then unknown.)"""
        return all(math.isfinite(value) for value in (self.small_sq, self.big_sq, self.average_small_sq,
                                                       self.average_big_sq))


class NoiseAverages:
    """Each trained network's moving averages of the two batches' squared norms, the methods'
    batch sizes, which steps are measured, and the rows (`trainspeed.gradients.noise_scale`)."""

    def __init__(self, networks: Iterable[str], *, world_size: int, samples_per_rank: int, micro_batches: int,
                 smoothing: float, seed: int = 0, every: int = 1, dense_steps: int = 0, plain_parts: int = 1) -> None:
        self.seed = seed
        """With the measurements so far, draws each step's random partition into micro-batches."""
        self.smoothing = smoothing
        self.world_size = world_size
        self.every = every
        """The `micro-batches` method measures the steps whose number is a multiple of this."""
        self.dense_steps = dense_steps
        """... and every step numbered below this."""
        self.step: int | None = None
        """The number of the step under way (steps completed before it), as `split` was told;
        None where nobody tells it (every step is then measured)."""
        self._set_sizes(samples_per_rank, micro_batches, plain_parts)
        self.networks: dict[str, NetworkNorms] = {name: NetworkNorms() for name in networks}
        self.history: list[tuple[int, WindowEstimate]] = []
        """(step, estimate) of every window of this invocation, for the summary's last quarter."""

    def _set_sizes(self, samples_per_rank: int, micro_batches: int, plain_parts: int = 1) -> None:
        """The method and its two batches for `samples_per_rank` samples per rank and step, in
        `micro_batches` slices where measured and `plain_parts` (the memory cap's, 1: whole) where not."""
        self.micro_batches = micro_batches
        self.plain_parts = plain_parts
        self.samples_per_rank = samples_per_rank
        if self.world_size > 1:
            self.method = "ranks"
            self.small_batch = samples_per_rank // micro_batches
            self.big_batch = self.small_batch * self.world_size
        elif micro_batches > 1:
            self.method = "micro-batches"
            self.small_batch, self.big_batch = samples_per_rank // micro_batches, samples_per_rank
        else:
            self.method, self.small_batch, self.big_batch = "previous-step", samples_per_rank, 2 * samples_per_rank
        self.weights = (self.big_batch / (self.big_batch - self.small_batch),
                        self.small_batch / (self.big_batch - self.small_batch))
        """|G|^2 = weights[0] |G_B|^2 - weights[1] |G_b|^2 (`two_batch_estimates`), per step."""

    def resize(self, samples_per_rank: int, micro_batches: int, plain_parts: int = 1) -> bool:
        """Measure at a new batch from the next step on (a batch schedule's switch): the moving
        averages (and an open window's sums) carried over to the new batches. True where the two
        batches changed."""
        old_small, old_big = self.small_batch, self.big_batch
        self._set_sizes(samples_per_rank, micro_batches, plain_parts)
        if (old_small, old_big) == (self.small_batch, self.big_batch):
            return False

        def carried(small: Any, big: Any) -> tuple[Any, Any]:
            grad_sq, trace_sigma = two_batch_estimates(small, big, old_small, old_big)
            return grad_sq + trace_sigma / self.small_batch, grad_sq + trace_sigma / self.big_batch

        for norms in self.networks.values():
            norms.carried_small, norms.carried_big = carried(norms.carried_small, norms.carried_big)
            if norms.average_small is not None:
                norms.average_small, norms.average_big = carried(norms.average_small, norms.average_big)
            if norms.window_count:
                norms.window_small, norms.window_big = carried(norms.window_small, norms.window_big)
        return True

    def measures(self, step: int | None) -> bool:
        """Whether step `step` is measured: one step in `every` of the `micro-batches` method (each of
        `dense_steps`, and every one a memory cap splits anyway); every step of the others."""
        if self.method != "micro-batches" or step is None or self.every == 1 or step < self.dense_steps:
            return True
        if self.plain_parts > 1:
            return True  # split anyway: its slices are there
        return step % self.every == 0

    def measurements(self) -> int:
        """Measurements so far (the first network's; every network is measured at each)."""
        return next(iter(self.networks.values())).count if self.networks else 0

    def _decay(self, norms: NetworkNorms, step: int | None) -> float:
        """The moving averages' decay at a measurement of step `step`: `smoothing` per step since
        the last measurement (N ranks: per measurement, as a micro-batch measures as one step)."""
        if step is None or norms.last_step is None or self.method != "micro-batches":
            return self.smoothing
        return self.smoothing ** max(1, step - norms.last_step)

    def _add(self, name: str, small: Any, big: Any) -> None:
        norms = self.networks[name]
        norms.add(small, big, self._decay(norms, self.step), 1.0 - self.smoothing, self.weights, self.step)

    @property
    def biased(self) -> bool:
        return self.method == "previous-step"

    @property
    def variance_inflation(self) -> float:
        """2 for `previous-step`: each gradient is in two neighbouring estimates, whose correlation
        (at most 1/2 for a sequence of which each term shares one input with the next) at most
        doubles the variance of their mean; 1 for estimates of disjoint steps."""
        return 2.0 if self.method == "previous-step" else 1.0

    def slices_measured(self, name: str, small_sq: Any, big_sq: Any) -> None:
        """The two norms of a step whose slices a program ran in one (the jax family, an exported
        step in slices): the mean over slices of their squared norms, and that of their mean."""
        if self.method == "micro-batches":
            self._add(name, small_sq, big_sq)

    # --- reading -------------------------------------------------------------------------------------
    def host_floats(self, values: list[Any]) -> list[float]:
        """The values as host floats, in float64 (one read of the device where they are arrays)."""
        import numpy as np

        return [float(value) for value in np.asarray([np.asarray(value, dtype=np.float64) for value in values])]

    def read_window(self, step: int, samples: int, sum_over_ranks: SumOverRanks | None = None
                    ) -> list[NoiseScaleRecord]:
        """Close every network's window at `step` (one device read; on N ranks one all-reduce of
        the small batches' sums, which `sum_over_ranks` makes) and return its rows."""
        records = []
        for name, norms in self.networks.items():
            if norms.window_count == 0:
                continue
            window_small, window_big, window_sq, average_small, average_big, average_sq = self.host_floats(
                [norms.window_small, norms.window_big, norms.window_grad_sq_sq, norms.average_small,
                 norms.average_big, norms.average_grad_sq_sq])
            if self.world_size > 1:
                assert sum_over_ranks is not None
                window_small, window_sq, average_small, average_sq = (
                    total / self.world_size for total in sum_over_ranks([window_small, window_sq, average_small,
                                                                         average_sq]))
            correction = norms.weights.correction
            steps = norms.window_count
            estimate = WindowEstimate(name, steps, window_small / steps, window_big / steps,
                                      average_small / correction, average_big / correction, window_sq / steps,
                                      average_sq / correction, norms.count, norms.weights.weight_sq_sum)
            norms.close_window()
            if not estimate.finite:
                continue  # a diverged step's gradients: no reading (`trainspeed.gradients.noise_scale`)
            self.history.append((step, estimate))
            records.append(self._record(estimate, step, samples, norms))
        return records

    def _record(self, estimate: WindowEstimate, step: int, samples: int, norms: NetworkNorms) -> NoiseScaleRecord:
        grad_sq, trace_sigma = two_batch_estimates(estimate.small_sq, estimate.big_sq, self.small_batch, self.big_batch)
        window = assess(grad_sq, trace_sigma, self._window_se(grad_sq, estimate))
        grad_sq_avg, trace_sigma_avg = two_batch_estimates(estimate.average_small_sq, estimate.average_big_sq,
                                                           self.small_batch, self.big_batch)
        average = assess(grad_sq_avg, trace_sigma_avg, self._average_se(grad_sq, grad_sq_avg, estimate))
        return NoiseScaleRecord(
            step=step, samples=samples, network=estimate.network, method=self.method, biased=self.biased,
            small_batch=self.small_batch, big_batch=self.big_batch, grad_sq=grad_sq, trace_sigma=trace_sigma,
            b_simple=window.value, grad_sq_avg=grad_sq_avg, trace_sigma_avg=trace_sigma_avg,
            b_simple_avg=average.value, window_steps=estimate.steps, grad_sq_se=window.grad_sq_se,
            grad_sq_avg_se=average.grad_sq_se, resolved=average.resolved, b_simple_lower=average.lower_bound,
            measured_steps=norms.measured_steps, measured_fraction=self._fraction(norms, step),
            measure_every=self.every if self.method == "micro-batches" else 1,
            effective_measurements=1.0 / estimate.weight_sq_sum)

    @staticmethod
    def _fraction(norms: NetworkNorms, steps: int) -> float | None:
        """The network's measured steps over the run's `steps` so far."""
        return min(1.0, norms.measured_steps / steps) if steps > 0 else None

    def _window_se(self, grad_sq: float, estimate: WindowEstimate) -> float | None:
        """The standard error of the window's mean |G|^2 over its steps."""
        return standard_error(grad_sq, estimate.grad_sq_sq, 1.0 / estimate.steps, self.variance_inflation)

    def _average_se(self, grad_sq: float, grad_sq_avg: float, estimate: WindowEstimate) -> float | None:
        """The standard error of the moving average of |G|^2: the variance of the per-step
        estimates under the average's own weights, or, where it holds one step's weight only (a
        smoothing of 0), under the window's."""
        weight_sq_sum = estimate.weight_sq_sum
        variance_from = standard_error(grad_sq_avg, estimate.average_grad_sq_sq, weight_sq_sum, self.variance_inflation)
        if variance_from is not None or weight_sq_sum < 1.0:
            return variance_from
        window = self._window_se(grad_sq, estimate)
        return None if window is None else window * math.sqrt(estimate.steps)

    def last_quarter(self, first_step: int, last_step: int) -> dict[str, NoiseScaleReading] | None:
        """Each network's B_simple from the windows in the last quarter of the steps up to
        `last_step`: the means of the window means, weighted by their steps, then the ratio where
        their |G|^2 is resolved over those steps, else a lower bound (`trainspeed.gradients.rows`)."""
        start = last_step - (last_step - min(first_step, last_step)) / 4
        readings: dict[str, NoiseScaleReading] = {}
        for name in self.networks:
            windows = [estimate for step, estimate in self.history if estimate.network == name and step >= start]
            steps = sum(estimate.steps for estimate in windows)
            if not steps:
                continue

            def mean(value: Callable[[WindowEstimate], float]) -> float:
                return sum(value(estimate) * estimate.steps for estimate in windows) / steps

            grad_sq, trace_sigma = two_batch_estimates(mean(lambda e: e.small_sq), mean(lambda e: e.big_sq),
                                                       self.small_batch, self.big_batch)
            se = standard_error(grad_sq, mean(lambda e: e.grad_sq_sq), 1.0 / steps, self.variance_inflation)
            norms = self.networks[name]
            readings[name] = dataclasses.replace(assess(grad_sq, trace_sigma, se), measured_steps=norms.measured_steps,
                                                 measured_fraction=self._fraction(norms, last_step),
                                                 effective_measurements=float(steps))
        return readings or None

    # --- checkpoint ----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """This rank's moving averages, as plain numbers (a checkpoint's rank part)."""
        state = {}
        for name, norms in self.networks.items():
            if norms.average_small is None:
                small, big, grad_sq_sq = norms.carried_small, norms.carried_big, norms.carried_grad_sq_sq
            else:
                small, big, grad_sq_sq = self.host_floats([norms.average_small, norms.average_big,
                                                           norms.average_grad_sq_sq])
            state[name] = {"small": small, "big": big, "grad_sq_sq": grad_sq_sq, "count": norms.count,
                           "correction": norms.weights.correction, "raw_weight_sq": norms.weights.raw_weight_sq,
                           "measured_steps": norms.measured_steps, "last_step": norms.last_step}
        return {"method": self.method, "smoothing": self.smoothing, "networks": state,
                "samples_per_rank": self.samples_per_rank, "micro_batches": self.micro_batches,
                "plain_parts": self.plain_parts}

    def load_state(self, state: Any) -> None:
        """Continue the moving averages a checkpoint of the same method carries, at the batches it
        measured at (a batch schedule's, where it switched before the checkpoint); else start anew:
        also where it holds no moving average of |G|^2 squared, which the standard error needs over
        the same steps as the averages."""
        if not isinstance(state, dict):
            return
        sizes = (state.get("samples_per_rank"), state.get("micro_batches"), state.get("plain_parts", 1))
        if all(isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in sizes):
            self._set_sizes(*sizes)
        if state.get("method") != self.method or state.get("smoothing") != self.smoothing:
            return
        for name, saved in (state.get("networks") or {}).items():
            if name in self.networks and isinstance(saved, dict) and "grad_sq_sq" in saved:
                norms = self.networks[name]
                norms.carried_small, norms.carried_big = float(saved["small"]), float(saved["big"])
                norms.carried_grad_sq_sq = float(saved["grad_sq_sq"])
                norms.count = int(saved["count"])
                norms.weights, norms.measured_steps, norms.last_step = _kept_weights(saved, self.smoothing, norms.count)


def _kept_weights(saved: dict[str, Any], smoothing: float, count: int) -> tuple[AverageWeights, int, int | None]:
    """The moving averages' weights, measured steps and last measured step a checkpoint keeps; one
    written before the meter kept them measured every step, at the smoothing."""
    if "correction" not in saved:
        return AverageWeights.constant(smoothing, count), count, None
    last = saved.get("last_step")
    return (AverageWeights(float(saved["correction"]), float(saved["raw_weight_sq"])), int(saved["measured_steps"]),
            None if last is None else int(last))


__all__ = ["NetworkNorms", "NoiseAverages", "WindowEstimate", "partition_seed", "two_batch_estimates"]
