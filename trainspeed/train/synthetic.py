"""`--synthetic-data`: the training loop without data IO, for the IO-efficiency comparison.

A few global batches are made once with the workload's `synthetic_batch` and cycled; each rank
keeps its slice of every global batch, exactly as the real loaders cut the global order. Making
batches costs nothing per step, so a run with this loader measures the loop's ceiling, and the
same loop with real data divided by it is the IO efficiency. Deterministic per seed, and its
position resumes like a real loader's.
"""

from __future__ import annotations

from typing import Iterator

import torch

from trainspeed.data.base import LoaderConfig
from trainspeed.workloads.base import Batch, Workload

POOL_BATCHES = 4
BATCHES_PER_EPOCH = 1000


def held_bytes_per_rank(workload: Workload, size: str, batch_size: int) -> int:
    """The host memory one rank's SyntheticLoader holds at the least: its slice of every pool batch
    (it also makes each global batch once while cutting it), from one sample's tensors."""
    sample = workload.synthetic_batch(size, 1, torch.Generator().manual_seed(0))
    return sum(tensor.nbytes for tensor in sample.values()) * batch_size * POOL_BATCHES


class SyntheticLoader:
    def __init__(self, workload: Workload, size: str, config: LoaderConfig, pool_batches: int = POOL_BATCHES) -> None:
        self._config = config
        self._pool = [self._rank_slice(workload, size, index) for index in range(pool_batches)]
        self._epoch = 0
        self._position = 0

    def _rank_slice(self, workload: Workload, size: str, index: int) -> Batch:
        config = self._config
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + index)
        global_batch = workload.synthetic_batch(size, config.batch_size * config.world_size, generator)
        start = config.rank * config.batch_size
        batch = {key: value[start : start + config.batch_size].contiguous() for key, value in global_batch.items()}
        if config.pin_memory:
            batch = {key: value.pin_memory() for key, value in batch.items()}
        return batch

    def __iter__(self) -> Iterator[Batch]:
        while self._position < BATCHES_PER_EPOCH:
            batch = self._pool[(self._epoch * BATCHES_PER_EPOCH + self._position) % len(self._pool)]
            self._position += 1
            yield batch

    def __len__(self) -> int:
        return BATCHES_PER_EPOCH

    def set_epoch(self, epoch: int) -> None:
        self._epoch = epoch
        self._position = 0

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "position": self._position}

    def load_state_dict(self, state: dict) -> None:
        self._epoch = int(state["epoch"])
        self._position = int(state["position"])

    @property
    def num_samples(self) -> int:
        return BATCHES_PER_EPOCH * self._config.batch_size * self._config.world_size
