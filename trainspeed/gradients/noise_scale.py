"""The gradient noise scale B_simple = tr(Sigma) / |G|^2, measured while training.

McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training", appendix A): the squared norm
of a gradient over a batch of b samples has expectation |G|^2 + tr(Sigma)/b, where G is the true
gradient and Sigma the per-sample covariance. Two batch sizes b < B give unbiased estimates:

    |G|^2     = (B |G_B|^2 - b |G_b|^2) / (B - b)
    tr(Sigma) = (|G_b|^2 - |G_B|^2) / (1/b - 1/B)

Both are noisy, so each is smoothed by an exponential moving average (bias corrected) before the
ratio is taken, as AdaptDL's `GradientNoiseScale` does. Where the two batches come from:

- N ranks (`ranks`): each rank's gradient before the all-reduce (b = B/N) and the averaged one (B).
  DDP's communication hook sees each bucket before it is averaged; the averaging hook of several
  networks sees the flat gradient before and after. Each rank keeps its own moving averages on the
  device; they are linear in the squared norms, so one small all-reduce at the logging interval
  averages them over ranks and nothing is communicated per step.
- 1 rank, `--noise-scale-micro-batches k` (`micro-batches`): the step runs its backward over k
  slices of the batch (b = B/k); their gradients are averaged before the one optimizer step, which
  therefore takes the same update as one backward over the whole batch
  (`trainspeed.gradients.accumulation`, which a batch schedule past a device's memory cap steps
  through too). The slices are a random partition, drawn from the seed and the measurements so far
  (so a resumed run draws the same): a loader's batch may hold neighbouring samples next to each
  other (sorted for its reads), and contiguous slices of it would differ by more than independent
  batches do. On N ranks, micro-batches of a step each measure as one step of b = B/(N k).
- 1 rank otherwise (`previous-step`): this step's gradient and the last one's (b = B, B = 2B). The
  weights moved between the two, so the estimate is biased (the rows say so); it is cheap.

How often (`--noise-scale-every K`): a measurement over micro-batches costs passes (the step's
forward and backward run over k slices, and on a small model each slice costs nearly what the
whole batch does: up to about twice a plain step, `docs/results/noise_scale_cost.md`), so one rank
measures one step in K (those whose number is a multiple of K) over its micro-batches and trains
the others plainly, as a run without the meter does. Which steps are measured depends on their
numbers alone, never on their gradients, so each measurement is as unbiased as before. The moving
averages decay by `smoothing` per step (`smoothing`^gap between two measurements) and add each
measurement at the same weight, so they reach as far back in steps as before and hold about K
times fewer measurements: their variance is about K times that of averages measured at every
step, which their standard error, and so "resolved", says (`trainspeed.gradients.rows.AverageWeights`). A step a batch schedule's memory cap
splits anyway is measured every time (its slices are there: their norms are all it adds), and so is
every step numbered below `dense_steps` (auto's first reading, `trainspeed.train.batch_schedule`).
The other methods measure every step: N ranks have the rank's gradient and the averaged one anyway,
and `previous-step` adds a copy of the gradient and three dot products. The rows and the summary say
how many steps were measured (`measured_steps`, `measured_fraction`, `measure_every`).

A batch schedule changes the batches at a switch (`resize`): the moving averages estimate
E|G_b|^2 = |G|^2 + tr(Sigma)/b, linear in the two, so they are carried over to the new batches
exactly, as their |G|^2 and tr(Sigma) put at the new sizes.

The norms stay on the device (an XLA step stays one graph) and are read at the logging interval
only. A window whose squared norms are not numbers (a step whose gradients overflowed or were NaN:
the run diverged, `trainspeed.train.loop`) gives no row and no reading: the moving averages hold
that step from then on, so no later window of the run gives one either. The gradient is the raw one, before the optimizer's preconditioning (Adam's): B_simple is a
property of the data and the model at these weights, whatever the optimizer.

Near convergence the true |G|^2 can be within its noise of 0, and the ratio is then no number. So
the meter also keeps, on the device beside the averages, the sum and the moving average of each
step's |G|^2 estimate squared: their variance gives the standard error of the |G|^2 averages, and
a noise scale whose |G|^2 is not above 2 standard errors is reported as unresolved, with a lower
bound instead of a value (the criterion and the bound: `trainspeed.gradients.rows`). On N ranks
each rank's estimate uses its own batch (b) against the averaged one (B); their variance is at
least that of the estimate from the ranks' mean, so the standard error errs high, towards
"unresolved".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed as dist

from trainspeed.gradients.accumulation import GradientAccumulation, batch_size, gradients, split_batch
from trainspeed.gradients.modes import DEFAULT_MEASURE_EVERY
from trainspeed.gradients.rows import (
    AverageWeights,
    NoiseScaleReading,
    NoiseScaleRecord,
    assess,
    standard_error,
)
from trainspeed.workloads.base import Batch, Trainable

SumOverRanks = Callable[[list[float]], list[float]]

NOISE_SCALE_MODES = ("on", "off")


def squared_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """sum |t|^2 over tensors, in float32, as a device scalar."""
    norms = torch._foreach_norm([tensor.float() if tensor.dtype != torch.float32 else tensor for tensor in tensors])
    return torch.stack(norms).pow(2).sum()


def two_batch_estimates(small_sq: float, big_sq: float, small_batch: int, big_batch: int) -> tuple[float, float]:
    """(|G|^2, tr(Sigma)) from the mean squared norms over batches of `small_batch` and `big_batch`."""
    grad_sq = (big_batch * big_sq - small_batch * small_sq) / (big_batch - small_batch)
    trace_sigma = (small_sq - big_sq) / (1.0 / small_batch - 1.0 / big_batch)
    return grad_sq, trace_sigma


@dataclass
class NetworkNorms:
    """One network's squared norms on the device: the open window's sums and the moving averages."""

    window_small: torch.Tensor | None = None
    window_big: torch.Tensor | None = None
    window_grad_sq_sq: torch.Tensor | None = None
    """The window's sum of each step's |G|^2 estimate squared (its standard error)."""
    window_count: int = 0
    average_small: torch.Tensor | None = None
    average_big: torch.Tensor | None = None
    average_grad_sq_sq: torch.Tensor | None = None
    """The moving average of each step's |G|^2 estimate squared."""
    count: int = 0
    """Measurements since the start of the run (a micro-batch of N ranks is one)."""
    weights: AverageWeights = field(default_factory=AverageWeights)
    """The moving averages' bias correction and effective sample size."""
    measured_steps: int = 0
    """Steps measured since the start of the run."""
    last_step: int | None = None
    """The step of the last measurement (None: none yet, or a checkpoint that did not keep it)."""
    pending_small: list[torch.Tensor] = field(default_factory=list)
    """This step's per-bucket (ranks) or per-micro-batch squared norms, before the step closes them."""
    carried_small: float = 0.0
    """Moving averages restored from a checkpoint (host numbers), until the first measurement."""
    carried_big: float = 0.0
    carried_grad_sq_sq: float = 0.0

    def add(self, small: torch.Tensor, big: torch.Tensor, decay: float, weight: float, weights: tuple[float, float],
            step: int | None = None) -> None:
        """One measurement, at step `step`, added at raw weight `weight` to moving averages decayed by
        `decay` first (`AverageWeights`); `weights` (B/(B-b), b/(B-b)) make this step's |G|^2
        estimate of the two."""
        if self.window_small is None:
            self.window_small, self.window_big = torch.zeros_like(small), torch.zeros_like(big)
            self.window_grad_sq_sq = torch.zeros_like(big)
            self.average_small = torch.full_like(small, self.carried_small)
            self.average_big = torch.full_like(big, self.carried_big)
            self.average_grad_sq_sq = torch.full_like(big, self.carried_grad_sq_sq)
        grad_sq = big * weights[0] - small * weights[1]
        grad_sq_sq = grad_sq * grad_sq
        self.window_small.add_(small)
        self.window_big.add_(big)
        self.window_grad_sq_sq.add_(grad_sq_sq)
        self.average_small.mul_(decay).add_(small, alpha=weight)
        self.average_big.mul_(decay).add_(big, alpha=weight)
        self.average_grad_sq_sq.mul_(decay).add_(grad_sq_sq, alpha=weight)
        self.window_count += 1
        self.count += 1
        self.weights.add(decay, weight)
        if step is None or step != self.last_step:
            self.measured_steps += 1
        self.last_step = step


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


