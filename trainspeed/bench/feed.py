"""Where each timed step's batch comes from: kept on the device, or copied from the host.

The device feed reuses one batch that already lives on the device: the study's "no data IO"
figure, and an upper bound. Every real training step also pays the host-to-device copy of its
batch (and a remote accelerator pays it over the network), so the host feed keeps a small pool of
host batches (pinned where the target asks for pinned memory) and each step hands the next one to
`target.move_batch`, a non-blocking copy, inside the timed step. Torch.compile with CUDA graphs
then copies the moved batch into the graph's static inputs itself, as it would in training.

On a CPU target the device is host memory: `move_batch` returns the same tensors and copies
nothing, so there the host feed differs from the device feed only by cycling through the pool.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from trainspeed.bench.config import FEEDS
from trainspeed.bench.timing import BatchSource
from trainspeed.errors import UsageError
from trainspeed.targets.base import Target
from trainspeed.workloads.base import Batch, Workload

HOST_POOL_BATCHES = 4
"""Distinct host batches the host feed cycles through: enough that no step reads the batch the step
before it read (so no cache keeps it warm), few enough to stay small next to the model."""


def batch_nbytes(batch: Batch) -> int:
    return sum(tensor.nbytes for tensor in batch.values())


@dataclass(frozen=True)
class Feed:
    kind: str
    next_batch: BatchSource
    """Called once per step, inside the timed steps; returns a batch on the device."""
    bytes_per_step: int
    """Host-to-device bytes each call moves."""


def device_feed(target: Target, host_batch: Batch) -> Feed:
    on_device = target.move_batch(host_batch)
    return Feed("device", lambda: on_device, 0)


def _pinned(batch: Batch) -> Batch:
    return {key: tensor.pin_memory() for key, tensor in batch.items()}


def host_feed(target: Target, host_batches: list[Batch]) -> Feed:
    pool = [_pinned(batch) if target.pin_memory else batch for batch in host_batches]
    sizes = {batch_nbytes(batch) for batch in pool}
    if len(sizes) != 1:
        raise ValueError(f"host batches of one feed must have one size, got {sorted(sizes)} bytes")
    turns = itertools.cycle(pool)
    return Feed("host", lambda: target.move_batch(next(turns)), sizes.pop())


def make_feed(kind: str, target: Target, workload: Workload, size: str, batch_size: int, seed: int) -> Feed:
    """The feed of one configuration; the device feed's batch is the host feed's first."""
    generator = torch.Generator().manual_seed(seed)
    if kind == "device":
        return device_feed(target, workload.synthetic_batch(size, batch_size, generator))
    if kind == "host":
        batches = [workload.synthetic_batch(size, batch_size, generator) for _ in range(HOST_POOL_BATCHES)]
        return host_feed(target, batches)
    raise UsageError(f"bad feed {kind!r}: choose one of {', '.join(FEEDS)}")
