"""Check a shard folder against its index: sizes, checksums, counts, legal actions, finite features.

`verify_shards` collects every problem (naming the shard file) instead of stopping at the first,
so one run tells the whole damage; `summarize_shards` is the cheap `inspect` view (index only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trainspeed.data.shards import file_sha256, open_shard, read_index
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA

CHECK_ROWS = 65536
"""Rows read at a time when checking the mask/action columns (bounds memory on big shards)."""


@dataclass
class VerifyReport:
    shards: int = 0
    samples: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return not self.problems


def _check_columns(path: Path, info: dict) -> list[str]:
    columns = open_shard(path.parent, info, MAHJONG_SCHEMA)
    problems = []
    game_ids = set()
    for start in range(0, int(info["samples"]), CHECK_ROWS):
        rows = slice(start, start + CHECK_ROWS)
        action = np.asarray(columns["action"][rows]).astype(np.int64)
        mask = np.asarray(columns["mask"][rows])
        if (action >= mask.shape[1]).any():
            problems.append(f"{path}: action id out of range near row {start}")
            continue
        illegal = np.flatnonzero(mask[np.arange(len(action)), action] != 1)
        if len(illegal):
            problems.append(f"{path}: {len(illegal)} actions not legal under their mask "
                            f"(first at row {start + int(illegal[0])})")
        if not np.isin(mask, (0, 1)).all():
            problems.append(f"{path}: mask holds values other than 0/1 near row {start}")
        if not np.isfinite(np.asarray(columns["features"][rows])).all():
            problems.append(f"{path}: features hold NaN or infinity near row {start}")
        game_ids.update(np.unique(np.asarray(columns["game_id"][rows])).tolist())
    if len(game_ids) != int(info["games"]):
        problems.append(f"{path}: {len(game_ids)} games in the data, index says {info['games']}")
    return problems


def verify_shards(folder: str | os.PathLike) -> VerifyReport:
    """Every problem of the folder, each naming its file; raises UsageError only for a bad index."""
    folder = Path(folder)
    index = read_index(folder, MAHJONG_SCHEMA)
    report = VerifyReport(shards=len(index["shards"]))
    total = 0
    for info in index["shards"]:
        path = folder / info["file"]
        total += int(info["samples"])
        if not path.is_file():
            report.problems.append(f"{path}: missing")
            continue
        expected = MAHJONG_SCHEMA.section_offsets(int(info["samples"]))["end"]
        size = path.stat().st_size
        if size != expected:
            report.problems.append(f"{path}: {size} bytes, expected {expected} (truncated)" if size < expected
                                   else f"{path}: {size} bytes, expected {expected} (extra bytes)")
            continue
        if file_sha256(path) != info["sha256"]:
            report.problems.append(f"{path}: checksum mismatch (the file changed after it was written)")
            continue
        report.problems.extend(_check_columns(path, info))
    report.samples = total
    if total != int(index["samples"]):
        report.problems.append(f"{folder / 'index.json'}: says {index['samples']} samples, shards hold {total}")
    return report


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


def summarize_shards(folder: str | os.PathLike) -> ShardSummary:
    index = read_index(folder, MAHJONG_SCHEMA)
    return ShardSummary(
        format_version=index["format_version"], shards=len(index["shards"]), games=index["games"],
        samples=index["samples"], bytes_per_sample=index["bytes_per_sample"],
        total_bytes=sum(int(s["nbytes"]) for s in index["shards"]),
        feature_max_abs_error=index["feature_max_abs_error"], columns=index["columns"],
        source=index.get("source"))
