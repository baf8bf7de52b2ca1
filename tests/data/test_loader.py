"""The generic shard loader over a test schema: outputs, exactly-once per epoch across ranks,
determinism, resume, split."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from point_shards import GROUP_SIZE, POINT_BATCHES, POINTS

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.data.loader import OutputColumn, ShardBatchSpec, ShardLoader
from trainspeed.data.order import in_validation_split
from trainspeed.data.shards import open_shard, read_index
from trainspeed.errors import UsageError


def open_points(folder, **config) -> ShardLoader:
    return ShardLoader(folder, LoaderConfig(**config), POINT_BATCHES)


def _epoch_ids(folder, **config) -> list[np.ndarray]:
    return [batch["meta_sample_id"].numpy() for batch in open_points(folder, **config)]


def _source_index(batch: dict) -> np.ndarray:
    """Which written sample each row is (the test schema's point says it)."""
    return batch["point"][:, 0].numpy().astype(np.int64)


def test_batches_hold_the_spec_outputs_converted_as_asked(point_shards):
    loader = open_points(point_shards, batch_size=64, num_workers=0)
    assert isinstance(loader, BatchLoader)
    batch = next(iter(loader))
    assert list(batch) == ["point", "label", "flag", "meta_sample_id"]
    assert batch["point"].shape == (64, 3) and batch["point"].dtype == torch.float32
    assert batch["label"].shape == (64,) and batch["label"].dtype == torch.int64
    assert batch["flag"].shape == (64,) and batch["flag"].dtype == torch.bool
    assert batch["meta_sample_id"].dtype == torch.int64
    index = _source_index(batch)
    assert np.array_equal(batch["point"][:, 1].numpy(), index / 2)
    assert np.array_equal(batch["label"].numpy(), index % 251)
    assert np.array_equal(batch["flag"].numpy(), index % 3 == 0)


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_each_sample_is_seen_exactly_once_per_epoch(point_shards, world_size):
    seen = []
    for rank in range(world_size):
        seen.extend(_epoch_ids(point_shards, batch_size=50, rank=rank, world_size=world_size,
                               drop_last=False, num_workers=0, shuffle_buffer=300))
    seen = np.concatenate(seen)
    loader = open_points(point_shards, batch_size=50)
    assert len(seen) == loader.num_samples
    assert np.array_equal(np.sort(seen), np.arange(loader.num_samples))


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_split_the_global_batches_of_one_rank(point_shards, world_size):
    one_rank = _epoch_ids(point_shards, batch_size=32 * world_size, seed=3, num_workers=0)
    per_rank = [_epoch_ids(point_shards, batch_size=32, rank=r, world_size=world_size, seed=3, num_workers=0)
                for r in range(world_size)]
    lengths = {len(batches) for batches in per_rank}
    assert lengths == {len(one_rank)}, "drop_last must give every rank the same number of batches"
    for t, global_batch in enumerate(one_rank):
        assert np.array_equal(np.sort(np.concatenate([batches[t] for batches in per_rank])), global_batch)
    # Each rank's slice is a random share of its global batch, sorted for the reads, not a run of
    # neighbouring samples: the ranks' gradients then differ as independent batches' do.
    first = [batches[0] for batches in per_rank]
    assert all(np.array_equal(ids, np.sort(ids)) for ids in first)
    assert first[0].max() > first[1].min() and first[1].max() > first[0].min()


def test_order_depends_on_seed_and_epoch_only(point_shards):
    first = open_points(point_shards, batch_size=64, seed=1, num_workers=0)
    second = open_points(point_shards, batch_size=64, seed=1, num_workers=0)
    first_epoch0 = np.concatenate([b["meta_sample_id"].numpy() for b in first])
    assert np.array_equal(first_epoch0, np.concatenate([b["meta_sample_id"].numpy() for b in second]))
    first.set_epoch(1)
    assert not np.array_equal(first_epoch0, np.concatenate([b["meta_sample_id"].numpy() for b in first]))


def test_in_process_and_worker_loading_give_the_same_batches(point_shards):
    in_process = open_points(point_shards, batch_size=128, num_workers=0)
    workers = open_points(point_shards, batch_size=128, num_workers=2)
    pairs = list(zip(in_process, workers, strict=True))
    assert pairs
    for a, b in pairs:
        assert list(a) == list(b)
        for key in a:
            assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


def test_workers_that_start_once_jax_runs_in_the_process_are_no_forks_of_it_and_give_the_same_batches(
        point_shards, start_jax, child_pids):
    """A run makes its loader, then builds its model (which may start JAX), then reads: its workers
    start after JAX did, from a fork server."""
    in_process = list(open_points(point_shards, batch_size=128, num_workers=0))
    workers = open_points(point_shards, batch_size=128, num_workers=2)
    before, forks = child_pids(), start_jax()
    pairs = list(zip(in_process, workers, strict=True))
    assert forks() == [] and len(child_pids() - before) == 2
    for a, b in pairs:
        assert all(torch.equal(a[key], b[key]) for key in a)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_resume_mid_epoch_has_no_repeats_and_no_gaps(point_shards, num_workers):
    config = dict(batch_size=100, seed=5, num_workers=num_workers, world_size=2, rank=1)
    uninterrupted = open_points(point_shards, **config)
    uninterrupted.set_epoch(2)
    expected = [b["meta_sample_id"].numpy() for b in uninterrupted]
    interrupted = open_points(point_shards, **config)
    interrupted.set_epoch(2)
    consumed = []
    for batch in interrupted:
        consumed.append(batch["meta_sample_id"].numpy())
        if len(consumed) == 3:
            break
    state = interrupted.state_dict()
    resumed = open_points(point_shards, **config)
    resumed.load_state_dict(state)
    consumed.extend(b["meta_sample_id"].numpy() for b in resumed)
    assert len(consumed) == len(expected)
    for got, want in zip(consumed, expected):
        assert np.array_equal(got, want)


def test_resume_with_another_batch_size_is_refused(point_shards):
    loader = open_points(point_shards, batch_size=100, num_workers=0)
    other = open_points(point_shards, batch_size=50, num_workers=0)
    with pytest.raises(UsageError, match="batch_size"):
        other.load_state_dict(loader.state_dict())


def test_train_and_val_split_by_the_split_column(point_shards):
    index = read_index(point_shards, POINTS)
    groups = np.concatenate([np.asarray(open_shard(point_shards, s, POINTS)["group"]) for s in index["shards"]])
    train = open_points(point_shards, batch_size=8, split="train", shuffle=False, drop_last=False, num_workers=0)
    val = open_points(point_shards, batch_size=8, split="val", shuffle=False, drop_last=False, num_workers=0)
    assert train.num_samples + val.num_samples == len(groups)
    assert val.num_samples == int(in_validation_split(groups).sum()) > 0
    train_groups = {int(i) // GROUP_SIZE for b in train for i in _source_index(b)}
    val_groups = {int(i) // GROUP_SIZE for b in val for i in _source_index(b)}
    assert train_groups and val_groups and not train_groups & val_groups
    # the split is a fixed property of the value: about 5% of many values
    fraction = in_validation_split(np.arange(100_000)).mean()
    assert 0.04 < fraction < 0.06


def test_bad_folder_and_config_are_usage_errors(tmp_path, point_shards):
    with pytest.raises(UsageError, match="no such folder"):
        open_points(tmp_path / "missing", batch_size=8)
    with pytest.raises(UsageError, match="index.json"):
        open_points(tmp_path, batch_size=8)
    with pytest.raises(UsageError, match="rank"):
        open_points(point_shards, batch_size=8, rank=2, world_size=2)
    with pytest.raises(UsageError, match="split"):
        open_points(point_shards, batch_size=8, split="test")


def test_a_spec_naming_columns_the_schema_lacks_is_refused():
    with pytest.raises(ValueError, match="'colour' is not in the trainspeed-test-points schema"):
        ShardBatchSpec(POINTS, (OutputColumn("colour", torch.uint8),), split_column="group")
    with pytest.raises(ValueError, match="'shard' is not in"):
        ShardBatchSpec(POINTS, (OutputColumn("label", torch.uint8),), split_column="shard")
    with pytest.raises(ValueError, match="cannot view"):
        ShardBatchSpec(POINTS, (OutputColumn("label", torch.int64, view_as=torch.bool),), split_column="group")


def test_workers_persist_across_epochs_and_a_stopped_epoch(point_shards, child_pids):
    loader = open_points(point_shards, batch_size=64, num_workers=2)
    before = child_pids()
    first_epoch = [b["meta_sample_id"].numpy() for b in loader]
    workers = child_pids() - before
    assert len(workers) == 2
    for epoch in (1, 2):
        loader.set_epoch(epoch)
        batches = iter(loader)
        next(batches)  # stop early: what was in flight is drained before the next epoch
        del batches
        assert child_pids() - before == workers
    loader.set_epoch(0)
    again = [b["meta_sample_id"].numpy() for b in loader]
    assert child_pids() - before == workers
    assert all(np.array_equal(a, b) for a, b in zip(first_epoch, again, strict=True))


def _sample_800_is_damaged(path, rows, columns) -> list[str]:
    """A workload's row check, as Mahjong's checks its action ids: sample 800 stands for a bad row."""
    return [f"{path}: row {row}: a bad point" for row in rows[columns["point"][:, 0] == 800]]


def test_a_batch_a_row_check_refuses_is_one_line_naming_the_shard_and_row(point_shards):
    """The check runs on the whole batch at once; only a refused batch is checked again per shard,
    so the line names the file the row is in: sample 800 is row 100 of the second shard, in a first
    batch that begins in the first."""
    spec = dataclasses.replace(POINT_BATCHES, check_rows=_sample_800_is_damaged)
    loader = ShardLoader(point_shards, LoaderConfig(batch_size=1024, shuffle=False, num_workers=0), spec)
    with pytest.raises(UsageError) as refused:
        next(iter(loader))
    assert str(refused.value) == f"{point_shards / 'shard-000001.bin'}: row 100: a bad point"


def test_a_finished_epoch_yields_nothing_again_until_the_next_one_is_set(point_shards):
    loader = open_points(point_shards, batch_size=512, num_workers=0)
    first = [b["meta_sample_id"].numpy() for b in loader]
    assert first and list(loader) == []
    loader.set_epoch(0)
    assert all(np.array_equal(a, b) for a, b in zip(first, (b["meta_sample_id"].numpy() for b in loader), strict=True))
