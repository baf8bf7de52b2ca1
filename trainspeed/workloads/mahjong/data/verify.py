"""Mahjong's checks of a shard folder, and the cheap `inspect` view of one.

`verify_mahjong_shards` runs the generic checks (sizes, checksums, counts) and, on every intact
shard, Mahjong's own: each action legal under its mask, masks 0/1, features finite, and the game
count as the index says. `summarize_mahjong_shards` reads the index only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from trainspeed.data.shards import ShardColumns, read_index
from trainspeed.data.verify import VerifyReport, verify_shards
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA

CHECK_ROWS = 65536
"""Rows read at a time when checking the mask/action columns (bounds memory on big shards)."""


def check_actions(path: Path, rows: np.ndarray, columns: Mapping[str, np.ndarray]) -> list[str]:
    """Action ids in range and legal under their 0/1 masks, for the given shard `rows` (also every
    batch the loader reads: a few bytes per sample, so cheap enough to check always). The common
    case, nothing wrong, costs one max over the actions, one gather and one max over the masks;
    positions are looked up only once something is wrong."""
    action, mask = columns["action"], columns["mask"]
    samples, width = mask.shape
    if len(action) and int(action.max()) >= width:
        first = int(np.flatnonzero(action >= width)[0])
        return [f"{path}: action id out of range at row {int(rows[first])}"]
    problems = []
    chosen = mask.reshape(-1)[np.arange(0, samples * width, width) + action]
    if not chosen.all():
        illegal = np.flatnonzero(chosen == 0)
        problems.append(f"{path}: {len(illegal)} actions not legal under their mask "
                        f"(first at row {int(rows[illegal[0]])})")
    if mask.max(initial=0) > 1:
        problems.append(f"{path}: mask holds values other than 0/1 near row {int(rows[0])}")
    return problems


def check_mahjong_columns(path: Path, info: dict, columns: ShardColumns) -> list[str]:
    problems = []
    game_ids = set()
    for start in range(0, int(info["samples"]), CHECK_ROWS):
        rows = slice(start, start + CHECK_ROWS)
        numbers = np.arange(start, min(start + CHECK_ROWS, int(info["samples"])))
        problems += check_actions(path, numbers, {name: np.asarray(columns[name][rows]) for name in ("action", "mask")})
        if not np.isfinite(np.asarray(columns["features"][rows])).all():
            problems.append(f"{path}: features hold NaN or infinity near row {start}")
        game_ids.update(np.unique(np.asarray(columns["game_id"][rows])).tolist())
    if len(game_ids) != int(info["games"]):
        problems.append(f"{path}: {len(game_ids)} games in the data, index says {info['games']}")
    return problems


def verify_mahjong_shards(folder: str | os.PathLike) -> VerifyReport:
    """Every problem of the folder, each naming its file; raises UsageError only for a bad index."""
    return verify_shards(folder, MAHJONG_SCHEMA, check_mahjong_columns)


@dataclass(frozen=True)
class ShardSummary:
    format_version: int
    shards: int
    games: int
    samples: int
    bytes_per_sample: int
    total_bytes: int
    feature_max_abs_error: float
    columns: dict
    source: dict | None


def summarize_mahjong_shards(folder: str | os.PathLike) -> ShardSummary:
    index = read_index(folder, MAHJONG_SCHEMA)
    return ShardSummary(
        format_version=index["format_version"], shards=len(index["shards"]), games=index["games"],
        samples=index["samples"], bytes_per_sample=index["bytes_per_sample"],
        total_bytes=sum(int(s["nbytes"]) for s in index["shards"]),
        feature_max_abs_error=index["feature_max_abs_error"], columns=index["columns"],
        source=index.get("source"))
