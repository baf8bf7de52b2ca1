"""The Mahjong dataset: the batch contract, the split by game, errors that name the data command.

Exactly-once reading across ranks, the global order and resume are the generic loader's and are
tested in tests/data/ on a schema of the tests' own.
"""

import numpy as np
import pytest
import torch

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.data.shards import open_shard, read_index
from trainspeed.errors import UsageError
from trainspeed.workloads.mahjong.data.loader import is_validation_game, open_mahjong_shards
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA
from trainspeed.workloads.batches import batch_layout, batch_problem
from trainspeed.workloads.mahjong.workload import MahjongWorkload


def test_batches_have_the_contract_keys_and_dtypes(mahjong_shards):
    loader = MahjongWorkload().open_dataset(mahjong_shards, "tiny", LoaderConfig(batch_size=64, num_workers=0))
    assert isinstance(loader, BatchLoader)
    batch = next(iter(loader))
    assert batch["features"].shape == (64, 86, 34) and batch["features"].dtype == torch.float16
    assert batch["mask"].shape == (64, 82) and batch["mask"].dtype == torch.bool
    assert batch["action"].shape == (64,) and batch["action"].dtype == torch.int64
    assert batch["meta_sample_id"].shape == (64,) and batch["meta_sample_id"].dtype == torch.int64
    assert all(key in ("features", "mask", "action") or key.startswith("meta_") for key in batch)
    assert batch["mask"][torch.arange(64), batch["action"]].all()
    synthetic = MahjongWorkload().synthetic_batch("tiny", 2, torch.Generator().manual_seed(0))
    assert set(synthetic) == {key for key in batch if not key.startswith("meta_")}
    assert batch_problem(batch_layout(MahjongWorkload(), "tiny"), batch) is None  # the protocol's own check


def test_in_process_and_worker_loading_give_the_same_batches(mahjong_shards):
    in_process = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=128, num_workers=0))
    workers = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=128, num_workers=2))
    pairs = list(zip(in_process, workers, strict=True))
    assert pairs
    for a, b in pairs:
        for key in ("features", "mask", "action", "meta_sample_id"):
            assert torch.equal(a[key], b[key])


def test_train_and_val_split_by_game(mahjong_shards):
    index = read_index(mahjong_shards, MAHJONG_SCHEMA)
    game_ids = np.concatenate([np.asarray(open_shard(mahjong_shards, s, MAHJONG_SCHEMA)["game_id"])
                               for s in index["shards"]])
    train = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, split="train"))
    val = open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, split="val"))
    assert train.num_samples + val.num_samples == len(game_ids)
    assert val.num_samples == int(is_validation_game(game_ids).sum())
    # the split is a fixed property of the game id: about 5% of many ids
    fraction = is_validation_game(np.arange(100_000)).mean()
    assert 0.04 < fraction < 0.06
    # fixed for good: existing shard sets must keep their validation games
    assert np.flatnonzero(is_validation_game(np.arange(80))).tolist() == [20, 25, 29, 57, 64, 67, 70]


def test_bad_folder_and_config_are_usage_errors(tmp_path, mahjong_shards):
    with pytest.raises(UsageError, match=r"no such folder \(make shards with `trainspeed data mahjong-selfplay`"):
        open_mahjong_shards(tmp_path / "missing", LoaderConfig(batch_size=8))
    with pytest.raises(UsageError, match="index.json"):
        open_mahjong_shards(tmp_path, LoaderConfig(batch_size=8))
    with pytest.raises(UsageError, match="rank"):
        open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, rank=2, world_size=2))
    with pytest.raises(UsageError, match="split"):
        open_mahjong_shards(mahjong_shards, LoaderConfig(batch_size=8, split="test"))
