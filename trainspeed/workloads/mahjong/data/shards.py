"""Mahjong sample shards: the schema of `trainspeed.data.shards` files that hold encoded decisions.

  column    dtype    shape per sample  bytes
  features  float16  (86, 34)          5848   float32 feature values rounded to float16
  mask      uint8    (82,)               82   legal actions, 0/1
  action    uint8    ()                   1
  game_id   uint32   ()                   4
  seat      uint8    ()                   1
  turn      uint16   ()                   2
                                       5938 bytes per sample (half of float32 features alone)

Version 2 added the 12 tile-fact planes (`features.py`) after the engine's 74; version 1 shards
have the engine's planes only and are refused (make them again from their mjai logs).

float16 is the one lossy step: the engine's values are fractions such as 1/3, 1/7, 1/70, which
float16 rounds with a relative error of at most 2^-11. The writer measures the largest absolute
error of every shard and the index records it (`feature_max_abs_error`); actions and masks are exact.
Each shard's sidecar also records its game count and first and last game id; the index sums the games.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainspeed.data.shards import ShardInfo, ShardSchema, write_index, write_shard
from trainspeed.workloads.mahjong.encoding import FEATURE_SHAPE, NUM_ACTIONS, EncodedSamples

FORMAT_NAME = "trainspeed-mahjong-shards"
FORMAT_VERSION = 2

MAHJONG_SCHEMA = ShardSchema(
    format_name=FORMAT_NAME,
    format_version=FORMAT_VERSION,
    columns={
        "features": (np.dtype("<f2"), FEATURE_SHAPE),
        "mask": (np.dtype("u1"), (NUM_ACTIONS,)),
        "action": (np.dtype("u1"), ()),
        "game_id": (np.dtype("<u4"), ()),
        "seat": (np.dtype("u1"), ()),
        "turn": (np.dtype("<u2"), ()),
    },
    how_to_make="make shards with `trainspeed data mahjong-selfplay` or `from-mjai`",
)


def storage_columns(samples: EncodedSamples) -> dict[str, np.ndarray]:
    """The samples in the schema's dtypes; ValueError where an id would not fit its column."""
    if len(samples) and (samples.game_id.max() >= 2**32 or samples.turn.max() >= 2**16):
        raise ValueError("game_id must fit uint32 and turn uint16")
    return {
        "features": samples.features.astype("<f2"),
        "mask": samples.mask.astype("u1"),
        "action": samples.action.astype("u1"),
        "game_id": samples.game_id.astype("<u4"),
        "seat": samples.seat.astype("u1"),
        "turn": samples.turn.astype("<u2"),
    }


def shard_stats(samples: EncodedSamples, stored_features: np.ndarray) -> dict:
    """Games in the shard and the float16 rounding error, recorded in its sidecar."""
    game_ids = samples.game_id
    empty = len(samples) == 0
    return {
        "games": int(len(np.unique(game_ids))),
        "first_game_id": -1 if empty else int(game_ids.min()),
        "last_game_id": -1 if empty else int(game_ids.max()),
        "feature_max_abs_error": 0.0 if empty else float(np.abs(stored_features.astype(np.float32) - samples.features).max()),
    }


def write_mahjong_shard(folder: Path, name: str, samples: EncodedSamples) -> ShardInfo:
    """Write `<name>.bin` then its sidecar `<name>.json`; a crash leaves neither half-written."""
    columns = storage_columns(samples)
    return write_shard(folder, name, MAHJONG_SCHEMA, columns, shard_stats(samples, columns["features"]))


def index_totals(shards: list[ShardInfo]) -> dict:
    return {
        "games": sum(s.stats["games"] for s in shards),
        "feature_max_abs_error": max((s.stats["feature_max_abs_error"] for s in shards), default=0.0),
    }


def write_mahjong_index(folder: Path, extra: dict | None = None) -> dict:
    """Gather every shard sidecar of `folder` into `index.json`, with the games and the float16 error."""
    return write_index(folder, MAHJONG_SCHEMA, extra=extra, totals=index_totals)
