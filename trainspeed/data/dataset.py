"""Datasets of your own arrays: write them as shards, open them as a rank's loader.

`write_dataset({"tokens": ..., "document": ...}, "data/text", split_by="document")` is the whole
writing side: it derives the schema from the arrays (each column's dtype and per-sample shape),
names and writes the shards itself, decides the train/val split and records it in `index.json`.
`open_dataset(folder, config, outputs=...)` is the reading side, the `ShardLoader` of one rank over
that folder; a workload's `open_dataset` returns it. `trainspeed data from-arrays` writes one from
an `.npz` file or a folder of `.npy` files (`load_arrays`), and `trainspeed data verify | inspect`
work on it as on any shard set.

The split: samples with equal values in the `split_by` column (an integer column: a document id, a
user id) land on the same side, chosen by a fixed hash of the value (`in_validation_split`), so
about `val_fraction` of the distinct values are held out, whatever the seed, shard size or rank
count. Without `split_by`, each sample is held out on its own.

Values: the `tokens` column holds token ids (`trainspeed.data.ids`), each written only once it lies
in 0..vocabulary-1 (the vocabulary when the writer is told it, else what int32 holds), and the
index records every integer column's smallest and largest value (`ranges`), so a workload refuses
ids past its vocabulary before it trains, and `verify` finds data that differs from its record.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from trainspeed.data.arrays import ArrayColumn, ArrayInMemory, ZipMemberColumn, load_arrays
from trainspeed.data.base import LoaderConfig
from trainspeed.data.ids import ID_LIMIT, TOKEN_COLUMN, OutsideId, count_outside, first_outside, id_stop
from trainspeed.data.order import SAMPLE_ID_KEY, in_validation_split
from trainspeed.data.shards import (
    INDEX_NAME,
    SHARD_PREFIX,
    STORABLE_KINDS,
    ShardColumns,
    ShardSchema,
    index_schema,
    load_index,
    write_index,
    write_shard,
)
from trainspeed.data.split import SPLIT_FORM, recorded_split
from trainspeed.data.verify import ColumnCheck, VerifyReport, verify_shards
from trainspeed.data.writer import claim_folder, clear_own_files
from trainspeed.errors import UsageError

if TYPE_CHECKING:  # writing, checking and summarizing a dataset need no torch; reading it does
    from trainspeed.data.loader import OutputColumn, RowCheck, ShardBatchSpec, ShardLoader

__all__ = ["ArrayColumn", "dataset_batches", "load_arrays", "open_dataset", "recorded_range", "summarize_dataset",
           "verify_dataset", "write_dataset"]

WRITER_NAME = "from-arrays"
"""The writer a folder of `write_dataset` records (`trainspeed data from-arrays` is its command)."""
FORMAT_NAME = "trainspeed-arrays"
FORMAT_VERSION = 1
SHARD_BYTES = 64 * 2**20
"""About how large the writer makes each shard (a few memory maps per GiB, each a few seconds to hash)."""
HOW_TO_MAKE = "write one with trainspeed.data.write_dataset or `trainspeed data from-arrays`"
RANGES_KEY = "ranges"
"""The index's `{"column": {"min": ..., "max": ...}}` of every integer column, taken while writing."""
VOCABULARY_KEY = "vocabulary"
"""The index's vocabulary of the token ids, when the writer was told it."""
CHECK_VALUES = 1 << 22
"""Values `verify` reads from a shard at a time (a chunk of rows of about this many)."""


def _column(name: object, column: np.ndarray | ArrayColumn) -> ArrayColumn:
    """A column argument as an `ArrayColumn` (arrays and array-likes are taken as they are)."""
    if not isinstance(name, str) or not name or name == SAMPLE_ID_KEY:
        raise UsageError(f"column name {name!r}: use a non-empty name other than {SAMPLE_ID_KEY} (the loader's own key)")
    if isinstance(column, (ArrayInMemory, ZipMemberColumn)):
        return column
    return ArrayInMemory(np.asarray(column))


