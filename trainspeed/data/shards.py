"""Columnar record shards: fixed-size samples, memory-mappable, with an index and checksums.

A `ShardSchema`, given by the workload, names the columns (numpy dtype and per-sample shape, in
file order) and the format's name and version. One shard is one `.bin` file of column sections,
each 64-byte aligned, so a loader can gather a batch of any one column with a single fancy index
into a memmap, straight into its output. The layout is fully determined by the schema and the
sample count, so a shard carries no header.

Each shard gets a sidecar `<name>.json` (written after its `.bin`, both atomically), so a folder
can be filled by many processes and resumed; `write_index` gathers the sidecars into `index.json`,
which records the schema's columns. Besides its size and sha256, a sidecar holds free-form stats
from the writer (e.g. game counts), and the index may hold totals of them. Shard names start with
`shard-` (`write_shard` refuses others: `write_index` gathers only those).

An index is data from wherever the folder came from: `load_index` checks every field's type and
refuses a shard `file` that would lead outside the folder (an absolute path, `..`, a symlink that
leaves it) before anything opens one. `index_schema` rebuilds the schema an index describes, so
any shard set can be inspected and verified without knowing its workload.
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
from trainspeed.data.writer import unfinished_problem
from trainspeed.errors import UsageError
from trainspeed.user_files import read_regular
from trainspeed.user_json import JSONRefused, loads, parse_json

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
    """Write `<name>.bin` then its sidecar `<name>.json`; a crash leaves neither half-written.

    `name` starts with `shard-` (ValueError otherwise): `write_index` gathers only those."""
    if not name.startswith(SHARD_PREFIX) or "/" in name:
        raise ValueError(f"shard name {name!r}: shard names start with {SHARD_PREFIX!r} (e.g. {SHARD_PREFIX}000000), "
                         "which is what write_index gathers")
    samples = _checked_columns(schema, columns)
    offsets = schema.section_offsets(samples)
    bin_path = folder / f"{name}.bin"
    with atomic_path(bin_path) as tmp:
        with open(tmp, "wb") as handle:
            for column_name in schema.columns:
                handle.seek(offsets[column_name])
                handle.write(memoryview(np.ascontiguousarray(columns[column_name]).reshape(-1).view(np.uint8)))
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
    shards = [ShardInfo.from_json(parse_json(read_regular(folder / f"{name}.json"), str(folder / f"{name}.json")))
              for name in sorted(shard_names_done(folder))]
    document = index_document(schema, shards, totals, extra)
    atomic_write_text(folder / INDEX_NAME, json.dumps(document, indent=1))
    return document


def load_index(folder: str | os.PathLike, how_to_make: str = "") -> dict:
    """The folder's index, checked for form whatever its format: every field the readers use has
    its type, and every shard file lies inside the folder; never the index of a set whose writer has
    not finished (`trainspeed.data.writer`). UsageError names what is wrong."""
    path = Path(folder)
    if not path.is_dir():
        hint = f" ({how_to_make})" if how_to_make else ""
        raise UsageError(f"{path}: no such folder{hint}")
    unfinished = unfinished_problem(path)
    if unfinished is not None:
        raise UsageError(f"{path}: {unfinished}")
    index_path = path / INDEX_NAME
    if not index_path.exists() and not index_path.is_symlink():
        raise UsageError(f"{index_path}: missing; this folder holds no finished shard set")
    try:
        document = loads(read_regular(index_path).decode("utf-8"))
    except UnicodeDecodeError as error:
        raise UsageError(f"{index_path}: not valid JSON ({error})") from None
    except JSONRefused as refused:
        raise UsageError(f"{index_path}: {refused}") from None
    problem = _form_problem(document) or _outside_problem(path, document["shards"])
    if problem is not None:
        raise UsageError(f"{index_path}: {problem}")
    return document


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


STORABLE_KINDS = "biufc"
"""numpy dtype kinds a column may have: booleans and numbers (never objects, which would be pickles)."""


def _column_problem(name: str, column: object) -> str | None:
    if not isinstance(column, dict) or not isinstance(column.get("dtype"), str) or not isinstance(column.get("shape"), list):
        return f"column {name!r} must be {{\"dtype\": str, \"shape\": [ints]}}, got {column!r:.80}"
    try:
        dtype = np.dtype(column["dtype"])
    except (TypeError, ValueError):
        return f"column {name!r}: {column['dtype']!r} is not a numpy dtype"
    if dtype.kind not in STORABLE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        return f"column {name!r}: dtype {column['dtype']!r} is not a plain number or boolean type"
    if not all(_is_count(n) for n in column["shape"]):
        return f"column {name!r}: shape {column['shape']!r:.80} is not a list of non-negative integers"
    return None


def _form_problem(document: object) -> str | None:
    """Why `document` is not the form of an index (wrong or missing fields), or None."""
    if not isinstance(document, dict):
        return f"not an index (a JSON {type(document).__name__}, not an object)"
    expected = {"format": (str, "a string"), "format_version": (int, "an integer"), "columns": (dict, "an object"),
                "samples": (int, "an integer"), "shards": (list, "a list")}
    for key, (kind, what) in expected.items():
        value = document.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"{key} must be {what}, got {value!r:.80}"
    if document["samples"] < 0:
        return f"samples must be non-negative, got {document['samples']}"
    for name, column in document["columns"].items():
        problem = _column_problem(name, column)
        if problem is not None:
            return problem
    for number, entry in enumerate(document["shards"]):
        where = f"shards[{number}]"
        if not isinstance(entry, dict):
            return f"{where} must be an object, got {entry!r:.80}"
        for key, check, what in (("file", lambda v: isinstance(v, str) and v != "", "a file name"),
                                 ("samples", _is_count, "a non-negative integer"),
                                 ("nbytes", _is_count, "a non-negative integer"),
                                 ("sha256", lambda v: isinstance(v, str), "a hex string"),
                                 ("ctime_ns", lambda v: v is None or _is_count(v), "an integer")):
            if not check(entry.get(key)):
                return f"{where}.{key} must be {what}, got {entry.get(key)!r:.80}"
    return None


def _outside_problem(folder: Path, shards: list[dict]) -> str | None:
    """Why a shard entry would lead outside `folder`, or None: an index names files of its own
    folder only, so a shared dataset cannot make a reader open (or a check hash) anything else."""
    root = folder.resolve()
    for number, entry in enumerate(shards):
        name = entry["file"]
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts or "\0" in name:
            return f"shards[{number}].file {name!r} is not a file of this folder (no absolute paths, no ..)"
        try:
            inside = (folder / relative).resolve().is_relative_to(root)
        except (OSError, RuntimeError) as error:  # a symlink loop, a name the system refuses
            return f"shards[{number}].file {name!r} cannot be resolved ({error})"
        if not inside:
            return f"shards[{number}].file {name!r} leads outside this folder (a symlink out of it)"
    return None


def read_index(folder: str | os.PathLike, schema: ShardSchema) -> dict:
    """The folder's index (`load_index`), checked for the schema's format, version and columns."""
    document = load_index(folder, schema.how_to_make)
    index_path = Path(folder) / INDEX_NAME
    if document["format"] != schema.format_name:
        raise UsageError(f"{index_path}: format {document['format']!r}, expected {schema.format_name!r}")
    if document["format_version"] != schema.format_version:
        raise UsageError(f"{index_path}: format version {document['format_version']!r}; this trainspeed "
                         f"reads version {schema.format_version} (re-make the shards with this version)")
    if list(document["columns"].items()) != list(schema.columns_json().items()):
        raise UsageError(f"{index_path}: columns {list(document['columns'])} differ from those of "
                         f"{schema.format_name} version {schema.format_version} ({list(schema.columns)})")
    return document


def index_schema(document: dict) -> ShardSchema:
    """The schema a loaded index describes (its format, version and columns)."""
    columns = {name: (np.dtype(column["dtype"]), tuple(column["shape"])) for name, column in document["columns"].items()}
    return ShardSchema(document["format"], document["format_version"], columns)


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
