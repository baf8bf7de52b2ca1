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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from trainspeed.data.base import LoaderConfig
from trainspeed.data.order import SAMPLE_ID_KEY, in_validation_split
from trainspeed.data.shards import (
    INDEX_NAME,
    SHARD_PREFIX,
    STORABLE_KINDS,
    ShardSchema,
    index_schema,
    load_index,
    write_index,
    write_shard,
)
from trainspeed.data.verify import VerifyReport, verify_shards
from trainspeed.errors import UsageError

if TYPE_CHECKING:  # writing, checking and summarizing a dataset need no torch; reading it does
    from trainspeed.data.loader import (
        OutputColumn,
        RowCheck,
        ShardBatchSpec,
        ShardLoader,
    )

FORMAT_NAME = "trainspeed-arrays"
FORMAT_VERSION = 1
SHARD_BYTES = 64 * 2**20
"""About how large the writer makes each shard (a few memory maps per GiB, each a few seconds to hash)."""
HOW_TO_MAKE = "write one with trainspeed.data.write_dataset or `trainspeed data from-arrays`"


def _checked_arrays(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns as arrays of one length and storable dtypes; UsageError naming the first that is not."""
    if not columns:
        raise UsageError("no columns given: pass at least one array, e.g. {'tokens': array}")
    arrays = {}
    for name, column in columns.items():
        if not isinstance(name, str) or not name or name == SAMPLE_ID_KEY:
            raise UsageError(f"column name {name!r}: use a non-empty name other than {SAMPLE_ID_KEY} (the loader's own key)")
        array = np.asarray(column)
        if array.ndim == 0:
            raise UsageError(f"column {name!r} is a scalar; a column holds one entry per sample (first dimension)")
        if array.dtype.kind not in STORABLE_KINDS or array.dtype.fields is not None:
            raise UsageError(f"column {name!r} has dtype {array.dtype}; store booleans or numbers only")
        arrays[name] = array
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise UsageError(f"columns have different lengths ({', '.join(f'{k} {v}' for k, v in lengths.items())}); "
                         "every column holds one entry per sample")
    if not next(iter(lengths.values())):
        raise UsageError("the columns hold no samples")
    return arrays


def _val_per_mille(val_fraction: float) -> int:
    if not 0.0 <= val_fraction < 1.0:
        raise UsageError(f"val_fraction {val_fraction}: must be at least 0 and below 1")
    per_mille = round(val_fraction * 1000)
    if abs(per_mille / 1000 - val_fraction) > 1e-9:
        raise UsageError(f"val_fraction {val_fraction}: the split has per-mille steps; use e.g. {per_mille / 1000}")
    return per_mille


def _split_keys(arrays: Mapping[str, np.ndarray], split_by: str | None) -> np.ndarray:
    if split_by is None:
        return np.arange(len(next(iter(arrays.values()))), dtype=np.int64)
    if split_by not in arrays:
        raise UsageError(f"split_by {split_by!r} is not a column; the columns are {', '.join(arrays)}")
    keys = arrays[split_by]
    if keys.dtype.kind not in "iu" or keys.ndim != 1:
        raise UsageError(f"split_by {split_by!r} is {keys.dtype} {keys.shape[1:]}; it must be one integer per sample "
                         "(a document or group id)")
    return keys


def _check_empty_out(out: Path) -> None:
    """A dataset goes into a new or empty folder: nothing already there is overwritten or mixed in."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out}: already exists and is not an empty folder; choose a new one "
                         "(nothing there is overwritten)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--out {out}: cannot create it ({error.strerror})") from None


