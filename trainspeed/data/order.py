"""The global sample order of an epoch and each rank's slice of it, for any dataset.

The order of one epoch is global, fixed by (seed, epoch), and the same on every rank. Global batch t
holds `world_size * batch_size` consecutive entries of that order; rank r reads the r-th contiguous
slice of it. So every sample is read once per epoch across all ranks, and N ranks at batch B see
exactly the global batches of one rank at batch N * B (which makes data-parallel runs comparable to
1-rank runs, and which strict "one shard per rank" assignment could not give).

Two orders are offered:
  * `shuffled_order`: a plain permutation, for datasets read one sample at a time (images);
  * `chunked_order`: for columnar shards read a batch at a time, made so that a rank's slice is a
    run of neighbouring samples:
      1. the samples are cut into chunks of `CHUNK_SAMPLES` consecutive samples of one shard
         (`chunk_bounds`);
      2. the chunk order is shuffled;
      3. samples are shuffled within consecutive windows of `shuffle_buffer` samples;
      4. each rank's slice of each global batch is sorted by position in the shard set.
    Sorting within a slice does not change which samples train together, but it makes every gather a
    forward sweep through a memmap. The slices themselves stay random subsets of their global batch
    (sorting the whole global batch before cutting it would give each rank a run of neighbouring
    samples, often of the same games or documents, and the gradients of the ranks would differ by
    more than independent batches do, which the gradient noise scale reads as noise).

The split of a dataset into train and val is fixed the same way, by a hash of each sample's split
value (`in_validation_split`): it never depends on a seed, a rank count or the order of the files.
"""

from __future__ import annotations

import numpy as np

from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError

CHUNK_SAMPLES = 1024

VAL_PER_MILLE = 50
SPLITS = ("train", "val")
SAMPLE_ID_KEY = "meta_sample_id"


def _mix64(values: np.ndarray) -> np.ndarray:
    """A fixed 64-bit integer hash (splitmix64 finaliser): the split never depends on a seed."""
    x = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def in_validation_split(keys: np.ndarray, val_per_mille: int = VAL_PER_MILLE) -> np.ndarray:
    """Which split-column values (integers) belong to "val": a fixed property of the value."""
    with np.errstate(over="ignore"):
        return (_mix64(keys) % np.uint64(1000)) < np.uint64(val_per_mille)


def check_rank_config(config: LoaderConfig) -> None:
    """UsageError for a batch size or rank that no slicing could serve."""
    if config.batch_size < 1:
        raise UsageError(f"batch size {config.batch_size}: must be at least 1")
    if not 0 <= config.rank < config.world_size:
        raise UsageError(f"rank {config.rank} is outside world size {config.world_size}")


def chunk_bounds(segment_starts: np.ndarray, chunk_samples: int = CHUNK_SAMPLES) -> np.ndarray:
    """(chunks, 2) [start, end) of chunks that never cross a segment (shard) boundary.

    `segment_starts` is the first global id of each segment, then the total.
    """
    bounds = []
    for start, end in zip(segment_starts[:-1], segment_starts[1:]):
        edges = np.arange(start, end, chunk_samples)
        bounds.append(np.stack([edges, np.minimum(edges + chunk_samples, end)], axis=1))
    return np.concatenate(bounds) if bounds else np.zeros((0, 2), np.int64)


def shuffled_order(num_samples: int, config: LoaderConfig, epoch: int) -> np.ndarray:
    """A permutation seeded by (seed, epoch); the identity without `config.shuffle`."""
    if not config.shuffle:
        return np.arange(num_samples)
    return np.random.default_rng([config.seed, epoch]).permutation(num_samples)


def chunked_order(bounds: np.ndarray, num_samples: int, config: LoaderConfig, epoch: int) -> np.ndarray:
    """The shard-friendly global order of one epoch (module docstring, steps 1-4), from the chunk
    `bounds` of `chunk_bounds`; the identity without `config.shuffle`."""
    n = num_samples
    if not config.shuffle:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng([config.seed, epoch])
    bounds = bounds[rng.permutation(len(bounds))]
    lengths = bounds[:, 1] - bounds[:, 0]
    # arange within each chunk, vectorised: chunk start repeated plus the offset inside the chunk
    offsets = np.arange(n, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    order = np.repeat(bounds[:, 0], lengths) + offsets
    window = max(1, config.shuffle_buffer)
    keys = np.arange(n, dtype=np.int64) // window + rng.random(n)
    order = order[np.argsort(keys, kind="stable")]
    global_batch = config.batch_size * config.world_size
    full = (n // global_batch) * global_batch
    order[:full].reshape(-1, config.world_size, config.batch_size).sort(axis=2)
    order[full:].sort()
    return order


def batches_per_epoch(num_samples: int, config: LoaderConfig) -> int:
    """This rank's batches in an epoch: equal on every rank with `drop_last`; without it the final
    partial global batch is split across ranks, and a rank whose piece is empty gets no batch."""
    global_batch = config.batch_size * config.world_size
    full = num_samples // global_batch
    if config.drop_last:
        return full
    remainder = num_samples - full * global_batch
    pieces = np.array_split(np.arange(remainder), config.world_size)
    return full + (1 if len(pieces[config.rank]) else 0)


def rank_slice(order: np.ndarray, config: LoaderConfig, batch_number: int) -> np.ndarray:
    """The entries of `order` that this rank reads as its batch `batch_number`."""
    global_batch = config.batch_size * config.world_size
    start = batch_number * global_batch
    ids = order[start:start + global_batch]
    if len(ids) == global_batch:
        return ids[config.rank * config.batch_size:(config.rank + 1) * config.batch_size]
    return np.array_split(ids, config.world_size)[config.rank]


def rank_batches(order: np.ndarray, config: LoaderConfig) -> list[np.ndarray]:
    """All of this rank's batches of one epoch, in order."""
    return [rank_slice(order, config, t) for t in range(batches_per_epoch(len(order), config))]
