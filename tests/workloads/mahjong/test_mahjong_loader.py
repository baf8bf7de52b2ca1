"""The Mahjong shard loader: exactly-once per epoch across ranks, determinism, resume, split."""

import numpy as np
import pytest
import torch

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.data.shards import open_shard, read_index
from trainspeed.errors import UsageError
from trainspeed.workloads.mahjong.data.loader import is_validation_game, open_mahjong_shards
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA


def _epoch_ids(folder, **config) -> list[np.ndarray]:
    loader = open_mahjong_shards(folder, LoaderConfig(**config))
    return [batch["meta_sample_id"].numpy() for batch in loader]


def test_batches_have_the_contract_keys_and_dtypes(mahjong_shards):
    loader = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=64, num_workers=0))
    assert isinstance(loader, BatchLoader)
    batch = next(iter(loader))
    assert batch["features"].shape == (64, 74, 34) and batch["features"].dtype == torch.float16
    assert batch["mask"].shape == (64, 82) and batch["mask"].dtype == torch.bool
    assert batch["action"].shape == (64,) and batch["action"].dtype == torch.int64
    assert all(key in ("features", "mask", "action") or key.startswith("meta_") for key in batch)
    assert batch["mask"][torch.arange(64), batch["action"]].all()


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_each_sample_is_seen_exactly_once_per_epoch(mahjong_shards, world_size):
    seen = []
    for rank in range(world_size):
        ids = _epoch_ids(mahjong_shards, batch_size=50, rank=rank, world_size=world_size,
                         drop_last=False, num_workers=0, shuffle_buffer=300)
        seen.extend(ids)
    seen = np.concatenate(seen)
    loader = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=50))
    assert len(seen) == loader.num_samples
    assert np.array_equal(np.sort(seen), np.arange(loader.num_samples))


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_split_the_global_batches_of_one_rank(mahjong_shards, world_size):
    one_rank = _epoch_ids(mahjong_shards, batch_size=32 * world_size, seed=3, num_workers=0)
    per_rank = [_epoch_ids(mahjong_shards, batch_size=32, rank=r, world_size=world_size, seed=3,
                           num_workers=0) for r in range(world_size)]
    lengths = {len(batches) for batches in per_rank}
    assert lengths == {len(one_rank)}, "drop_last must give every rank the same number of batches"
    for t, global_batch in enumerate(one_rank):
        assert np.array_equal(np.concatenate([batches[t] for batches in per_rank]), global_batch)


def test_order_depends_on_seed_and_epoch_only(mahjong_shards):
    config = LoaderConfig(batch_size=64, seed=1, num_workers=0)
    first = open_mahjong_shards(mahjong_shards, config)
    second = open_mahjong_shards(mahjong_shards, config)
    first_epoch0 = np.concatenate([b["meta_sample_id"].numpy() for b in first])
    assert np.array_equal(first_epoch0, np.concatenate([b["meta_sample_id"].numpy() for b in second]))
    first.set_epoch(1)
    assert not np.array_equal(first_epoch0, np.concatenate([b["meta_sample_id"].numpy() for b in first]))


def test_in_process_and_worker_loading_give_the_same_batches(mahjong_shards):
    in_process = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=128, num_workers=0))
    workers = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=128, num_workers=2))
    pairs = list(zip(in_process, workers, strict=True))
    assert pairs
    for a, b in pairs:
        for key in ("features", "mask", "action", "meta_sample_id"):
            assert torch.equal(a[key], b[key])


@pytest.mark.parametrize("num_workers", [0, 1])
def test_resume_mid_epoch_has_no_repeats_and_no_gaps(mahjong_shards, num_workers):
    config = LoaderConfig(batch_size=100, seed=5, num_workers=num_workers, world_size=2, rank=1)
    uninterrupted = open_mahjong_shards(mahjong_shards, config)
    uninterrupted.set_epoch(2)
    expected = [b["meta_sample_id"].numpy() for b in uninterrupted]

    interrupted = open_mahjong_shards(mahjong_shards, config)
    interrupted.set_epoch(2)
    consumed = []
    for batch in interrupted:
        consumed.append(batch["meta_sample_id"].numpy())
        if len(consumed) == 3:
            break
    state = interrupted.state_dict()
    resumed = open_mahjong_shards(mahjong_shards, config)
    resumed.load_state_dict(state)
    consumed.extend(b["meta_sample_id"].numpy() for b in resumed)
    assert len(consumed) == len(expected)
    for got, want in zip(consumed, expected):
        assert np.array_equal(got, want)


def test_resume_with_another_batch_size_is_refused(mahjong_shards):
    loader = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=100, num_workers=0))
    other = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=50, num_workers=0))
    with pytest.raises(UsageError, match="batch_size"):
        other.load_state_dict(loader.state_dict())


def test_train_and_val_split_by_game(mahjong_shards):
    index = read_index(mahjong_shards, MAHJONG_SCHEMA)
    game_ids = np.concatenate([np.asarray(open_shard(mahjong_shards, s, MAHJONG_SCHEMA)["game_id"]) for s in index["shards"]])
    train = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, split="train"))
    val = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, split="val"))
    assert train.num_samples + val.num_samples == len(game_ids)
    assert val.num_samples == int(is_validation_game(game_ids).sum())
    # the split is a fixed property of the game id: about 5% of many ids
    fraction = is_validation_game(np.arange(100_000)).mean()
    assert 0.04 < fraction < 0.06


def test_bad_folder_and_config_are_usage_errors(tmp_path, mahjong_shards):
    with pytest.raises(UsageError, match="no such folder"):
        open_mahjong_shards(tmp_path / "missing", LoaderConfig(batch_size=8))
    with pytest.raises(UsageError, match="index.json"):
        open_mahjong_shards(tmp_path, LoaderConfig(batch_size=8))
    with pytest.raises(UsageError, match="rank"):
        open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, rank=2, world_size=2))
    with pytest.raises(UsageError, match="split"):
        open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, split="test"))
