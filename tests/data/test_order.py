"""The global order: every sample once per epoch over the ranks, N ranks x B = 1 rank x N*B,
fixed by (seed, epoch)."""

from __future__ import annotations

import numpy as np
import pytest

from trainspeed.data.base import LoaderConfig
from trainspeed.data.order import (CHUNK_SAMPLES, batches_per_epoch, check_rank_config, chunk_bounds, chunked_order,
                                   rank_batches, shuffled_order)
from trainspeed.errors import UsageError

SEGMENT_STARTS = np.array([0, 700, 2200, 2200, 3300, 3333])
"""Shards of 700, 1500, 0, 1100 and 33 samples."""
NUM_SAMPLES = int(SEGMENT_STARTS[-1])


def chunked(config: LoaderConfig, epoch: int = 0) -> np.ndarray:
    return chunked_order(chunk_bounds(SEGMENT_STARTS), NUM_SAMPLES, config, epoch)


def shuffled(config: LoaderConfig, epoch: int = 0) -> np.ndarray:
    return shuffled_order(NUM_SAMPLES, config, epoch)


ORDERS = pytest.mark.parametrize("order", [chunked, shuffled], ids=["chunked", "shuffled"])


def test_chunks_cover_every_segment_and_never_cross_one():
    bounds = chunk_bounds(SEGMENT_STARTS)
    assert np.array_equal(np.concatenate([np.arange(a, b) for a, b in bounds]), np.arange(NUM_SAMPLES))
    assert ((bounds[:, 1] - bounds[:, 0]) <= CHUNK_SAMPLES).all()
    segment_of = np.searchsorted(SEGMENT_STARTS, bounds, side="right") - 1
    assert np.array_equal(segment_of[:, 0], np.searchsorted(SEGMENT_STARTS, bounds[:, 1] - 1, side="right") - 1)


@ORDERS
@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_each_sample_is_seen_exactly_once_per_epoch(order, world_size):
    seen = []
    for rank in range(world_size):
        config = LoaderConfig(batch_size=50, rank=rank, world_size=world_size, drop_last=False, shuffle_buffer=300)
        seen.extend(rank_batches(order(config), config))
    seen = np.concatenate(seen)
    assert len(seen) == NUM_SAMPLES
    assert np.array_equal(np.sort(seen), np.arange(NUM_SAMPLES))


@ORDERS
@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("drop_last", [True, False])
def test_ranks_split_the_global_batches_of_one_rank(order, world_size, drop_last):
    one = LoaderConfig(batch_size=32 * world_size, seed=3, drop_last=drop_last)
    one_rank = rank_batches(order(one), one)
    per_rank = []
    for rank in range(world_size):
        config = LoaderConfig(batch_size=32, rank=rank, world_size=world_size, seed=3, drop_last=drop_last)
        per_rank.append(rank_batches(order(config), config))
    if drop_last:
        assert {len(batches) for batches in per_rank} == {len(one_rank)}, "every rank gets as many batches"
    for t, global_batch in enumerate(one_rank):
        shares = np.concatenate([batches[t] for batches in per_rank if t < len(batches)])
        assert np.array_equal(np.sort(shares), np.sort(global_batch))


@ORDERS
def test_order_depends_on_seed_and_epoch_only(order):
    config = LoaderConfig(batch_size=64, seed=1)
    assert np.array_equal(order(config), order(config))
    assert not np.array_equal(order(config), order(config, epoch=1))
    assert not np.array_equal(order(config), order(LoaderConfig(batch_size=64, seed=2)))


@ORDERS
def test_without_shuffle_the_order_is_the_storage_order(order):
    assert np.array_equal(order(LoaderConfig(batch_size=64, shuffle=False)), np.arange(NUM_SAMPLES))


def test_chunked_rank_slices_are_sorted_forward_sweeps_of_random_shares_of_their_global_batch():
    config = LoaderConfig(batch_size=256, world_size=2, seed=4, shuffle_buffer=512)
    order = chunked(config)
    full = (NUM_SAMPLES // 512) * 512
    slices = order[:full].reshape(-1, 2, 256)
    assert (np.diff(slices, axis=2) > 0).all()
    assert (np.diff(order[full:]) > 0).all()
    # not a low and a high half of the global batch: the ranks' shares interleave
    assert (slices[:, 0].max(axis=1) > slices[:, 1].min(axis=1)).all()
    assert (slices[:, 1].max(axis=1) > slices[:, 0].min(axis=1)).all()


def test_batches_per_epoch_without_drop_last_gives_the_remainder_to_the_first_ranks():
    # 10 samples, global batch 2 x 4 = 8: the 2 left over go to ranks 0 and 1, none to rank 2 of 3
    assert [batches_per_epoch(10, LoaderConfig(batch_size=4, rank=r, world_size=2, drop_last=False))
            for r in range(2)] == [2, 2]
    assert [batches_per_epoch(14, LoaderConfig(batch_size=4, rank=r, world_size=3, drop_last=False))
            for r in range(3)] == [2, 2, 1]
    assert batches_per_epoch(10, LoaderConfig(batch_size=4, world_size=2)) == 1


def test_impossible_ranks_and_batch_sizes_are_usage_errors():
    with pytest.raises(UsageError, match="rank 2 is outside world size 2"):
        check_rank_config(LoaderConfig(batch_size=8, rank=2, world_size=2))
    with pytest.raises(UsageError, match="batch size 0"):
        check_rank_config(LoaderConfig(batch_size=0))
