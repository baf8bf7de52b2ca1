"""Columnar record shards: fixed-size samples, memory-mappable, with an index and checksums.

A `ShardSchema`, given by the workload, names the columns (numpy dtype and per-sample shape, in
file order) and the format's name and version. One shard is one `.bin` file of column sections,
each 64-byte aligned, so a loader can gather a batch of any one column with a single fancy index
into a memmap, straight into its output. The layout is fully determined by the schema and the
sample count, so a shard carries no header.

Each shard gets a sidecar `<name>.json` (written after its `.bin`, both atomically), so a folder
can be filled by many processes and resumed; `write_index` gathers the sidecars into `index.json`,
which records the schema's columns. Besides its size and sha256, a sidecar holds free-form stats
from the writer (e.g. game counts), and the index may hold totals of them.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from trainspeed.atomic import atomic_path, atomic_write_text
from trainspeed.errors import UsageError

INDEX_NAME = "index.json"
SECTION_ALIGN = 64
SHARD_PREFIX = "shard-"

ColumnSpec = tuple[np.dtype, tuple[int, ...]]
"""(numpy dtype, shape of one sample) of one column."""


@dataclass(frozen=True)
class ShardSchema:
    """What a shard folder holds; `format_name` and `format_version` are checked on every read."""

    format_name: str
    format_version: int
    columns: Mapping[str, ColumnSpec]
    """Column name -> (dtype, per-sample shape), in the order of the sections in a file."""
    how_to_make: str = ""
    """Appended to the "no such folder" error, e.g. the command that makes such a folder."""

    def __post_init__(self) -> None:
        # accept "u1" / np.uint8 and lists: the byte layout and the index need np.dtype and tuples
        columns = {name: (np.dtype(dtype), tuple(int(n) for n in shape)) for name, (dtype, shape) in self.columns.items()}
        object.__setattr__(self, "columns", columns)

    def bytes_per_sample(self) -> int:
        return sum(dtype.itemsize * int(np.prod(shape, dtype=np.int64)) for dtype, shape in self.columns.values())

    def section_offsets(self, samples: int) -> dict[str, int]:
        """Byte offset of each column in a shard of `samples` samples, and "end", the file size."""
        offsets, position = {}, 0
        for name, (dtype, shape) in self.columns.items():
            offsets[name] = position
            position = _aligned(position + samples * dtype.itemsize * int(np.prod(shape, dtype=np.int64)))
        offsets["end"] = position
        return offsets

    def columns_json(self) -> dict:
        return {name: {"dtype": dtype.str, "shape": list(shape)} for name, (dtype, shape) in self.columns.items()}


def _aligned(offset: int) -> int:
    return -(-offset // SECTION_ALIGN) * SECTION_ALIGN


@dataclass(frozen=True)
class ShardInfo:
    """A shard's sidecar: its file, size and checksum, and the writer's own stats."""

    file: str
    samples: int
    nbytes: int
    sha256: str
    stats: dict = field(default_factory=dict)
    ctime_ns: int | None = None
    """The file's inode change time once written. While it is unchanged the bytes are the ones the
    checksum was taken of (any write changes it, and no tool can set it back), so a reader can trust
    them without hashing the file again."""

    def to_json(self) -> dict:
        """Flat: the stats sit beside the fixed fields, so readers index them directly."""
        stamp = {} if self.ctime_ns is None else {"ctime_ns": self.ctime_ns}
        return {"file": self.file, "samples": self.samples, **self.stats, "nbytes": self.nbytes,
                "sha256": self.sha256, **stamp}

    @staticmethod
    def from_json(document: dict) -> "ShardInfo":
        fixed = ("file", "samples", "nbytes", "sha256")
        return ShardInfo(**{key: document[key] for key in fixed}, ctime_ns=document.get("ctime_ns"),
                         stats={key: value for key, value in document.items() if key not in (*fixed, "ctime_ns")})


def file_sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _checked_columns(schema: ShardSchema, columns: Mapping[str, np.ndarray]) -> int:
    """The sample count; ValueError if the arrays do not match the schema exactly (no silent casts)."""
    if set(columns) != set(schema.columns):
        raise ValueError(f"columns {sorted(columns)} do not match the schema's {sorted(schema.columns)}")
    lengths = {len(array) for array in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"columns have different lengths {sorted(lengths)}")
    for name, (dtype, shape) in schema.columns.items():
        array = columns[name]
        if array.dtype != dtype or tuple(array.shape[1:]) != tuple(shape):
            raise ValueError(f"column {name!r} is {array.dtype.str} {tuple(array.shape[1:])}, "
                             f"the schema says {dtype.str} {tuple(shape)}")
    return lengths.pop()


def write_shard(folder: Path, name: str, schema: ShardSchema, columns: Mapping[str, np.ndarray],
                stats: Mapping | None = None) -> ShardInfo:
    """Write `<name>.bin` then its sidecar `<name>.json`; a crash leaves neither half-written."""
    samples = _checked_columns(schema, columns)
    offsets = schema.section_offsets(samples)
    bin_path = folder / f"{name}.bin"
    with atomic_path(bin_path) as tmp:
        with open(tmp, "wb") as handle:
            for column_name in schema.columns:
                handle.seek(offsets[column_name])
                handle.write(np.ascontiguousarray(columns[column_name]).tobytes())
            handle.truncate(offsets["end"])
    info = ShardInfo(file=bin_path.name, samples=samples, nbytes=offsets["end"], sha256=file_sha256(bin_path),
                     stats=dict(stats or {}), ctime_ns=bin_path.stat().st_ctime_ns)
    atomic_write_text(folder / f"{name}.json", json.dumps(info.to_json(), indent=1))
    return info


def shard_names_done(folder: Path) -> set[str]:
    """Shards whose sidecar exists (so their .bin is complete)."""
    return {p.stem for p in folder.glob(f"{SHARD_PREFIX}*.json")}


IndexTotals = Callable[[list[ShardInfo]], dict]
"""Index-wide totals of the shards' stats (e.g. games summed), placed after the sample count."""


