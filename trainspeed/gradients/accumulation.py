"""One optimizer step over k micro-batches: the mean of k slices' gradients, then one update.

A workload's `train_step` runs forward, backward and its optimizers' steps in one call, so a step
over k slices calls it k times and holds back the first k-1 updates: a step pre-hook on every
optimizer keeps each slice's gradient and takes it away (an optimizer skips parameters without a
gradient), and at the k-th puts the mean of all k in place, so the one update is the whole batch's
(the mean of equal slices' mean losses is the batch's mean loss). Both users of micro-batches step
through here: the noise-scale meter, which reads the slices' gradients from the same hooks
(`AccumulationObserver`), and a batch schedule past the memory cap of a device.

The hooks are registered after those of the gradient averaging and the meter, so on N ranks each
slice's gradient is already the average over ranks when it is kept.

A trainable whose gradients exist only inside its compiled step (the jax family) cannot be held
back between slices from here: it runs a step's slices in its own program (`StepsInSlices`) and
hands back the two squared norms an observer would have taken from the slices' gradients.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

import torch

from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable


class AccumulationObserver(Protocol):
    """Sees every slice's gradient of a network, then their mean (the noise-scale meter)."""

    def micro_batch(self, name: str, grads: list[torch.Tensor]) -> None: ...

    def accumulated(self, name: str, grads: list[torch.Tensor]) -> None: ...

    def slices_measured(self, name: str, small_sq: torch.Tensor, big_sq: torch.Tensor) -> None:
        """A step in slices that a trainable ran itself (`StepsInSlices`): the mean over slices of
        their gradients' squared norms, and the squared norm of their mean."""


@runtime_checkable
class StepsInSlices(Protocol):
    """A trainable that runs one optimizer step over equal slices of a batch in its own program."""

    def train_step_in_slices(self, batch: Batch, parts: int, permutation: torch.Tensor | None
                             ) -> tuple[torch.Tensor, dict[str, tuple[torch.Tensor, torch.Tensor]]]:
        """(the mean of the slices' losses, per optimizer (mean squared norm of the slices'
        gradients, squared norm of their mean)), the slices cut as `split_batch` cuts them."""


class GradientAccumulation:
    """The micro-batch steps of one trainable (module docstring); one per trainable."""

    def __init__(self, trainable: Trainable) -> None:
        self.trainable = trainable
        self.observers: list[AccumulationObserver] = []
        self._parts = 1
        self._index = 0
        self._accumulated: dict[str, list[torch.Tensor]] = {}
        self._hook_calls = 0
        """Step pre-hook calls so far: a step that runs its optimizers without them (a compiled
        step may) would leave the micro-batches' updates unaccumulated, so it is refused."""
        for name, optimizer in trainable.optimizers.items():
            optimizer.register_step_pre_hook(self._hook(name))

    def _hook(self, name: str) -> Callable[[torch.optim.Optimizer, tuple, dict], None]:
        def accumulate(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
            self._hook_calls += 1
            if self._parts == 1:
                return
            grads = gradients(optimizer)
            if not grads:
                return
            for observer in self.observers:
                observer.micro_batch(name, grads)
            accumulated = self._accumulated.get(name)
            if accumulated is None:
                accumulated = self._accumulated[name] = [torch.zeros_like(grad) for grad in grads]
            torch._foreach_add_(accumulated, grads)
            if self._index < self._parts - 1:
                for group in optimizer.param_groups:
                    for parameter in group["params"]:
                        parameter.grad = None
                return
            torch._foreach_copy_(grads, accumulated)
            torch._foreach_div_(grads, float(self._parts))
            for tensor in accumulated:
                tensor.zero_()
            for observer in self.observers:
                observer.accumulated(name, grads)

        return accumulate

    def run(self, step: Callable[[Batch], torch.Tensor], batch: Batch, parts: int,
            permutation: torch.Tensor | None = None) -> torch.Tensor:
        """`step(batch)` as one optimizer step over `parts` equal slices of the batch (of its samples in
        the order of `permutation` where given); the mean of the slices' losses."""
        if parts == 1:
            return step(batch)
        if isinstance(self.trainable, StepsInSlices):
            loss, norms = self.trainable.train_step_in_slices(batch, parts, permutation)
            for name, (small_sq, big_sq) in norms.items():
                for observer in self.observers:
                    observer.slices_measured(name, small_sq, big_sq)
            return loss
        losses = []
        calls_before = self._hook_calls
        self._parts = parts
        try:
            for index, part in enumerate(split_batch(batch, parts, permutation)):
                self._index = index
                losses.append(step(part))
        finally:
            self._parts, self._index = 1, 0
        if self._hook_calls - calls_before < parts:
            raise UsageError("train: micro-batches (--noise-scale-micro-batches, or a --batch-schedule past "
                             "--max-batch-per-device): the workload's step ran its optimizer without its step hooks "
                             "(a compiled optimizer step does), so the micro-batches cannot be accumulated into one "
                             "update; drop the flag that asks for them")
        return torch.stack(losses).mean()


def gradients(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [parameter.grad for group in optimizer.param_groups for parameter in group["params"]
            if parameter.grad is not None]


def split_batch(batch: Batch, parts: int, permutation: torch.Tensor | None = None) -> list[Batch]:
    """The batch as `parts` equal slices along its first dimension, of the samples in the order of
    `permutation` (host indices) where given."""
    sizes = {tensor.shape[0] for tensor in batch.values()}
    if len(sizes) != 1 or next(iter(sizes)) % parts:
        raise UsageError(f"train: micro-batches: {parts} slices need a batch whose every tensor has a first "
                         f"dimension divisible by {parts}, got {sorted(sizes)}")
    if permutation is not None:
        batch = {key: tensor.index_select(0, permutation.to(tensor.device)) for key, tensor in batch.items()}
    chunks = {key: tensor.chunk(parts) for key, tensor in batch.items()}
    return [{key: chunk[index] for key, chunk in chunks.items()} for index in range(parts)]


def batch_size(batch: Batch) -> int:
    return next(iter(batch.values())).shape[0]


__all__: list[Any] = ["AccumulationObserver", "GradientAccumulation", "StepsInSlices", "batch_size", "gradients", "split_batch"]
