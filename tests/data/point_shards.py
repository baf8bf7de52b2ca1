"""A shard schema defined by the tests (not any workload's), and a shard set of it.

Sample i of the set is the point (i, i/2, -i) with label i % 251, flag i % 3 == 0 and group i // 7:
every value says which sample it came from, so a test can check any batch against the source.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trainspeed.data.loader import OutputColumn, ShardBatchSpec
from trainspeed.data.shards import SHARD_PREFIX, ShardInfo, ShardSchema, write_index, write_shard

POINTS = ShardSchema(
    format_name="trainspeed-test-points",
    format_version=2,
    columns={"point": ("<f4", (3,)), "label": ("u1", ()), "flag": ("u1", ()), "group": ("<u4", ())},
    how_to_make="make them with write_points",
)

POINT_BATCHES = ShardBatchSpec(
    schema=POINTS,
    outputs=(
        OutputColumn("point", torch.float32),  # stored dtype: gathered straight into the batch
        OutputColumn("label", torch.int64),  # widened on the way
        OutputColumn("flag", torch.uint8, view_as=torch.bool),
    ),
    split_column="group",
)

SHARD_SIZES = (700, 1500, 0, 1100, 33)
"""Shards that are not whole chunks (1024), and an empty one."""
GROUP_SIZE = 7


def point_columns(start: int, count: int) -> dict[str, np.ndarray]:
    index = np.arange(start, start + count)
    return {
        "point": np.stack([index, index / 2, -index], axis=1).astype("<f4"),
        "label": (index % 251).astype("u1"),
        "flag": (index % 3 == 0).astype("u1"),
        "group": (index // GROUP_SIZE).astype("<u4"),
    }


def point_totals(shards: list[ShardInfo]) -> dict:
    return {"groups": sum(s.stats["groups"] for s in shards)}


def write_points(folder: Path, sizes: tuple[int, ...] = SHARD_SIZES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for number, count in enumerate(sizes):
        columns = point_columns(start, count)
        write_shard(folder, f"{SHARD_PREFIX}{number:06d}", POINTS, columns,
                    stats={"groups": len(np.unique(columns["group"]))})
        start += count
    write_index(folder, POINTS, extra={"source": {"made_by": "tests"}}, totals=point_totals)
    return folder
