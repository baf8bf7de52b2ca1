"""The Mahjong workload's dataset: the generic shard loader over Mahjong shards.

Batch keys (the same as `MahjongWorkload.synthetic_batch`, plus the loader's `meta_sample_id`):
`features` float16 (B, 86, 34) (stored so; max abs error vs the engine's float32 is in the index,
4.7e-4 measured), `mask` bool (B, 82), `action` int64 (B,), and `meta_sample_id` int64 (B,).
The split is by game: a fixed hash of the game id puts about 5% of the games in "val".
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.data.loader import OutputColumn, ShardBatchSpec, ShardLoader
from trainspeed.data.order import in_validation_split
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA
from trainspeed.workloads.mahjong.data.verify import check_actions

MAHJONG_BATCHES = ShardBatchSpec(
    schema=MAHJONG_SCHEMA,
    outputs=(
        OutputColumn("features", torch.float16),
        OutputColumn("mask", torch.uint8, view_as=torch.bool),
        OutputColumn("action", torch.int64),
    ),
    split_column="game_id",
    check_rows=check_actions,
)


def is_validation_game(game_id: np.ndarray) -> np.ndarray:
    return in_validation_split(game_id, MAHJONG_BATCHES.val_per_mille)


def open_mahjong_shards(path: str | os.PathLike, config: LoaderConfig) -> BatchLoader:
    """The loader the Mahjong workload's `open_dataset` returns."""
    return ShardLoader(Path(path), config, MAHJONG_BATCHES)
