"""Per-rank batch loader over Mahjong shards: shard-local shuffling, batch-level gathers, resumable.

The order of one epoch is `trainspeed.data.order.chunked_order` over the split's samples: global,
fixed by (seed, epoch), the same on every rank, and rank r reads the r-th contiguous slice of each
global batch (a run of neighbouring samples from one or two shards).

A batch is made by one `np.take` per shard segment and column, written straight into the output
tensor: no per-sample Python. Background workers (torch DataLoader, one whole batch per task) and
pinned memory overlap this with training. The split is by game: a fixed hash of the game id puts
about `VAL_PER_MILLE`/1000 of the games in "val".

Batch keys: `features` float16 (B, 74, 34) (stored so; max abs error vs the engine's float32 is in
the index, 4.7e-4 measured), `mask` bool (B, 82), `action` int64 (B,), and `meta_sample_id` int64 (B,),
each sample's position in the split (cheap; used by the tests to prove exactly-once reading).
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.data.order import batches_per_epoch, check_rank_config, chunk_bounds, chunked_order, rank_slice
from trainspeed.data.shards import ShardColumns, open_shard, read_index
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA

VAL_PER_MILLE = 50
SPLITS = ("train", "val")


def _mix64(values: np.ndarray) -> np.ndarray:
    """A fixed 64-bit integer hash (splitmix64 finaliser): the split never depends on a seed."""
    x = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def is_validation_game(game_id: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (_mix64(game_id) % np.uint64(1000)) < np.uint64(VAL_PER_MILLE)


@dataclass(frozen=True)
class SplitLayout:
    """Where the split's samples lie: global sample g is row `rows[g]` of shard `shard_of(g)`."""

    shard_infos: tuple[dict, ...]
    shard_starts: np.ndarray  # (shards + 1,) first global id of each shard, then the total
    rows: np.ndarray  # (samples,) int64 row inside its shard

    @property
    def num_samples(self) -> int:
        return int(self.shard_starts[-1])

    def epoch_order(self, config: LoaderConfig, epoch: int) -> np.ndarray:
        """The global sample order of one epoch: identical on every rank, fixed by (seed, epoch)."""
        return chunked_order(chunk_bounds(self.shard_starts), self.num_samples, config, epoch)


def split_layout(folder: Path, index: dict, split: str) -> SplitLayout:
    if split not in SPLITS:
        raise UsageError(f"split {split!r}: use one of {', '.join(SPLITS)}")
    starts, rows = [0], []
    for info in index["shards"]:
        game_id = np.asarray(open_shard(folder, info, MAHJONG_SCHEMA)["game_id"])
        in_val = is_validation_game(game_id)
        selected = np.flatnonzero(in_val if split == "val" else ~in_val)
        rows.append(selected.astype(np.int64))
        starts.append(starts[-1] + len(selected))
    return SplitLayout(tuple(index["shards"]), np.asarray(starts, np.int64),
                       np.concatenate(rows) if rows else np.zeros(0, np.int64))


@dataclass(frozen=True)
class BatchBuffers:
    """Output tensors of one batch; the gather writes into them in place."""

    features: torch.Tensor  # (n, 74, 34) float16
    mask: torch.Tensor  # (n, 82) uint8, viewed as bool on output
    action: torch.Tensor  # (n,) int64
    sample_id: torch.Tensor  # (n,) int64 position in the split (`meta_sample_id`: tests, debugging)

    @staticmethod
    def allocate(leading: tuple[int, ...], pin_memory: bool = False) -> "BatchBuffers":
        def empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            return torch.empty((*leading, *shape), dtype=dtype, pin_memory=pin_memory)
        return BatchBuffers(features=empty(MAHJONG_SCHEMA.columns["features"][1], torch.float16),
                            mask=empty(MAHJONG_SCHEMA.columns["mask"][1], torch.uint8), action=empty((), torch.int64),
                            sample_id=empty((), torch.int64))

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.features, self.mask, self.action, self.sample_id)

    def copy_from(self, other: "BatchBuffers") -> None:
        for mine, theirs in zip(self.tensors(), other.tensors()):
            mine.copy_(theirs)

    def as_batch(self) -> Batch:
        return {"features": self.features, "mask": self.mask.view(torch.bool), "action": self.action,
                "meta_sample_id": self.sample_id}


class SharedSlots:
    """A ring of batch buffers in shared memory, made before the workers fork.

    Handing a fresh tensor from a worker to the trainer costs a new shared-memory segment per batch;
    measured here that capped a 5 MB batch at ~100 batches/s whatever the worker count. Workers write
    into these fixed slots instead and send back only the slot number; the trainer's side copies the
    slot out (into pinned memory when asked), which frees it. A slot is reused only after
    `count` further batches were requested, and at most `workers * prefetch` are ever in flight.
    """

    def __init__(self, count: int, batch_size: int) -> None:
        self.count = count
        self.buffers = BatchBuffers.allocate((count, batch_size))
        for tensor in self.buffers.tensors():
            tensor.share_memory_()

    def slot(self, number: int, n: int) -> BatchBuffers:
        return BatchBuffers(*(tensor[number, :n] for tensor in self.buffers.tensors()))


