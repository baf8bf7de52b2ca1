"""The workload protocol: what is trained, independent of where and how it runs.

The bench and the trainer speak only to this protocol and to the target protocol
(`trainspeed.targets.base`), so a new model is one new package plus one registry line.

A workload builds a `Trainable` (networks + optimizers + one training step), makes synthetic
batches on the host, and knows its FLOPs per sample. The target decides the device, the execution
mode (eager / compile / XLA lazy) and the precision (autocast); it does so through two hooks on the
Trainable: `wrap` (compile or DDP-wrap each network) and the autocast context around `train_step`.
"""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, runtime_checkable

import torch
from torch import nn

from trainspeed.data.base import Batch

if TYPE_CHECKING:
    from trainspeed.data.base import BatchLoader, LoaderConfig

ModuleWrapper = Callable[[nn.Module], nn.Module]
CheckpointFunction = Callable[..., torch.Tensor]
"""`checkpoint(function, *tensors)`: run `function` keeping only its inputs; it reruns in backward."""

class Trainable(ABC):
    """Networks, their optimizers and one training step.

    Life cycle, driven by a target or the trainer:
      1. `to(device)` moves every network (optimizers must not exist yet: XLA needs that order).
      2. `setup_optimizers(fused)` creates the optimizers for the moved parameters (`fused`: the
         device has fast fused optimizer kernels; pass it on to torch.optim where supported).
      3. `use_activation_checkpoint(fn)` hands over the device's way to recompute activations
         (only workloads that recompute need it).
      4. `wrap(fn)` optionally wraps each trained network (torch.compile, DDP); `train_step` must
         call networks through `self.wrapped`, never `self.networks`, so the wrapping takes effect.
      5. `train_step(batch)` runs forward, backward and the parameter update, and returns the
         loss as a detached device tensor (reading its value would force a sync, so it does not).
    """

    buffers_in_networks = True
    """The networks' buffers hold this rank's values, which a checkpoint keeps per rank. A target that
    keeps a step's state elsewhere (the jax family's device arrays, one rank) has them in `state_dict`."""

    def __init__(self, networks: Mapping[str, nn.Module]) -> None:
        self.networks: dict[str, nn.Module] = dict(networks)
        self.wrapped: dict[str, nn.Module] = dict(networks)
        self.optimizers: dict[str, torch.optim.Optimizer] = {}

    def to(self, device: torch.device) -> "Trainable":
        for network in self.networks.values():
            network.to(device)
        self.wrapped = dict(self.networks)
        return self

    @abstractmethod
    def setup_optimizers(self, fused: bool = False) -> None:
        """Create `self.optimizers` for the current parameters."""

    def use_activation_checkpoint(self, checkpoint: CheckpointFunction) -> None:
        """Called by the target before `wrap`; a workload that recomputes activations keeps `checkpoint`."""

    def trained_network_names(self) -> list[str]:
        """Networks that receive gradients (and so get compiled / DDP-wrapped); EMA copies do not."""
        return list(self.networks)

    def wrap(self, wrapper: ModuleWrapper) -> None:
        for name in self.trained_network_names():
            self.wrapped[name] = wrapper(self.networks[name])

    @abstractmethod
    def train_step(self, batch: Batch) -> torch.Tensor:
        """Forward + backward + optimizer step on one batch; returns the detached loss."""

    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor] | None:
        """Additive sums over one validation batch, as device tensors of any shape (a loss sum, a
        count of correct answers, a class histogram). The trainer adds them over every batch and
        rank and passes the totals to `summarize_eval`. Return None (the default) where the
        workload has no held-out metric, as a GAN has none; the trainer then skips validation."""
        return None

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        """Metrics of the whole validation split from the summed `eval_metrics` (host tensors).

        The names become the summary's `validation` entries and TensorBoard's `val/<name>`
        scalars. The default reports every scalar total as it is."""
        return {name: float(total) for name, total in totals.items() if total.numel() == 1}

    def parameter_count(self) -> int:
        return sum(p.numel() for n in self.networks.values() for p in n.parameters())

    def state_dict(self) -> dict:
        """Everything needed to resume: network weights and optimizer states."""
        return {
            "networks": {name: net.state_dict() for name, net in self.networks.items()},
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        for name, net in self.networks.items():
            net.load_state_dict(state["networks"][name])
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][name])


def setup_optimizers(trainable: Trainable, fused: bool) -> None:
    """`trainable.setup_optimizers(fused)`, also for a workload written before the method took
    `fused` (`def setup_optimizers(self)`): it gets the call it declares, and unfused optimizers.
    Every caller (the targets, the FLOP count, the server, a resume's checks) goes through here."""
    try:
        parameters = inspect.signature(trainable.setup_optimizers).parameters
    except (TypeError, ValueError):  # a builtin or C callable: call it the documented way
        parameters = {"fused": None}
    takes_fused = "fused" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if takes_fused:
        trainable.setup_optimizers(fused=fused)
    else:
        trainable.setup_optimizers()


@runtime_checkable
class Workload(Protocol):
    """What a workload package exposes (docs/workloads.md has a worked example).

    `name`          short name used in result rows.
    `sizes`         the size names `build` accepts, smallest first.

    Optional attributes (read with `getattr`, so a workload without them still is one):
    `default_size`     the size every command uses without `--size` (default: `sizes[0]`).
    `size_switches`    names a size may carry after `+` (`base+bf16-stream`); `build` reads them.
    `reference_batch`  the global batch the optimizers' own learning rates were tuned at; the
                       trainer scales them by its `--lr-scaling` rule from there (default
                       `trainspeed.workloads.DEFAULT_REFERENCE_BATCH`); None: use them as set, at every batch.
    `version`          a version string recorded with the workload's identity.
    """

    name: str
    sizes: tuple[str, ...]

    def build(self, size: str, seed: int = 0) -> Trainable:
        """A fresh Trainable of that size, on the host, deterministic for a seed."""
        ...

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        """A host batch with realistic shapes and value ranges (no data IO)."""
        ...

    def flops_per_sample(self, size: str) -> float:
        """Training FLOPs (forward + backward, multiply-add = 2 FLOPs) per sample."""
        ...


@runtime_checkable
class WorkloadWithData(Workload, Protocol):
    """A workload that can also train on real data (the trainer's `--data DIR`)."""

    def open_dataset(self, path: "os.PathLike[str] | str", size: str, config: "LoaderConfig") -> "BatchLoader":
        """A loader of host batches (same keys and dtypes as `synthetic_batch`) for one rank.

        `size` is the model the data will train: data that model cannot take (StyleGAN3: images of
        another resolution) is refused here with a UsageError, before any training starts.
        """
        ...