def index_document(schema: ShardSchema, shards: list[ShardInfo], totals: IndexTotals | None = None,
                   extra: dict | None = None) -> dict:
    return {
        "format": schema.format_name,
        "format_version": schema.format_version,
        "columns": schema.columns_json(),
        "bytes_per_sample": schema.bytes_per_sample(),
        "section_align": SECTION_ALIGN,
        "samples": sum(s.samples for s in shards),
        **(totals(shards) if totals else {}),
        "shards": [s.to_json() for s in shards],
        **(extra or {}),
    }


def write_index(folder: Path, schema: ShardSchema, extra: dict | None = None,
                totals: IndexTotals | None = None) -> dict:
    """Gather every shard sidecar of `folder` into `index.json` (shards in name order)."""
    shards = [ShardInfo.from_json(json.loads((folder / f"{name}.json").read_text()))
              for name in sorted(shard_names_done(folder))]
    document = index_document(schema, shards, totals, extra)
    atomic_write_text(folder / INDEX_NAME, json.dumps(document, indent=1))
    return document


def read_index(folder: str | os.PathLike, schema: ShardSchema) -> dict:
    """The folder's index, checked for format, version and columns; UsageError names what is wrong."""
    path = Path(folder)
    if not path.is_dir():
        hint = f" ({schema.how_to_make})" if schema.how_to_make else ""
        raise UsageError(f"{path}: no such folder{hint}")
    index_path = path / INDEX_NAME
    if not index_path.is_file():
        raise UsageError(f"{index_path}: missing; this folder holds no finished shard set")
    try:
        document = json.loads(index_path.read_text())
    except json.JSONDecodeError as error:
        raise UsageError(f"{index_path}: not valid JSON ({error})") from None
    if document.get("format") != schema.format_name:
        raise UsageError(f"{index_path}: format {document.get('format')!r}, expected {schema.format_name!r}")
    if document.get("format_version") != schema.format_version:
        raise UsageError(f"{index_path}: format version {document.get('format_version')!r}; this trainspeed "
                         f"reads version {schema.format_version} (re-make the shards with this version)")
    if list((document.get("columns") or {}).items()) != list(schema.columns_json().items()):
        raise UsageError(f"{index_path}: columns {list(document.get('columns') or {})} differ from those of "
                         f"{schema.format_name} version {schema.format_version} ({list(schema.columns)})")
    return document


@dataclass(frozen=True)
class ShardColumns:
    """Read-only memmaps of one shard's columns."""

    columns: dict[str, np.memmap]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]


def open_shard(folder: Path, info: dict, schema: ShardSchema) -> ShardColumns:
    """Memmaps of the shard `info` (an entry of the index's "shards"); UsageError if its size is off."""
    samples = int(info["samples"])
    offsets = schema.section_offsets(samples)
    path = folder / info["file"]
    problem = shard_size_problem(path, offsets["end"])
    if problem is not None:
        raise UsageError(problem)
    if samples == 0:
        return ShardColumns({name: np.zeros((0, *shape), dtype) for name, (dtype, shape) in schema.columns.items()})
    try:
        return ShardColumns({
            name: np.memmap(path, dtype=dtype, mode="r", offset=offsets[name], shape=(samples, *shape))
            for name, (dtype, shape) in schema.columns.items()})
    except OSError as error:
        raise UsageError(f"{path}: cannot read ({error.strerror})") from None


def shard_size_problem(path: Path, expected_bytes: int) -> str | None:
    """Why `path` cannot be a shard of `expected_bytes` (missing, not a file, another size), or None."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"{path}: missing"
    except OSError as error:
        return f"{path}: cannot read ({error.strerror})"
    if not path.is_file():
        return f"{path}: not a regular file"
    if size != expected_bytes:
        kind = "truncated" if size < expected_bytes else "extra bytes"
        return f"{path}: {size} bytes, expected {expected_bytes} ({kind})"
    return None