def _checked_columns(columns: Mapping[str, np.ndarray | ArrayColumn]) -> dict[str, ArrayColumn]:
    """The columns, of one length and storable dtypes, known from their dtypes and shapes alone
    (nothing is read yet); UsageError naming the first that is not."""
    if not columns:
        raise UsageError("no columns given: pass at least one array, e.g. {'tokens': array}")
    checked = {}
    for name, given in columns.items():
        column = _column(name, given)
        if len(column.shape) == 0:
            raise UsageError(f"column {name!r} is a scalar; a column holds one entry per sample (first dimension)")
        if column.dtype.kind not in STORABLE_KINDS or column.dtype.fields is not None:
            raise UsageError(f"column {name!r} has dtype {column.dtype}; store booleans or numbers only")
        checked[name] = column
    lengths = {name: column.shape[0] for name, column in checked.items()}
    if len(set(lengths.values())) != 1:
        raise UsageError(f"columns have different lengths ({', '.join(f'{k} {v}' for k, v in lengths.items())}); "
                         "every column holds one entry per sample")
    if not next(iter(lengths.values())):
        raise UsageError("the columns hold no samples")
    return checked


def _where(name: str, column: ArrayColumn) -> str:
    """The column as an error names it: its file (or archive member) when it came from one."""
    return getattr(column, "where", "") or f"column {name!r}"


def _check_token_column(columns: Mapping[str, ArrayColumn], vocabulary: int | None) -> None:
    """The token ids' column, when there is one, holds integers; a vocabulary bounds that column."""
    if vocabulary is not None and (isinstance(vocabulary, bool) or not isinstance(vocabulary, int)
                                   or not 1 <= vocabulary <= ID_LIMIT):
        raise UsageError(f"vocabulary {vocabulary!r}: give the number of token ids, 1 to {ID_LIMIT:,}")
    tokens = columns.get(TOKEN_COLUMN)
    if tokens is None:
        if vocabulary is not None:
            raise UsageError(f"vocabulary {vocabulary}: it bounds the token ids of a {TOKEN_COLUMN!r} column, and "
                             f"there is none (the columns are {', '.join(columns)}); name the ids' array {TOKEN_COLUMN}")
        return
    if tokens.dtype.kind not in "iu":
        raise UsageError(f"{_where(TOKEN_COLUMN, tokens)}: the {TOKEN_COLUMN!r} column holds token ids, and this one is "
                         f"{tokens.dtype}; store whole-number ids (e.g. np.int32)")


def _check_token_ids(where: str, ids: np.ndarray, first_row: int, vocabulary: int | None) -> None:
    """UsageError naming the first id of `ids` (rows from `first_row` on) outside the vocabulary."""
    stop = id_stop(vocabulary)
    outside = first_outside(ids, stop)
    if outside is None:
        return
    fix = ("give the vocabulary that covers it, or number the ids from 0 below it" if vocabulary is not None
           else "number the ids from 0 up to the vocabulary's size")
    raise UsageError(f"{where}: token id {outside.value} at {outside.position(first_row)} "
                     f"{outside.what(stop, 'the vocabulary')}; {fix}")


def _widened_ranges(ranges: dict[str, dict[str, int]], part: Mapping[str, np.ndarray]) -> None:
    """Widen each integer column's recorded {min, max} to cover its rows in `part`."""
    for name, values in part.items():
        if values.dtype.kind not in "iu" or not values.size:
            continue
        low, high = int(values.min()), int(values.max())
        known = ranges.setdefault(name, {"min": low, "max": high})
        known["min"], known["max"] = min(known["min"], low), max(known["max"], high)


def _val_per_mille(val_fraction: float) -> int:
    if not 0.0 <= val_fraction < 1.0:
        raise UsageError(f"val_fraction {val_fraction}: must be at least 0 and below 1")
    per_mille = round(val_fraction * 1000)
    if abs(per_mille / 1000 - val_fraction) > 1e-9:
        raise UsageError(f"val_fraction {val_fraction}: the split has per-mille steps; use e.g. {per_mille / 1000}")
    return per_mille


def _check_split_by(columns: Mapping[str, ArrayColumn], split_by: str | None) -> None:
    if split_by is None:
        return
    if split_by not in columns:
        raise UsageError(f"split_by {split_by!r} is not a column; the columns are {', '.join(columns)}")
    keys = columns[split_by]
    if keys.dtype.kind not in "iu" or len(keys.shape) != 1:
        raise UsageError(f"split_by {split_by!r} is {keys.dtype} {keys.shape[1:]}; it must be one integer per sample "
                         "(a document or group id)")


