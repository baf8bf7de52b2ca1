"""The loader protocol shared by every real dataset (Mahjong shards, StyleGAN3 images).

The trainer only speaks to this protocol: it asks the workload to open its dataset for one rank
and iterates batches. The sample order is defined globally by (seed, epoch): global batch t of
size world_size * batch_size is cut into world_size contiguous slices, and rank r reads slice r.
So every sample is read once per epoch across all ranks, and N ranks at batch B see the same
global batches as one rank at batch N * B (which makes data-parallel runs comparable to 1-rank runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Protocol, runtime_checkable

if TYPE_CHECKING:  # the loader config is read where no torch is imported (a dataset's checks, the flags)
    import torch

Batch = dict[str, "torch.Tensor"]
"""A batch is a flat dict of tensors; every tensor's first dimension is the batch."""


@dataclass(frozen=True)
class LoaderConfig:
    batch_size: int
    """Per-rank batch size."""
    rank: int = 0
    world_size: int = 1
    seed: int = 0
    split: str = "train"
    """"train" or "val": the split is by game (or image), fixed by the dataset's seed-free hash."""
    num_workers: int = 1
    """Background loading processes for this rank (0 = load in the training process)."""
    pin_memory: bool = False
    """Return batches in pinned memory, for asynchronous copies to a GPU. The caller decides (the
    trainer pins for CUDA targets); a loader does not second-guess it by probing for a device."""
    prefetch_batches: int = 2
    shuffle: bool = True
    shuffle_buffer: int = 65536
    drop_last: bool = True
    """Drop the final incomplete global batch (training); False keeps it, split across ranks."""
    check_data: bool = True
    """Refuse damaged data while reading it (each shard's bytes once per run, every batch's values
    as cheaply as the workload can); off only to measure what the checks cost."""
    bad_samples: str = "refuse"
    """A sample that cannot be read (a corrupt image in a folder read where it lies): "refuse" (one
    line, the run stops) or "skip" (counted, warned about, the next readable sample takes its place;
    `trainspeed.data.samples`)."""


@runtime_checkable
class BatchLoader(Protocol):
    """Batches of one rank; deterministic per (seed, epoch) and resumable mid-epoch."""

    def __iter__(self) -> Iterator[Batch]:
        """Batches of the current epoch from the current position; ends at the epoch's end."""
        ...

    def __len__(self) -> int:
        """Batches per epoch for this rank (equal on every rank when drop_last)."""
        ...

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its beginning (the order depends on seed and epoch)."""
        ...

    def state_dict(self) -> dict:
        """Epoch and batches already consumed in it: enough to resume without repeats or gaps."""
        ...

    def load_state_dict(self, state: dict) -> None: ...

    @property
    def num_samples(self) -> int:
        """Samples in this split (all ranks together)."""
        ...
