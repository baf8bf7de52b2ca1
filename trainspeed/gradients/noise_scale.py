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

from typing import Any, Callable

import torch
import torch.distributed as dist

from trainspeed.gradients.accumulation import GradientAccumulation, batch_size, gradients, split_batch
from trainspeed.gradients.modes import DEFAULT_MEASURE_EVERY
from trainspeed.gradients.noise_averages import NoiseAverages, partition_seed, two_batch_estimates
from trainspeed.workloads.base import Batch, Trainable


def squared_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """sum |t|^2 over tensors, in float32, as a device scalar."""
    norms = torch._foreach_norm([tensor.float() if tensor.dtype != torch.float32 else tensor for tensor in tensors])
    return torch.stack(norms).pow(2).sum()


class NoiseScaleMeter(NoiseAverages):
    """Measures each trained network's noise scale from torch's gradients; see the module docstring
    for the methods (the averages and rows: `NoiseAverages`)."""

    def __init__(self, trainable: Trainable, *, world_size: int, samples_per_rank: int, micro_batches: int,
                 smoothing: float, seed: int = 0, every: int = 1, dense_steps: int = 0, plain_parts: int = 1) -> None:
        super().__init__(trainable.optimizers, world_size=world_size, samples_per_rank=samples_per_rank,
                         micro_batches=micro_batches, smoothing=smoothing, seed=seed, every=every,
                         dense_steps=dense_steps, plain_parts=plain_parts)
        self.trainable = trainable
        self._previous: dict[str, torch.Tensor] = {}
        self.accumulation: GradientAccumulation | None = None

    def resize(self, samples_per_rank: int, micro_batches: int, plain_parts: int = 1) -> bool:
        changed = super().resize(samples_per_rank, micro_batches, plain_parts)
        if changed:
            self._previous.clear()  # a gradient of the old batch is no previous step of the new one
        return changed

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
        moment deadlocked in CPython's after-fork lock. The wait costs no host time with NCCL
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

    # --- the step ------------------------------------------------------------------------------------
    def partition(self, size: int) -> torch.Tensor | None:
        """The random order of a step's samples before they are cut into micro-batches (None unless
        the method is `micro-batches`), drawn from the seed and the measurements so far."""
        if self.method != "micro-batches":
            return None
        generator = torch.Generator().manual_seed(partition_seed(self.seed, self.measurements()))
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
    def host_floats(self, values: list[Any]) -> list[float]:
        """One copy of the device's scalars to the host (an XLA or CUDA tensor read once, not six times)."""
        if not all(isinstance(value, torch.Tensor) for value in values):
            return super().host_floats(values)
        return [float(value) for value in torch.stack([value.reshape(()) for value in values]).double().cpu()]


__all__ = ["DEFAULT_MEASURE_EVERY", "NoiseScaleMeter", "split_batch", "two_batch_estimates"]
