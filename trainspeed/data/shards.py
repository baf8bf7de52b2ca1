"""Mahjong sample shards: fixed-size records, memory-mappable, with an index and checksums.

One shard is one `.bin` file of column sections (each 64-byte aligned), so a loader can gather
a batch of any one column with a single fancy index into a memmap, straight into its output:

  column    dtype    shape per sample  bytes
  features  float16  (74, 34)          5032   float32 engine values rounded to float16
  mask      uint8    (82,)               82   legal actions, 0/1
  action    uint8    ()                   1
  game_id   uint32   ()                   4
  seat      uint8    ()                   1
  turn      uint16   ()                   2
                                       5122 bytes per sample (half of float32 features alone)

float16 is the one lossy step: the engine's values are fractions such as 1/3, 1/7, 1/70, which
float16 rounds with a relative error of at most 2^-11. The writer measures the largest absolute
error of every shard and the index records it (`feature_max_abs_error`); actions and masks are exact.

Each shard gets a sidecar `<name>.json` (written after its `.bin`, both atomically), so a folder
can be filled by many processes and resumed; `write_index` gathers the sidecars into `index.json`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainspeed.atomic import atomic_path, atomic_write_text
from trainspeed.errors import UsageError
from trainspeed.workloads.mahjong.encoding import FEATURE_SHAPE, NUM_ACTIONS, EncodedSamples

FORMAT_NAME = "trainspeed-mahjong-shards"
FORMAT_VERSION = 1
INDEX_NAME = "index.json"
SECTION_ALIGN = 64
SHARD_PREFIX = "shard-"

COLUMNS: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    "features": (np.dtype("<f2"), FEATURE_SHAPE),
    "mask": (np.dtype("u1"), (NUM_ACTIONS,)),
    "action": (np.dtype("u1"), ()),
    "game_id": (np.dtype("<u4"), ()),
    "seat": (np.dtype("u1"), ()),
    "turn": (np.dtype("<u2"), ()),
}


def bytes_per_sample() -> int:
    return sum(dtype.itemsize * int(np.prod(shape, dtype=np.int64)) for dtype, shape in COLUMNS.values())


def _aligned(offset: int) -> int:
    return -(-offset // SECTION_ALIGN) * SECTION_ALIGN


def section_offsets(samples: int) -> dict[str, int]:
    """Byte offset of each column in a shard of `samples` samples (the layout is fully determined)."""
    offsets, position = {}, 0
    for name, (dtype, shape) in COLUMNS.items():
        offsets[name] = position
        position = _aligned(position + samples * dtype.itemsize * int(np.prod(shape, dtype=np.int64)))
    offsets["end"] = position
    return offsets


@dataclass(frozen=True)
class ShardInfo:
    file: str
    samples: int
    games: int
    first_game_id: int
    last_game_id: int
    nbytes: int
    sha256: str
    feature_max_abs_error: float

    def to_json(self) -> dict:
        return dict(self.__dict__)


def file_sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _storage_columns(samples: EncodedSamples) -> dict[str, np.ndarray]:
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


def write_shard(folder: Path, name: str, samples: EncodedSamples) -> ShardInfo:
    """Write `<name>.bin` then its sidecar `<name>.json`; a crash leaves neither half-written."""
    columns = _storage_columns(samples)
    offsets = section_offsets(len(samples))
    error = float(np.abs(columns["features"].astype(np.float32) - samples.features).max()) if len(samples) else 0.0
    bin_path = folder / f"{name}.bin"
    with atomic_path(bin_path) as tmp:
        with open(tmp, "wb") as handle:
            for column_name, array in columns.items():
                handle.seek(offsets[column_name])
                handle.write(np.ascontiguousarray(array).tobytes())
            handle.truncate(offsets["end"])
    game_ids = samples.game_id
    info = ShardInfo(
        file=bin_path.name, samples=len(samples), games=int(len(np.unique(game_ids))),
        first_game_id=int(game_ids.min()) if len(samples) else -1,
        last_game_id=int(game_ids.max()) if len(samples) else -1,
        nbytes=offsets["end"], sha256=file_sha256(bin_path), feature_max_abs_error=error)
    atomic_write_text(folder / f"{name}.json", json.dumps(info.to_json(), indent=1))
    return info


def shard_names_done(folder: Path) -> set[str]:
    """Shards whose sidecar exists (so their .bin is complete)."""
    return {p.stem for p in folder.glob(f"{SHARD_PREFIX}*.json")}


def index_document(shards: list[ShardInfo], extra: dict | None = None) -> dict:
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "columns": {name: {"dtype": dtype.str, "shape": list(shape)} for name, (dtype, shape) in COLUMNS.items()},
        "bytes_per_sample": bytes_per_sample(),
        "section_align": SECTION_ALIGN,
        "samples": sum(s.samples for s in shards),
        "games": sum(s.games for s in shards),
        "feature_max_abs_error": max((s.feature_max_abs_error for s in shards), default=0.0),
        "shards": [s.to_json() for s in shards],
        **(extra or {}),
    }


def write_index(folder: Path, extra: dict | None = None) -> dict:
    """Gather every shard sidecar of `folder` into `index.json` (shards in name order)."""
    shards = [ShardInfo(**json.loads((folder / f"{name}.json").read_text()))
              for name in sorted(shard_names_done(folder))]
    document = index_document(shards, extra)
    atomic_write_text(folder / INDEX_NAME, json.dumps(document, indent=1))
    return document


def read_index(folder: str | os.PathLike) -> dict:
    """The folder's index, checked for format and version; UsageError names what is wrong."""
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"{path}: no such folder (make shards with `trainspeed data mahjong-selfplay` or `from-mjai`)")
    index_path = path / INDEX_NAME
    if not index_path.is_file():
        raise UsageError(f"{index_path}: missing; this folder holds no finished shard set")
    try:
        document = json.loads(index_path.read_text())
    except json.JSONDecodeError as error:
        raise UsageError(f"{index_path}: not valid JSON ({error})") from None
    if document.get("format") != FORMAT_NAME:
        raise UsageError(f"{index_path}: format {document.get('format')!r}, expected {FORMAT_NAME!r}")
    if document.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"{index_path}: format version {document.get('format_version')!r}; this trainspeed "
                         f"reads version {FORMAT_VERSION} (re-make the shards with this version)")
    return document


@dataclass(frozen=True)
class ShardColumns:
    """Read-only memmaps of one shard's columns."""

    columns: dict[str, np.memmap]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]


def open_shard(folder: Path, info: dict) -> ShardColumns:
    samples = int(info["samples"])
    offsets = section_offsets(samples)
    path = folder / info["file"]
    actual = path.stat().st_size
    if actual != offsets["end"]:
        raise UsageError(f"{path}: {actual} bytes, expected {offsets['end']} (truncated or foreign file)")
    if samples == 0:
        return ShardColumns({name: np.zeros((0, *shape), dtype) for name, (dtype, shape) in COLUMNS.items()})
    return ShardColumns({
        name: np.memmap(path, dtype=dtype, mode="r", offset=offsets[name], shape=(samples, *shape))
        for name, (dtype, shape) in COLUMNS.items()})
