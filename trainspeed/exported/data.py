"""A shard set read for exported steps, where only JAX and numpy are: the manifest's batch columns,
found by name among the set's columns, cast to the dtypes the programs take, in the order the shard
loader reads them (`trainspeed.data.order`, `trainspeed.data.split`), so a run of exported steps
sees the batches a run of the same workload in torch sees, at the same seed and batch.

Each shard's bytes are checked against its index (size, sha256 unless unchanged since written) the
first time a batch reads it, as the shard loader does. The workload's own per-batch checks of its
values (Mahjong's legal actions) are Python of the workload, which is not here: `trainspeed data
verify` runs them where the workload is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from trainspeed.data.base import LoaderConfig
from trainspeed.data.order import batches_per_epoch, rank_slice
from trainspeed.data.shards import ShardColumns, ShardSchema, index_schema, load_index, open_shard
from trainspeed.data.split import SplitLayout, recorded_split, split_layout
from trainspeed.data.verify import index_problems, shard_file_problem
from trainspeed.errors import UsageError
from trainspeed.exported.manifest import Column, Manifest


def _castable(stored: np.dtype, wanted: np.dtype) -> bool:
    """A stored column the programs' column can be read from without losing values' meaning."""
    if stored == wanted:
        return True
    if wanted.kind == "b":
        return stored.kind in "bu"
    return stored.kind == wanted.kind or (stored.kind in "iu" and wanted.kind in "iu")


def _split_of(folder: Path, index: dict, manifest: Manifest) -> tuple[str | None, int]:
    """(split column, val per mille): the index's own record where it has one (a dataset written by
    `write_dataset`), else the workload's as exported."""
    split = recorded_split(folder, index)
    if split is not None:
        return split.get("by"), split["val_per_mille"]
    if manifest.data_split is None:
        raise UsageError(f"--data {folder}: its index records no train/val split and workload {manifest.workload} "
                         "declared none when it was exported; write the data with `trainspeed data from-arrays`, "
                         "which records one")
    return manifest.data_split.column, manifest.data_split.val_per_mille


def _check_split_column(folder: Path, schema: ShardSchema, column: str | None, manifest: Manifest) -> None:
    """The column the split hashes is one integer per sample of the data (None: each sample's
    position, always there)."""
    if column is None:
        return
    stored = schema.columns.get(column)
    if stored is None or stored[0].kind not in "iu" or tuple(stored[1]) != ():
        held = "no such column" if stored is None else f"{stored[0]}{list(stored[1])} per sample"
        raise UsageError(f"--data {folder}: the exported workload {manifest.workload} splits its data by the integer "
                         f"column {column!r:.60}, and the data has {held}; give the data of workload "
                         f"{manifest.workload}, or export the step again")


@dataclass
class ShardSet:
    """The train and val splits of one shard folder, as the programs' batch columns."""

    folder: Path
    schema: ShardSchema
    columns: list[Column]
    train: SplitLayout
    val: SplitLayout
    seed: int
    data_format: str = ""
    shards: list[ShardColumns] | None = None
    checked: set[int] = field(default_factory=set)

    @classmethod
    def open(cls, folder: Path, manifest: Manifest, seed: int) -> "ShardSet":
        index = load_index(folder, "give the folder of a shard set (its index.json beside its shards)")
        schema = index_schema(index)
        problems = index_problems(folder, index, schema)
        if problems:
            raise UsageError(problems[0])
        for column in manifest.columns:
            stored = schema.columns.get(column.name)
            if stored is None:
                raise UsageError(f"--data {folder}: has no column {column.name!r}, which the exported step reads "
                                 f"(it has {', '.join(schema.columns)}); give the data of workload {manifest.workload}")
            dtype, shape = stored
            if list(shape) != column.sample_shape or not _castable(dtype, np.dtype(column.dtype)):
                raise UsageError(f"--data {folder}: column {column.name} holds {dtype}{list(shape)} per sample, and the "
                                 f"exported step takes {column.dtype}{column.sample_shape}; give the data of workload "
                                 f"{manifest.workload}")
        split_column, val_per_mille = _split_of(folder, index, manifest)
        _check_split_column(folder, schema, split_column, manifest)
        layouts = [split_layout(folder, index, split, schema, split_column, val_per_mille) for split in ("train", "val")]
        return cls(folder, schema, manifest.columns, layouts[0], layouts[1], seed, str(index.get("format", "")))

    def data_record(self) -> dict:
        """What a run reads of it: the training split's record, as the torch trainer's loader gives it."""
        return self.train.data_record(self.folder, self.data_format)

    def loader_config(self, batch_size: int) -> LoaderConfig:
        return LoaderConfig(batch_size=batch_size, seed=self.seed)

    def batches_per_epoch(self, batch_size: int) -> int:
        return batches_per_epoch(self.train.num_samples, self.loader_config(batch_size))

    def train_batch(self, epoch: int, number: int, batch_size: int, order: np.ndarray) -> list[np.ndarray]:
        """Batch `number` of `epoch` (`order`: `epoch_order(epoch)`), in the manifest's column order."""
        return self.gather(self.train, rank_slice(order, self.loader_config(batch_size), number))

    def epoch_order(self, epoch: int, batch_size: int) -> np.ndarray:
        return self.train.epoch_order(self.loader_config(batch_size), epoch)

    def val_batches(self, batch_size: int, cap: int | None) -> Iterator[list[np.ndarray]]:
        """The val split in order, in whole batches (the programs take one batch shape; the last
        partial batch is left out, and the row's `samples` says how many were read)."""
        count = self.val.num_samples // batch_size
        for number in range(count if cap is None else min(cap, count)):
            yield self.gather(self.val, np.arange(number * batch_size, (number + 1) * batch_size, dtype=np.int64))

    def gather(self, layout: SplitLayout, ids: np.ndarray) -> list[np.ndarray]:
        """The samples `ids` (sorted) of `layout`: one np.take per shard segment and column."""
        shards = self._open()
        shard_numbers, rows = layout.shard_rows(ids)
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(shard_numbers)) + 1, [len(ids)]])
        out = [np.empty((len(ids), *column.sample_shape), np.dtype(column.dtype)) for column in self.columns]
        for begin, end in zip(cuts[:-1], cuts[1:]):
            if begin == end:
                continue
            number = int(shard_numbers[begin])
            self._check(layout, number)
            for column, target in zip(self.columns, out):
                target[begin:end] = np.take(shards[number][column.name], rows[begin:end], axis=0)
        return out

    def _open(self) -> list[ShardColumns]:
        if self.shards is None:
            self.shards = [open_shard(self.folder, info, self.schema) for info in self.train.shard_infos]
        return self.shards

    def _check(self, layout: SplitLayout, number: int) -> None:
        if number in self.checked:
            return
        info = layout.shard_infos[number]
        problem = shard_file_problem(self.folder / info["file"], info, self.schema, trust_unchanged=True)
        if problem is not None:
            raise UsageError(f"--data: {problem}")
        self.checked.add(number)