def _check_disk_space(out: Path, needed: int) -> None:
    """The shards must fit where they go: an array's declared size is checked against the free
    space before a byte is written, so a small file that declares terabytes is one line."""
    free = shutil.disk_usage(out).free
    if needed > free:
        raise UsageError(f"--out {out}: the dataset takes {needed / 2**30:,.2f} GiB, and only {free / 2**30:,.2f} GiB "
                         "are free there; free space or choose another --out")


def write_dataset(columns: Mapping[str, np.ndarray | ArrayColumn], out: str | os.PathLike, *,
                  split_by: str | None = None, val_fraction: float = 0.05, samples_per_shard: int | None = None,
                  source: Mapping | None = None, vocabulary: int | None = None) -> dict:
    """Write `columns` (name -> array, or an `ArrayColumn` such as `load_arrays` gives, one entry
    per sample along the first dimension) as a shard set in the new or empty folder `out`; returns
    its index (also written as `out/index.json`, last, so a folder without it is unfinished).

    `split_by` names an integer column whose equal values stay on one side of the train/val split;
    about `val_fraction` (per-mille steps) of its distinct values go to "val". `samples_per_shard`
    defaults to about 64 MiB per shard; the rows of one shard are all that is held in memory at a
    time. `source` is free-form JSON recorded in the index (where the data came from). Arrays are
    stored in their own dtype and byte order; booleans and numbers only. A `tokens` column holds
    token ids: whole numbers from 0, below `vocabulary` when it is given (it is recorded in the
    index), and fitting int32 always; the first id outside is one UsageError naming the array, the
    value and its row. The index records each integer column's min and max. The folder is claimed
    first (`trainspeed.data.writer`): a rerun after an interrupted write writes the set again, any
    other folder that is not empty is refused. Bad input is a UsageError that says what to change,
    before anything is written.
    """
    checked = _checked_columns(columns)
    per_mille = _val_per_mille(val_fraction)
    _check_split_by(checked, split_by)
    _check_token_column(checked, vocabulary)
    schema = ShardSchema(FORMAT_NAME, FORMAT_VERSION, {name: (c.dtype, c.shape[1:]) for name, c in checked.items()},
                         how_to_make=HOW_TO_MAKE)
    samples = next(iter(checked.values())).shape[0]
    if samples_per_shard is not None and samples_per_shard < 1:
        raise UsageError(f"samples_per_shard {samples_per_shard}: must be at least 1")
    per_shard = samples_per_shard or max(1, SHARD_BYTES // max(1, schema.bytes_per_sample()))
    out = Path(out)
    settings = {"columns": schema.columns_json(), "samples": samples, "split_by": split_by, "val_per_mille": per_mille,
                "samples_per_shard": samples_per_shard, "source": dict(source) if source else None,
                **({VOCABULARY_KEY: vocabulary} if vocabulary is not None else {})}
    claim = claim_folder(out, WRITER_NAME, settings)
    clear_own_files(claim)
    _check_disk_space(out, sum(schema.section_offsets(min(per_shard, samples - start))["end"]
                               for start in range(0, samples, per_shard)))
    try:
        val_samples, ranges = 0, {}
        for number, start in enumerate(range(0, samples, per_shard)):
            part = {name: column.rows(start, start + per_shard) for name, column in checked.items()}
            if TOKEN_COLUMN in part:
                _check_token_ids(_where(TOKEN_COLUMN, checked[TOKEN_COLUMN]), part[TOKEN_COLUMN], start, vocabulary)
            _widened_ranges(ranges, part)
            keys = part[split_by] if split_by is not None else np.arange(start, start + len(next(iter(part.values()))))
            val_samples += int(in_validation_split(keys, per_mille).sum())
            write_shard(out, f"{SHARD_PREFIX}{number:06d}", schema, part)
        split = {"by": split_by, "val_per_mille": per_mille, "train_samples": samples - val_samples,
                 "val_samples": val_samples}
        recorded = {RANGES_KEY: ranges, **({VOCABULARY_KEY: vocabulary} if vocabulary is not None else {})}
        index = write_index(out, schema, extra={"split": split, **recorded,
                                                **({"source": dict(source)} if source else {})})
    except Exception:
        claim.abandon()  # a member that turns out damaged half way leaves the folder as it was found
        raise
    claim.finish()
    return index


def _split_entry(folder: Path, index: dict) -> dict:
    split = recorded_split(folder, index)
    if split is None:
        raise UsageError(f"{folder / INDEX_NAME}: split must be {SPLIT_FORM}, got None")
    return split


def dataset_batches(folder: str | os.PathLike, outputs: Sequence[str | OutputColumn] | None = None,
                    check_rows: RowCheck | None = None) -> ShardBatchSpec:
    """How batches are made from the dataset in `folder`: its schema and split from its index, and
    `outputs` (column names, kept in their stored dtype, or `OutputColumn`s to widen or view one;
    None: every column as stored)."""
    import torch

    from trainspeed.data.loader import OutputColumn, ShardBatchSpec

    folder = Path(folder)
    index = load_index(folder, HOW_TO_MAKE)
    if index["format"] != FORMAT_NAME:
        raise UsageError(f"{folder}: a {index['format']!r} shard set, not a dataset written by write_dataset")
    if index["format_version"] != FORMAT_VERSION:
        raise UsageError(f"{folder / INDEX_NAME}: format version {index['format_version']}; this trainspeed reads "
                         f"version {FORMAT_VERSION} (write the dataset again with this version)")
    split = _split_entry(folder, index)
    schema = index_schema(index)
    chosen = []
    for output in outputs if outputs is not None else list(schema.columns):
        name = output.name if isinstance(output, OutputColumn) else output
        if name not in schema.columns:
            raise UsageError(f"{folder}: the dataset has no column {name!r} (it has {', '.join(schema.columns)})")
        stored = torch.from_numpy(np.empty(0, schema.columns[name][0])).dtype
        chosen.append(output if isinstance(output, OutputColumn) else OutputColumn(name, stored))
    return ShardBatchSpec(schema=schema, outputs=tuple(chosen), split_column=split["by"],
                          val_per_mille=split["val_per_mille"], check_rows=check_rows)


def open_dataset(folder: str | os.PathLike, config: LoaderConfig, outputs: Sequence[str | OutputColumn] | None = None,
                 check_rows: RowCheck | None = None) -> ShardLoader:
    """The loader of one rank over a dataset `write_dataset` made (see `dataset_batches`). Batches
    hold the output columns and `meta_sample_id` (each sample's position in its split)."""
    from trainspeed.data.loader import ShardLoader

    return ShardLoader(Path(folder), config, dataset_batches(folder, outputs, check_rows))


def _recorded_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _recorded_ranges(folder: Path, index: dict) -> dict[str, tuple[int, int]]:
    """The index's {min, max} of each column that has one; UsageError for a record of another form
    (an index is data from wherever the folder came from)."""
    ranges = index.get(RANGES_KEY, {})
    if not isinstance(ranges, dict):
        raise UsageError(f"{folder / INDEX_NAME}: {RANGES_KEY} must be an object, got {ranges!r:.80}")
    for name, entry in ranges.items():
        if not (name in index["columns"] and isinstance(entry, dict) and _recorded_int(entry.get("min"))
                and _recorded_int(entry.get("max")) and entry["min"] <= entry["max"]):
            raise UsageError(f"{folder / INDEX_NAME}: {RANGES_KEY}.{name} must be {{\"min\": n, \"max\": n}} of one "
                             f"of its columns, got {entry!r:.80}")
    return {name: (entry["min"], entry["max"]) for name, entry in ranges.items()}


def _recorded_vocabulary(folder: Path, index: dict) -> int | None:
    vocabulary = index.get(VOCABULARY_KEY)
    if vocabulary is not None and (not _recorded_int(vocabulary) or not 1 <= vocabulary <= ID_LIMIT):
        raise UsageError(f"{folder / INDEX_NAME}: {VOCABULARY_KEY} must be a number of ids, 1 to {ID_LIMIT}, "
                         f"got {vocabulary!r:.80}")
    return vocabulary


def recorded_range(folder: str | os.PathLike, column: str) -> tuple[int, int] | None:
    """The smallest and largest value of `column` as the dataset's index records them (write_dataset
    records every integer column's), or None where it records none (a set written before it did).
    A workload compares them with its size before training; every batch is still checked, since
    the record is only as true as the folder it came with."""
    folder = Path(folder)
    return _recorded_ranges(folder, load_index(folder)).get(column)


def _value_checks(folder: Path, index: dict, vocabulary: int | None) -> ColumnCheck:
    """The check of each shard's values: token ids within 0..vocabulary-1 (`vocabulary`, else the
    one the index records, else int32's range), every integer column within the range its index
    records. UsageError for a `vocabulary` the set has no token ids for."""
    schema = index_schema(index)
    ranges = {name: bounds for name, bounds in _recorded_ranges(folder, index).items()
              if schema.columns[name][0].kind in "iu"}
    has_tokens = TOKEN_COLUMN in schema.columns and schema.columns[TOKEN_COLUMN][0].kind in "iu"
    if vocabulary is not None and not has_tokens:
        raise UsageError(f"--vocab {vocabulary}: it bounds the token ids of a {TOKEN_COLUMN!r} column, and {folder} has "
                         f"no integer one (its columns: {', '.join(schema.columns)})")
    known = vocabulary if vocabulary is not None else _recorded_vocabulary(folder, index)
    bound = "--vocab" if vocabulary is not None else "the vocabulary its index records"
    stop = id_stop(known)

    def check(path: Path, info: dict, columns: ShardColumns) -> list[str]:
        problems = []
        found = _first_outside_in_shard(columns[TOKEN_COLUMN], 0, stop) if has_tokens else None
        if found is not None:
            outside, count = found
            problems.append(f"{path}: token id {outside.value} at {outside.position()} {outside.what(stop, bound)}"
                            f"{_more(count)}")
        for name, (low, high) in ranges.items():
            found = _first_outside_in_shard(columns[name], low, high + 1)
            if found is not None:
                outside, count = found
                problems.append(f"{path}: column {name!r} holds {outside.value} at {outside.position()}, outside the "
                                f"{low}..{high} its index records (the index does not describe the data){_more(count)}")
        return problems

    return check


def _more(count: int) -> str:
    return f" ({count - 1:,} more in this shard)" if count > 1 else ""


def _first_outside_in_shard(values: np.ndarray, start: int, stop: int) -> tuple[OutsideId, int] | None:
    """The first value of a shard's column outside start..stop-1 (its row counted in the shard) and
    how many there are, reading a chunk of rows at a time; None when every value is inside."""
    per_row = max(1, int(np.prod(values.shape[1:], dtype=np.int64)))
    chunk = max(1, CHECK_VALUES // per_row)
    first, count = None, 0
    for row in range(0, len(values), chunk):
        rows = np.asarray(values[row:row + chunk])
        outside = first_outside(rows, stop, start)
        if outside is None:
            continue
        count += count_outside(rows, stop, start)
        if first is None:
            first = OutsideId((outside.index[0] + row, *outside.index[1:]), outside.value)
    return None if first is None else (first, count)


def verify_dataset(folder: str | os.PathLike, vocabulary: int | None = None) -> VerifyReport:
    """Every problem of any shard set, known from its index and its shards: the index's form and
    totals, each shard's size and checksum, for a write_dataset set its split entry, and the values:
    token ids within 0..vocabulary-1 (`vocabulary`, else the one the index records, else int32's
    range), each integer column within the range its index records."""
    folder = Path(folder)
    index = load_index(folder)
    if index["format"] == FORMAT_NAME:
        _split_entry(folder, index)
    return verify_shards(folder, index_schema(index), _value_checks(folder, index, vocabulary))


def summarize_dataset(folder: str | os.PathLike) -> dict:
    """What `trainspeed data inspect` shows of any shard set: its index without the shard list, with
    the shard count and their total bytes (the index's own totals and notes, e.g. games, kept)."""
    index = load_index(folder)
    summary = {key: value for key, value in index.items() if key != "shards"}
    summary["shards"] = len(index["shards"])
    summary["total_bytes"] = sum(info["nbytes"] for info in index["shards"])
    return summary
