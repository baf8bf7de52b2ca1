"""One loader per device, for a process that drives several devices with one program (a mesh of
the jax family, `train --nproc N`; XLA's SPMD): each device's slice of every batch is read by a
loader of its own, with its own worker processes, as the study's TPU cores each read their own.

Loader d of process r (of M processes of N devices each) reads as rank r*N + d of M*N at the
per-device batch. A global batch is cut into contiguous slices, one per rank (`trainspeed.data.order`),
so the N loaders of a process read together exactly the samples its one loader would read at N
times the batch, and the devices of all processes the samples one device reads at the global batch.
Each device's slice is sorted on its own (a forward sweep of its loader), so which samples share
a device differs from one loader's cut; the global batch, and the mean gradient over it, does not.
The batch handed on is the parts side by side, device 0's first: the mesh splits it on its first
dimension, so each device receives the part its own loader read. (A batch schedule's larger batch
joins several of these batches, and then a device's slice spans several loaders' parts: the same
samples, cut otherwise.) The parts are joined on the host before the mesh splits them again: one
copy of the batch, which putting each part on its device directly would save.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import torch

from trainspeed.data.base import Batch, BatchLoader, LoaderConfig
from trainspeed.data.loader import check_same_order


def device_configs(config: LoaderConfig, devices: int) -> list[LoaderConfig]:
    """The loader configs of a process's `devices` devices, from the process's own (`config`: its
    rank among processes, at the batch of all its devices)."""
    if config.batch_size % devices:
        raise ValueError(f"a batch of {config.batch_size} does not split over {devices} devices")
    return [dataclasses.replace(config, batch_size=config.batch_size // devices, rank=config.rank * devices + device,
                                world_size=config.world_size * devices) for device in range(devices)]


PROCESS_KEYS = ("world_size", "batch_size")
"""What a loader's position records of its rank's share, which a process's loaders record as its own."""


class PerDeviceLoader:
    """A process's batches, each read by its devices' loaders in step: the `BatchLoader` protocol
    over N loaders that stand at one position (an epoch, the batches consumed in it)."""

    def __init__(self, config: LoaderConfig, loaders: list[BatchLoader]) -> None:
        if not loaders:
            raise ValueError("a per-device loader needs one loader per device")
        self.config = config
        """The process's own loader config (its rank among processes, the batch of all its devices)."""
        self.loaders = loaders

    @classmethod
    def open(cls, config: LoaderConfig, devices: int,
             open_one: Callable[[LoaderConfig], BatchLoader]) -> "PerDeviceLoader":
        return cls(config, [open_one(device_config) for device_config in device_configs(config, devices)])

    def __iter__(self) -> Iterator[Batch]:
        for parts in zip(*self.loaders):
            yield {key: torch.cat([part[key] for part in parts]) for key in parts[0]}

    def __len__(self) -> int:
        return min(len(loader) for loader in self.loaders)

    def set_epoch(self, epoch: int) -> None:
        for loader in self.loaders:
            loader.set_epoch(epoch)

    def state_dict(self) -> dict:
        """The one position every device's loader stands at, as the process's one loader records it
        (its rank's world and batch), so a checkpoint resumes under either."""
        state = self.loaders[0].state_dict()
        return {**state, **{key: getattr(self.config, key) for key in PROCESS_KEYS if key in state}}

    def load_state_dict(self, state: dict) -> None:
        """Each device's loader at the process's position (one saved under another seed, world or
        batch is refused, as the process's one loader refuses it)."""
        check_same_order(state, self.config)
        for loader, device_config in zip(self.loaders, device_configs(self.config, len(self.loaders))):
            own = {key: getattr(device_config, key) for key in PROCESS_KEYS if key in state}
            loader.load_state_dict({**state, **own})

    @property
    def num_samples(self) -> int:
        return self.loaders[0].num_samples

    def data_record(self) -> dict | None:
        """The data's identity as any device's loader records it, with the samples all of them skipped."""
        records = [loader.data_record() for loader in self.loaders if callable(getattr(loader, "data_record", None))]
        if not records or not isinstance(records[0], dict):
            return None
        return {**records[0], "skipped": sum(int(record.get("skipped", 0) or 0) for record in records)}