def write_dataset(columns: Mapping[str, np.ndarray], out: str | os.PathLike, *, split_by: str | None = None,
                  val_fraction: float = 0.05, samples_per_shard: int | None = None,
                  source: Mapping | None = None) -> dict:
    """Write `columns` (name -> array, one entry per sample along the first dimension) as a shard set
    in the new or empty folder `out`; returns its index (also written as `out/index.json`, last, so a
    folder without it is unfinished).

    `split_by` names an integer column whose equal values stay on one side of the train/val split;
    about `val_fraction` (per-mille steps) of its distinct values go to "val". `samples_per_shard`
    defaults to about 64 MiB per shard. `source` is free-form JSON recorded in the index (where the
    data came from). Arrays are stored in their own dtype and byte order; booleans and numbers only.
    Bad input is a UsageError that says what to change, before anything is written.
    """
    arrays = _checked_arrays(columns)
    per_mille = _val_per_mille(val_fraction)
    keys = _split_keys(arrays, split_by)
    schema = ShardSchema(FORMAT_NAME, FORMAT_VERSION, {name: (a.dtype, a.shape[1:]) for name, a in arrays.items()},
                         how_to_make=HOW_TO_MAKE)
    samples = len(keys)
    if samples_per_shard is not None and samples_per_shard < 1:
        raise UsageError(f"samples_per_shard {samples_per_shard}: must be at least 1")
    per_shard = samples_per_shard or max(1, SHARD_BYTES // max(1, schema.bytes_per_sample()))
    out = Path(out)
    _check_empty_out(out)
    for number, start in enumerate(range(0, samples, per_shard)):
        part = {name: array[start:start + per_shard] for name, array in arrays.items()}
        write_shard(out, f"{SHARD_PREFIX}{number:06d}", schema, part)
    val_samples = int(in_validation_split(keys, per_mille).sum())
    split = {"by": split_by, "val_per_mille": per_mille, "train_samples": samples - val_samples,
             "val_samples": val_samples}
    return write_index(out, schema, extra={"split": split, **({"source": dict(source)} if source else {})})


def _split_entry(folder: Path, index: dict) -> dict:
    split = index.get("split")
    ok = (isinstance(split, dict) and (split.get("by") is None or split.get("by") in index["columns"])
          and isinstance(split.get("val_per_mille"), int) and 0 <= split["val_per_mille"] <= 1000)
    if not ok:
        raise UsageError(f"{folder / INDEX_NAME}: split must be {{\"by\": a column or null, \"val_per_mille\": 0..1000}}, "
                         f"got {split!r:.80}")
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


def verify_dataset(folder: str | os.PathLike) -> VerifyReport:
    """Every problem of any shard set, known from its index alone: the index's form and totals,
    each shard's size and checksum, and for a write_dataset set its split entry."""
    folder = Path(folder)
    index = load_index(folder)
    if index["format"] == FORMAT_NAME:
        _split_entry(folder, index)
    return verify_shards(folder, index_schema(index))


def summarize_dataset(folder: str | os.PathLike) -> dict:
    """What `trainspeed data inspect` shows of any shard set: its index without the shard list, with
    the shard count and their total bytes (the index's own totals and notes, e.g. games, kept)."""
    index = load_index(folder)
    summary = {key: value for key, value in index.items() if key != "shards"}
    summary["shards"] = len(index["shards"])
    summary["total_bytes"] = sum(info["nbytes"] for info in index["shards"])
    return summary


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The named arrays of an `.npz` file, or of a folder of `.npy` files (each file one column,
    named after it; memory-mapped, so large ones are not read into memory first). Never unpickles:
    an object array is a UsageError."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.npy"))
        if not files:
            raise UsageError(f"{path}: a folder without .npy files; give an .npz file or a folder of .npy files")
        return {file.stem: _read(file, lambda: np.load(file, mmap_mode="r", allow_pickle=False)) for file in files}
    if not path.is_file():
        raise UsageError(f"{path}: no such file or folder")
    loaded = _read(path, lambda: np.load(path, allow_pickle=False))
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise UsageError(f"{path}: one array, not an .npz of named columns; save it with np.savez(path, name=array)")
    with loaded:
        return {name: _read(path, lambda: loaded[name]) for name in loaded.files}


def _read(path: Path, read):
    """`read()`, with whatever numpy or zipfile raises on a damaged, foreign or pickled file as one
    UsageError naming `path`."""
    try:
        return read()
    except Exception as error:  # noqa: BLE001 - not numpy's format, truncated, a bad zip, pickled objects
        raise UsageError(f"{path}: cannot read it as numpy arrays ({type(error).__name__}: {error})") from None