class NoiseScaleMeter:
    """Measures each trained network's noise scale; see the module docstring for the methods."""

    def __init__(self, trainable: Trainable, *, world_size: int, samples_per_rank: int, micro_batches: int,
                 smoothing: float, seed: int = 0, every: int = 1, dense_steps: int = 0, plain_parts: int = 1) -> None:
        self.trainable = trainable
        self.seed = seed
        """With the measurements so far, draws each step's random partition into micro-batches."""
        self.smoothing = smoothing
        self.world_size = world_size
        self.every = every
        """The `micro-batches` method measures the steps whose number is a multiple of this (module docstring)."""
        self.dense_steps = dense_steps
        """... and every step numbered below this."""
        self.step: int | None = None
        """The number of the step under way (steps completed before it), as `split` was told;
        None where nobody tells it (every step is then measured)."""
        self._set_sizes(samples_per_rank, micro_batches, plain_parts)
        self.networks: dict[str, NetworkNorms] = {name: NetworkNorms() for name in trainable.optimizers}
        self._previous: dict[str, torch.Tensor] = {}
        self.accumulation: GradientAccumulation | None = None
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
        """|G|^2 = weights[0] |G_B|^2 - weights[1] |G_b|^2 (`two_batch_estimates`), per step on the device."""

    def resize(self, samples_per_rank: int, micro_batches: int, plain_parts: int = 1) -> None:
        """Measure at a new batch from the next step on (a batch schedule's switch): the moving
        averages (and an open window's sums) carried over to the new batches (module docstring)."""
        old_small, old_big = self.small_batch, self.big_batch
        self._set_sizes(samples_per_rank, micro_batches, plain_parts)
        if (old_small, old_big) == (self.small_batch, self.big_batch):
            return
        self._previous.clear()

        def carried(small: Any, big: Any) -> tuple[Any, Any]:
            grad_sq, trace_sigma = two_batch_estimates(small, big, old_small, old_big)
            return grad_sq + trace_sigma / self.small_batch, grad_sq + trace_sigma / self.big_batch

        for norms in self.networks.values():
            norms.carried_small, norms.carried_big = carried(norms.carried_small, norms.carried_big)
            if norms.average_small is not None:
                norms.average_small, norms.average_big = carried(norms.average_small, norms.average_big)
                norms.window_small, norms.window_big = carried(norms.window_small, norms.window_big)

    def measures(self, step: int | None) -> bool:
        """Whether step `step` is measured: one step in `every` of the `micro-batches` method (each of
        `dense_steps`, and every one a memory cap splits anyway); every step of the others."""
        if self.method != "micro-batches" or step is None or self.every == 1 or step < self.dense_steps:
            return True
        if self.plain_parts > 1:
            return True  # split anyway: its slices are there
        return step % self.every == 0

    def _decay(self, norms: NetworkNorms, step: int | None) -> float:
        """The moving averages' decay at a measurement of step `step`: `smoothing` per step since
        the last measurement (N ranks: per measurement, as a micro-batch measures as one step)."""
        if step is None or norms.last_step is None or self.method != "micro-batches":
            return self.smoothing
        return self.smoothing ** max(1, step - norms.last_step)

    def _add(self, name: str, small: torch.Tensor, big: torch.Tensor) -> None:
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

    # --- hooks ---------------------------------------------------------------------------------------
    def attach(self, gradient_sync: str, ddp_modules: dict[str, Any]) -> None:
        """Register the hooks of this run's gradient averaging (`trainspeed.train.parallel`); the
        averaging hook of several networks calls `ranks_step` itself."""
        if gradient_sync == "ddp":
            for name, module in ddp_modules.items():
                module.register_comm_hook(name, self._ddp_comm_hook)
        for name, optimizer in self.trainable.optimizers.items():
            if gradient_sync == "ddp":
                optimizer.register_step_pre_hook(self._averaged_hook(name))
            elif gradient_sync == "single":
                optimizer.register_step_pre_hook(self._single_rank_hook(name))

    def _ddp_comm_hook(self, name, bucket):  # unannotated: DDP checks a hook's annotations as objects
        """DDP's average of the bucket, after this rank's squared norm of it.

        The all-reduce is waited for here and the hook returns a future that is already complete.
        DDP's own `allreduce_hook` chains a Python callback (`Future.then`) instead. That callback's
        closure is released on the communication backend's thread after DDP has moved on, and the
        release takes the GIL there. Found under load on two gloo ranks: a loader worker forked at that
        moment deadlocked in CPython's after-fork lock, and a rank exiting at that moment aborted
        ("terminate called without an active exception"). The wait costs no host time with NCCL
        (it orders the streams); with gloo it gives up overlapping the buckets with the backward."""
        buffer = bucket.buffer()
        flat = buffer.float() if buffer.dtype != torch.float32 else buffer
        self.networks[name].pending_small.append(torch.dot(flat, flat))
        buffer.div_(dist.get_world_size())
        dist.all_reduce(buffer)
        averaged: torch.futures.Future = torch.futures.Future()
        averaged.set_result(buffer)
        return averaged

    def _averaged_hook(self, name: str):
        def measure(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
            grads = gradients(optimizer)
            norms = self.networks[name]
            if grads and norms.pending_small:
                self.ranks_step(name, torch.stack(norms.pending_small).sum(), squared_norm(grads))
            norms.pending_small.clear()

        return measure

    def ranks_step(self, name: str, local_sq: torch.Tensor, averaged_sq: torch.Tensor) -> None:
        """One step on N ranks: this rank's squared norm before the all-reduce, and after it."""
        self._add(name, local_sq, averaged_sq)

    def _single_rank_hook(self, name: str):
        def measure(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
            if self.method != "previous-step":
                return  # micro-batches: measured from the accumulation's slices (`micro_batch`)
            grads = gradients(optimizer)
            if grads:
                self._previous_step(name, grads)

        return measure

    def _previous_step(self, name: str, grads: list[torch.Tensor]) -> None:
        flat = torch.cat([grad.reshape(-1).float() for grad in grads])
        previous = self._previous.get(name)
        if previous is not None and previous.shape == flat.shape:
            current_sq, previous_sq = torch.dot(flat, flat), torch.dot(previous, previous)
            big = (current_sq + previous_sq + 2 * torch.dot(flat, previous)) / 4
            self._add(name, (current_sq + previous_sq) / 2, big)
        self._previous[name] = flat

    def accumulate_with(self, accumulation: GradientAccumulation) -> None:
        """Measure one rank's micro-batches from the slices `accumulation` steps through."""
        self.accumulation = accumulation
        accumulation.observers.append(self)

    def micro_batch(self, name: str, grads: list[torch.Tensor]) -> None:
        if self.method == "micro-batches":
            self.networks[name].pending_small.append(squared_norm(grads))

    def accumulated(self, name: str, grads: list[torch.Tensor]) -> None:
        """The mean of a step's slices: the big batch's gradient, beside the slices' mean squared norm."""
        norms = self.networks[name]
        if self.method == "micro-batches" and norms.pending_small:
            small = torch.stack(norms.pending_small).mean()
            norms.pending_small.clear()
            self._add(name, small, squared_norm(grads))

    def slices_measured(self, name: str, small_sq: torch.Tensor, big_sq: torch.Tensor) -> None:
        """The two norms of a step whose slices a trainable ran in its own program (the jax family)."""
        if self.method == "micro-batches":
            self._add(name, small_sq, big_sq)

    # --- the step ------------------------------------------------------------------------------------
    def partition(self, size: int) -> torch.Tensor | None:
        """The random order of a step's samples before they are cut into micro-batches (None unless
        the method is `micro-batches`), drawn from the seed and the measurements so far."""
        if self.method != "micro-batches":
            return None
        count = next(iter(self.networks.values())).count if self.networks else 0
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + count)
        return torch.randperm(size, generator=generator)

    def split(self, step: int, size: int) -> tuple[int, torch.Tensor | None]:
        """How step number `step` (steps completed before it) of `size` samples per rank runs: its
        micro-batches and the random order they are cut from. A measured step of the
        `micro-batches` method runs over the meter's slices; any other over the memory cap's
        (`plain_parts`) on one rank, over `micro_batches` on N ranks (each measures as a step)."""
        self.step = step
        if self.method == "ranks":
            return self.micro_batches, None
        if self.method == "micro-batches" and self.measures(step):
            return self.micro_batches, self.partition(size)
        return self.plain_parts, None

    def run_step(self, step: Callable[[Batch], torch.Tensor], batch: Batch, number: int = 0) -> torch.Tensor:
        """Run `step(batch)` as step `number` of the run, split as `split` says (the mean of its
        slices' losses), through the accumulation the meter measures from."""
        if self.accumulation is None:
            self.accumulate_with(GradientAccumulation(self.trainable))
        assert self.accumulation is not None
        return self.accumulation.run(step, batch, *self.split(number, batch_size(batch)))

    # --- reading -------------------------------------------------------------------------------------
    def read_window(self, step: int, samples: int, sum_over_ranks: SumOverRanks) -> list[NoiseScaleRecord]:
        """Close every network's window at `step` (one device read; on N ranks one all-reduce of
        the small batches' sums, which `sum_over_ranks` makes) and return its rows."""
        records = []
        for name, norms in self.networks.items():
            if norms.window_count == 0:
                continue
            window_small, window_big, window_sq, average_small, average_big, average_sq = (
                float(value) for value in torch.stack(
                    [norms.window_small, norms.window_big, norms.window_grad_sq_sq, norms.average_small,
                     norms.average_big, norms.average_grad_sq_sq]).double().cpu())
            if self.world_size > 1:
                window_small, window_sq, average_small, average_sq = (
                    total / self.world_size for total in sum_over_ranks([window_small, window_sq, average_small,
                                                                         average_sq]))
            correction = norms.weights.correction
            steps = norms.window_count
            estimate = WindowEstimate(name, steps, window_small / steps, window_big / steps,
                                      average_small / correction, average_big / correction, window_sq / steps,
                                      average_sq / correction, norms.count, norms.weights.weight_sq_sum)
            norms.window_small.zero_()
            norms.window_big.zero_()
            norms.window_grad_sq_sq.zero_()
            norms.window_count = 0
            if not estimate.finite:
                continue  # a diverged step's gradients: no reading (module docstring)
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
                small, big, grad_sq_sq = (float(value) for value in torch.stack(
                    [norms.average_small, norms.average_big, norms.average_grad_sq_sq]).cpu())
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


__all__ = ["DEFAULT_MEASURE_EVERY", "NoiseScaleMeter", "split_batch", "two_batch_estimates"]
