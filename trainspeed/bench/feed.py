"""Where each timed step's batch comes from: kept on the device, copied from the host, or read
from the user's data.

The device feed reuses one batch that already lives on the device: the study's "no data IO"
figure, and an upper bound. Every real training step also pays the host-to-device copy of its
batch (and a remote accelerator pays it over the network), so the host feed keeps a small pool of
host batches (pinned where the target asks for pinned memory) and each step hands the next one to
`target.move_batch`, a non-blocking copy, inside the timed step. Torch.compile with CUDA graphs
then copies the moved batch into the graph's static inputs itself, as it would in training.

The data feed reads each step's batch from `--data` with the loader a training rank opens (the
workload's `open_dataset`: the same order, decoding and augmentation on the same `--num-workers`
workers, epoch after epoch) and hands it to `move_batch` inside the timed step, so a row of it
beside the device feed's says what reading the data costs the step. The row records what was read
(the format, path, files, samples, fingerprint and the samples skipped).

On a CPU target the device is host memory: `move_batch` returns the same tensors and copies
nothing, so there the host feed differs from the device feed only by cycling through the pool.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from trainspeed.bench.config import FEEDS
from trainspeed.bench.timing import BatchSource
from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.targets.base import Target
from trainspeed.workloads.base import Batch, Workload
from trainspeed.workloads.batches import LOADER_KEYS, batch_layout, batch_problem

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
    data_record: Callable[[], dict[str, Any] | None] = field(default=lambda: None)
    """What the feed read (the loader's `data_record`: format, path, files, samples, fingerprint,
    skipped), asked after the steps; None for a synthetic feed."""


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


@dataclass(frozen=True)
class DataFeedSource:
    """What `--feed data` reads, and how a training rank's loader reads it."""

    path: Path
    num_workers: int = 1
    bad_samples: str = "refuse"

    def open(self, workload: Workload, size: str, batch_size: int, seed: int, pin_memory: bool = False) -> BatchLoader:
        return workload.open_dataset(str(self.path), size, LoaderConfig(
            batch_size=batch_size, num_workers=self.num_workers, seed=seed, pin_memory=pin_memory,
            bad_samples=self.bad_samples))


def check_data_feed(source: DataFeedSource, workload: Workload, size: str, batch_sizes: list[int], seed: int) -> None:
    """Refuse, before anything is measured, data the workload cannot read (its `open_dataset`
    refuses the format or the contents), whose batches are not the workload's (keys, dtypes,
    shapes), or that holds fewer training samples than the largest batch."""
    probe = dataclasses.replace(source, num_workers=0)
    loader = probe.open(workload, size, min(batch_sizes), seed)
    first = next(iter(loader), None)
    if first is None or loader.num_samples < max(batch_sizes):
        raise UsageError(f"--data {source.path} holds {loader.num_samples} training samples, fewer than batch "
                         f"{max(batch_sizes)}; lower --batch-sizes to at most {loader.num_samples}")
    problem = batch_problem(batch_layout(workload, size), first)
    if problem is not None:
        raise UsageError(f"--data {source.path}: its batches do not have {workload.name!r}'s batch layout: {problem}")


def _epochs(loader: BatchLoader) -> Iterator[Batch]:
    """The loader's batches, epoch after epoch, without the keys a loader adds for itself."""
    for epoch in itertools.count():
        loader.set_epoch(epoch)
        for batch in loader:
            yield {key: tensor for key, tensor in batch.items() if key not in LOADER_KEYS}


def data_feed(target: Target, loader: BatchLoader) -> Feed:
    """Each step's batch read by `loader` (a rank's loader of the user's data) and moved to the device."""
    if len(loader) == 0:
        raise UsageError(f"the data holds fewer samples ({loader.num_samples}) than one batch; lower --batch-sizes")
    batches = _epochs(loader)
    first = next(batches)
    turns = itertools.chain([first], batches)
    record = getattr(loader, "data_record", None)
    return Feed("data", lambda: target.move_batch(next(turns)), batch_nbytes(first),
                data_record=record if record is not None else (lambda: None))


def make_feed(kind: str, target: Target, workload: Workload, size: str, batch_size: int, seed: int,
              data: DataFeedSource | None = None) -> Feed:
    """The feed of one configuration; the device feed's batch is the host feed's first."""
    generator = torch.Generator().manual_seed(seed)
    if kind == "device":
        return device_feed(target, workload.synthetic_batch(size, batch_size, generator))
    if kind == "host":
        batches = [workload.synthetic_batch(size, batch_size, generator) for _ in range(HOST_POOL_BATCHES)]
        return host_feed(target, batches)
    if kind == "data":
        if data is None:
            raise UsageError("--feed data reads each step's batch from --data: give --data PATH")
        return data_feed(target, data.open(workload, size, batch_size, seed, pin_memory=target.pin_memory))
    raise UsageError(f"bad feed {kind!r}: choose one of {', '.join(FEEDS)}")