class ShardBatches(Dataset):
    """Map-style dataset whose item (epoch, batch number) is one whole batch of this rank.

    Without `slots` an item is the batch itself; with them it is (slot, size), the batch being
    in that shared slot.
    """

    def __init__(self, folder: Path, layout: SplitLayout, config: LoaderConfig,
                 slots: SharedSlots | None = None) -> None:
        self.folder = folder
        self.layout = layout
        self.config = config
        self.slots = slots
        self._shards: list[ShardColumns] | None = None
        self._order_epoch: int | None = None
        self._order: np.ndarray | None = None

    def __len__(self) -> int:
        return batches_per_epoch(self.layout.num_samples, self.config)

    def _open(self) -> list[ShardColumns]:
        if self._shards is None:
            self._shards = [open_shard(self.folder, info, MAHJONG_SCHEMA) for info in self.layout.shard_infos]
        return self._shards

    def order(self, epoch: int) -> np.ndarray:
        if self._order_epoch != epoch:
            self._order, self._order_epoch = self.layout.epoch_order(self.config, epoch), epoch
        return self._order

    def ids(self, epoch: int, batch_number: int) -> np.ndarray:
        """Global sample ids of this rank's batch (sorted)."""
        return rank_slice(self.order(epoch), self.config, batch_number)

    def __getitem__(self, key: tuple[int, int]) -> Batch | tuple[int, int]:
        epoch, batch_number = key
        ids = self.ids(epoch, batch_number)
        if self.slots is None:
            out = BatchBuffers.allocate((len(ids),))
            self.gather(ids, out)
            return out.as_batch()
        slot = batch_number % self.slots.count
        self.gather(ids, self.slots.slot(slot, len(ids)))
        return slot, len(ids)

    def gather(self, ids: np.ndarray, out: BatchBuffers) -> None:
        """Write the samples `ids` (sorted) into `out`: one np.take per shard segment and column."""
        shards = self._open()
        shard_ids = np.searchsorted(self.layout.shard_starts, ids, side="right") - 1
        rows = self.layout.rows[ids]
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(shard_ids)) + 1, [len(ids)]])
        targets = {"features": out.features.numpy(), "mask": out.mask.numpy()}
        action = np.empty(len(ids), dtype=np.uint8)
        for begin, end in zip(cuts[:-1], cuts[1:]):
            if begin == end:
                continue
            shard, shard_rows = shards[shard_ids[begin]], rows[begin:end]
            for name, target in targets.items():
                np.take(shard[name], shard_rows, axis=0, out=target[begin:end])
            np.take(shard["action"], shard_rows, out=action[begin:end])
        out.action.numpy()[:] = action
        out.sample_id.numpy()[:] = ids


class _PositionSampler(Sampler):
    """Yields (epoch, batch number) from the loader's current position to the epoch's end."""

    def __init__(self, loader: "MahjongShardLoader") -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[tuple[int, int]]:
        epoch, start = self.loader.epoch, self.loader.position
        return iter([(epoch, t) for t in range(start, len(self.loader))])

    def __len__(self) -> int:
        return len(self.loader) - self.loader.position


def _worker_context() -> multiprocessing.context.BaseContext:
    """Fork where the platform has it, whatever the process's default: workers start in
    milliseconds, and they inherit the shared slots and the open memory maps. (A process that was
    itself spawned defaults to spawn, measured at ~8 s per worker start, once per epoch.)"""
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _single_thread_worker(worker_id: int) -> None:
    torch.set_num_threads(1)


class MahjongShardLoader(BatchLoader):
    """The BatchLoader of one rank over a shard folder (see the module docstring for the order)."""

    def __init__(self, folder: Path, config: LoaderConfig) -> None:
        check_rank_config(config)
        index = read_index(folder, MAHJONG_SCHEMA)
        self.config = config
        self.layout = split_layout(folder, index, config.split)
        self.epoch = 0
        self.position = 0
        self.pin_memory = config.pin_memory and torch.cuda.is_available()
        workers = config.num_workers
        prefetch = max(1, config.prefetch_batches)
        slots = SharedSlots(workers * prefetch + 2, config.batch_size) if workers > 0 else None
        self.dataset = ShardBatches(folder, self.layout, config, slots)
        self._dataloader = DataLoader(
            self.dataset, batch_size=None, sampler=_PositionSampler(self), num_workers=workers,
            prefetch_factor=prefetch if workers > 0 else None,
            worker_init_fn=_single_thread_worker if workers > 0 else None,
            multiprocessing_context=_worker_context() if workers > 0 else None)

    @property
    def num_samples(self) -> int:
        return self.layout.num_samples

    def __len__(self) -> int:
        return batches_per_epoch(self.layout.num_samples, self.config)

    def __iter__(self) -> Iterator[Batch]:
        if self.position >= len(self):
            return
        if self.config.num_workers == 0:
            yield from self._iter_in_process()
            return
        self.dataset.order(self.epoch)  # computed once here; the forked workers inherit it
        batches = iter(self._dataloader)
        try:
            for slot, size in batches:
                out = BatchBuffers.allocate((size,), self.pin_memory)
                out.copy_from(self.dataset.slots.slot(slot, size))
                self.position += 1
                yield out.as_batch()
        finally:
            del batches  # shuts the workers down now, also when the consumer stops early

    def _iter_in_process(self) -> Iterator[Batch]:
        while self.position < len(self):
            ids = self.dataset.ids(self.epoch, self.position)
            out = BatchBuffers.allocate((len(ids),), self.pin_memory)
            self.dataset.gather(ids, out)
            self.position += 1
            yield out.as_batch()

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = int(epoch), 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position, "seed": self.config.seed,
                "world_size": self.config.world_size, "batch_size": self.config.batch_size}

    def load_state_dict(self, state: dict) -> None:
        for key in ("seed", "world_size", "batch_size"):
            if key in state and state[key] != getattr(self.config, key):
                raise UsageError(f"loader state was saved with {key}={state[key]}, this run uses "
                                 f"{getattr(self.config, key)}: resume with the same setting")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def open_mahjong_shards(path: str | os.PathLike, config: LoaderConfig) -> BatchLoader:
    """The loader the Mahjong workload's `open_dataset` returns."""
    return MahjongShardLoader(Path(path), config)
