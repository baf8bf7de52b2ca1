"""Where a split of a columnar shard set lies: which rows of which shards are "train" and which
"val". It imports no torch: the shard loader and the trainer of exported steps (where only JAX
is) read the same samples in the same order from it (`trainspeed.data.order`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainspeed.data.base import LoaderConfig
from trainspeed.data.order import SPLITS, chunk_bounds, chunked_order, in_validation_split
from trainspeed.data.shards import INDEX_NAME, ShardSchema, open_shard
from trainspeed.errors import UsageError


SPLIT_FORM = '{"by": a column or null, "val_per_mille": 0..1000}'
"""The form of the split an index records, as refusals name it."""


def recorded_split(folder: Path, index: dict) -> dict | None:
    """The train/val split a shard set's index records (`{"by": a column or None, "val_per_mille":
    0..1000}`), None where it records none; a record of another form is refused, never read around."""
    split = index.get("split")
    if split is None:
        return None
    per_mille = split.get("val_per_mille") if isinstance(split, dict) else None
    if not (isinstance(split, dict) and (split.get("by") is None or split.get("by") in index["columns"])
            and isinstance(per_mille, int) and not isinstance(per_mille, bool) and 0 <= per_mille <= 1000):
        raise UsageError(f"{folder / INDEX_NAME}: split must be {SPLIT_FORM}, got {split!r:.80}")
    return split


@dataclass(frozen=True)
class SplitLayout:
    """Where the split's samples lie: global sample g is row `rows[g]` of shard `shard_of(g)`."""

    shard_infos: tuple[dict, ...]
    shard_starts: np.ndarray  # (shards + 1,) first global id of each shard, then the total
    rows: np.ndarray  # (samples,) int64 row inside its shard

    @property
    def num_samples(self) -> int:
        return int(self.shard_starts[-1])

    def data_record(self, folder: Path, data_format: str) -> dict:
        """What a run reading this split reads, for its summary and its resume: the shard set's
        format, its shard files, and a fingerprint over the checksums its index records for them
        (the content, cheaply)."""
        digest = hashlib.sha256("\n".join(info["sha256"] for info in self.shard_infos).encode())
        return {"format": f"shards ({data_format})", "path": str(folder), "files": len(self.shard_infos),
                "samples": self.num_samples, "fingerprint": digest.hexdigest(),
                "fingerprint_covers": "the sha256 of every shard file, as the index records them", "skipped": 0}

    def epoch_order(self, config: LoaderConfig, epoch: int) -> np.ndarray:
        """The global sample order of one epoch: identical on every rank, fixed by (seed, epoch)."""
        return chunked_order(chunk_bounds(self.shard_starts), self.num_samples, config, epoch)

    def shard_rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shard number, row inside it) of each global sample id."""
        return np.searchsorted(self.shard_starts, ids, side="right") - 1, self.rows[ids]


def split_layout(folder: Path, index: dict, split: str, schema: ShardSchema, split_column: str | None,
                 val_per_mille: int) -> SplitLayout:
    """The samples of `split`: those whose `split_column` value (each sample's position in the set,
    where None) hashes into val, or the rest."""
    if split not in SPLITS:
        raise UsageError(f"split {split!r}: use one of {', '.join(SPLITS)}")
    starts, rows, position = [0], [], 0
    for info in index["shards"]:
        if split_column is None:
            keys = np.arange(position, position + info["samples"], dtype=np.int64)
        else:
            keys = np.asarray(open_shard(folder, info, schema)[split_column])
        position += info["samples"]
        in_val = in_validation_split(keys, val_per_mille)
        selected = np.flatnonzero(in_val if split == "val" else ~in_val)
        rows.append(selected.astype(np.int64))
        starts.append(starts[-1] + len(selected))
    return SplitLayout(tuple(index["shards"]), np.asarray(starts, np.int64),
                       np.concatenate(rows) if rows else np.zeros(0, np.int64))
