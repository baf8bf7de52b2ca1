"""Hugging Face datasets read where they lie, through the `datasets` library (the `datasets`
extra: `pip install 'trainspeed[datasets]'`, imported only when such data is opened).

    FOLDER (save_to_disk of a Dataset)          5% held out by each row's position (a fixed hash)
    FOLDER (save_to_disk of a DatasetDict)      its "train" split, and "validation", "val" or "test"
    FOLDER of *.parquet, or one .parquet file   files named train* and validation*|val*|test* are
                                                those splits; otherwise all are training rows

A `save_to_disk` folder is memory-mapped as it lies (Arrow files); parquet files are converted once
by the library into its own cache (`HF_DATASETS_CACHE`, by default ~/.cache/huggingface), never
beside them. Nothing is written into the dataset's folder (the library's caching of transforms is
turned off: nothing here transforms).

Images: an `Image` column (or one named image or img) with a `label` or `labels` column of
integers (a `ClassLabel` says how many classes); every label is checked when the dataset is opened
(a null, a negative class or one past the ClassLabel's is refused naming its row). The image bytes
are taken from the Arrow file undecoded and decoded by `trainspeed.data.decode` on the rank's
workers, as an image folder's are; an image stored by reference (a path, no bytes) is read as a
sample's file (`trainspeed.data.sample_files`: a regular file, at most its size and a sample's cap),
so a reference to /dev/zero or a FIFO is a bad sample, never a read without end.

Every file of the dataset's folder is a regular file or a folder, checked before the library opens
any: a FIFO named like an Arrow or parquet file would block it for ever.
Token ids: an `input_ids` or `tokens` column of sequences of ids (rows of any length; HF's own
`group_texts` writes windows): the ids of all rows, in order, are cut into windows of `seq` as a
token file is (`trainspeed.data.tokens`), straight from the memory-mapped Arrow buffers.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainspeed.data.decode import BadSample, ImagePlan, check_image, decode_image, sample_rng
from trainspeed.data.ids import ID_LIMIT, first_outside
from trainspeed.data.in_place_report import InPlaceReport
from trainspeed.data.labels import CLASS_LIMIT
from trainspeed.data.order import VAL_PER_MILLE, in_validation_split
from trainspeed.data.sample_files import read_sample_file
from trainspeed.data.sources import HF_DATASET, HF_MARKERS, DataSource, stat_fingerprint
from trainspeed.data.tokens import window_count
from trainspeed.errors import UsageError
from trainspeed.user_files import kind_of

EXTRA = "datasets"
IMAGE_COLUMNS = ("image", "img")
LABEL_COLUMNS = ("label", "labels")
TOKEN_COLUMNS = ("input_ids", "tokens")
VAL_SPLITS = ("validation", "val", "test")
COVERS = "relative paths, sizes and modification times (ns) of the dataset's files"


def import_datasets() -> Any:
    """The `datasets` library, or one line naming the extra that installs it."""
    try:
        import datasets
    except ImportError:
        raise UsageError(f"reading a Hugging Face dataset needs the datasets library: pip install "
                         f"'trainspeed[{EXTRA}]'") from None
    datasets.disable_caching()
    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    return datasets


@dataclass(frozen=True)
class HuggingFaceData:
    path: Path
    train: Any
    """The training rows (a `datasets.Dataset`)."""
    val: Any | None
    """The validation rows, or None: 5% of the training rows are held out by position."""
    files: int
    fingerprint: str

    @property
    def columns(self) -> list[str]:
        return list(self.train.column_names)

    def parts(self) -> list[tuple[str, Any]]:
        """(name, rows) of the dataset's parts: "train", and "val" where it has a validation split."""
        return [("train", self.train)] + ([("val", self.val)] if self.val is not None else [])

    def split_rows(self, split: str) -> tuple[Any, np.ndarray | None]:
        """(dataset, its rows of the split, or None for all of them)."""
        if self.val is not None:
            return (self.train if split == "train" else self.val), None
        held = in_validation_split(np.arange(len(self.train), dtype=np.int64), VAL_PER_MILLE)
        return self.train, np.flatnonzero(held if split == "val" else ~held)


def _files_under(root: Path) -> list[str]:
    """The dataset's files, relative to `root` (or its name, for one file); UsageError for one that
    is not a regular file (a FIFO, a device, a socket), which the library would block on."""
    if not root.is_dir():
        _check_regular(root)
        return [root.name]
    files = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if _check_regular(path):
                files.append(path.relative_to(root).as_posix())
    return sorted(files)


def _check_regular(path: Path) -> bool:
    """Whether `path` is a regular file (False: a link to nothing); UsageError for anything else."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return stat.S_ISREG(mode)
    raise UsageError(f"{path}: is {kind_of(mode)}, not a regular file; a dataset's folder holds its files only")


def _parquet_splits(path: Path) -> dict[str, list[str]]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.parquet") if p.is_file())
    splits: dict[str, list[str]] = {"train": [], "val": []}
    for file in files:
        name = file.name.lower()
        splits["val" if name.startswith(VAL_SPLITS) else "train"].append(str(file))
    if not splits["train"]:
        raise UsageError(f"{path}: no training parquet files (only {', '.join(Path(f).name for f in splits['val'][:3])}); "
                         "name them train-*.parquet")
    return splits


def open_hf_dataset(path: str | os.PathLike) -> HuggingFaceData:
    """The dataset at `path` (module docstring); UsageError for one the library cannot read."""
    datasets = import_datasets()
    path = Path(path)
    base = path if path.is_dir() else path.parent
    files = _files_under(path)
    try:
        if path.is_dir() and any((path / marker).is_file() for marker in HF_MARKERS):
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                if "train" not in loaded:
                    raise UsageError(f"{path}: a DatasetDict without a 'train' split (it has {', '.join(loaded)})")
                val = next((loaded[name] for name in VAL_SPLITS if name in loaded), None)
                train = loaded["train"]
            else:
                train, val = loaded, None
        else:
            splits = _parquet_splits(path)
            train = datasets.load_dataset("parquet", data_files=splits["train"], split="train")
            val = datasets.load_dataset("parquet", data_files=splits["val"], split="train") if splits["val"] else None
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001 - the library's refusal of a damaged folder, in one line
        first = str(error).splitlines()[0][:200] if str(error) else ""
        raise UsageError(f"{path}: the datasets library cannot read it ({type(error).__name__}: {first})") from None
    if val is not None and list(val.column_names) != list(train.column_names):
        raise UsageError(f"{path}: the validation split's columns ({', '.join(val.column_names)}) differ from "
                         f"training's ({', '.join(train.column_names)})")
    return HuggingFaceData(path, train, val, len(files), stat_fingerprint(base if path.is_file() else path,
                                                                        files))


def _pick(data: HuggingFaceData, names: tuple[str, ...], what: str, example: str) -> str:
    found = next((name for name in names if name in data.columns), None)
    if found is None:
        raise UsageError(f"{data.path}: no {what} column ({' or '.join(names)}); its columns are "
                         f"{', '.join(data.columns) or 'none'}: {example}")
    return found


def image_column(data: HuggingFaceData) -> str:
    datasets = import_datasets()
    typed = [name for name, feature in data.train.features.items() if isinstance(feature, datasets.Image)]
    if typed:
        return typed[0]
    return _pick(data, IMAGE_COLUMNS, "image", "an Image feature, e.g. datasets.Image()")


def label_column(data: HuggingFaceData) -> str:
    return _pick(data, LABEL_COLUMNS, "label", "integer classes, e.g. datasets.ClassLabel(names=[...])")


def token_column(data: HuggingFaceData) -> str:
    return _pick(data, TOKEN_COLUMNS, "token id", "sequences of integer ids, as a tokenizer's map writes them")


def _class_count(data: HuggingFaceData, label: str) -> int:
    """Classes the label column names (a ClassLabel), else its largest value + 1; UsageError naming
    the first row whose label is not a class: not an integer, a null, negative, past the
    ClassLabel's classes or past `CLASS_LIMIT`."""
    import pyarrow.compute as pc

    datasets = import_datasets()
    feature = data.train.features[label]
    named = int(feature.num_classes) if isinstance(feature, datasets.ClassLabel) else None
    stop = CLASS_LIMIT if named is None else min(named, CLASS_LIMIT)
    highest = -1
    for part, rows in data.parts():
        values = rows.data.table.column(label)
        kind = str(values.type)
        if not kind.startswith(("int", "uint")):
            raise UsageError(f"{data.path}: column {label!r} holds {kind}; labels are whole numbers from 0 (a ClassLabel)")
        if values.null_count:
            row = int(np.flatnonzero(pc.is_null(values).to_numpy(zero_copy_only=False))[0])
            raise UsageError(f"{data.path} ({part}) row {row}: column {label!r} holds a null, no class "
                             f"({values.null_count} such rows); give every row a class number, or drop the rows "
                             "without one")
        array = values.to_numpy()
        outside = first_outside(array, stop)
        if outside is not None:
            value, row = outside.value, outside.index[0]
            why = ("labels count from 0" if value < 0 else
                   f"the ClassLabel names {named} classes (0..{named - 1})" if named is not None and value >= named else
                   f"past {CLASS_LIMIT - 1:,}, the largest class number a label holds")
            raise UsageError(f"{data.path} ({part}) row {row}: column {label!r} holds {value}; {why}")
        highest = max(highest, int(array.max()) if array.size else -1)
    return highest + 1 if named is None else named


class HuggingFaceImageReader:
    """One split's images and labels for `trainspeed.data.samples.SampleLoader` (as an image
    folder's: `images` uint8 (3, res, res), `labels` int64)."""

    def __init__(self, data: HuggingFaceData, split: str, plan: ImagePlan, seed: int) -> None:
        datasets = import_datasets()
        image, label = image_column(data), label_column(data)
        self.classes = _class_count(data, label)
        dataset, rows = data.split_rows(split)
        self.dataset = dataset.cast_column(image, datasets.Image(decode=False)).select_columns([image, label])
        self.rows = rows
        self.image, self.label = image, label
        self.name = str(data.path)
        self.plan, self.seed = plan, seed
        count = len(dataset) if rows is None else len(rows)
        self.source = DataSource(HF_DATASET, str(data.path), files=data.files, samples=count,
                                 fingerprint=data.fingerprint, fingerprint_covers=COVERS,
                                 details={"columns": [image, label], "classes": self.classes})
        self.layout = {"images": (np.dtype(np.uint8), (3, plan.resolution, plan.resolution)),
                       "labels": (np.dtype(np.int64), ())}

    def __len__(self) -> int:
        return self.source.samples

    def _row(self, index: int) -> int:
        return index if self.rows is None else int(self.rows[index])

    def read(self, index: int, epoch: int, row: dict[str, np.ndarray]) -> None:
        number = self._row(index)
        record = self.dataset[number]
        where = f"{self.name} row {number}"
        payload = image_payload(record[self.image], where)
        rng = sample_rng(self.seed, epoch, index) if self.plan.train else None
        decode_image(payload, where, self.plan, rng, row["images"])
        row["labels"][...] = int(record[self.label])


def image_payload(encoded: dict | None, where: str) -> bytes:
    """The encoded image of a row: its bytes, or the file its path names, read as a sample's file
    is (`read_sample_file`); BadSample for a row with neither or a file that cannot be read."""
    encoded = encoded or {}
    payload = encoded.get("bytes")
    if payload is None and encoded.get("path"):
        payload = read_sample_file(encoded["path"], f"{where} ({encoded['path']})")
    if payload is None:
        raise BadSample(where, "holds no image")
    return payload


@dataclass(frozen=True)
class TokenSegments:
    """The ids of a split's rows as memory-mapped pieces (one per Arrow chunk), cut into windows
    that never cross a piece (a piece's last few ids are dropped)."""

    pieces: tuple[np.ndarray, ...]
    window_starts: np.ndarray  # (pieces + 1,) first window of each piece, then the total

    @staticmethod
    def of(dataset: Any, column: str, sequence: int, where: Path) -> "TokenSegments":
        import pyarrow as pa

        values = dataset.data.table.column(column)
        if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)) or \
                not pa.types.is_integer(values.type.value_type):
            raise UsageError(f"{where}: column {column!r} holds {values.type}; token ids are sequences of integers")
        pieces = []
        for chunk in values.chunks:
            flat = chunk.flatten()
            if flat.null_count:
                raise UsageError(f"{where}: column {column!r} holds missing ids (nulls)")
            pieces.append(flat.to_numpy(zero_copy_only=True))
        counts = [window_count(len(piece), sequence) for piece in pieces]
        return TokenSegments(tuple(pieces), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))

    @property
    def windows(self) -> int:
        return int(self.window_starts[-1])

    def id_range(self) -> tuple[int, int]:
        present = [piece for piece in self.pieces if piece.size]
        if not present:
            return (0, 0)
        return (min(int(p.min()) for p in present), max(int(p.max()) for p in present))

    def window(self, number: int, sequence: int) -> np.ndarray:
        piece = int(np.searchsorted(self.window_starts, number, side="right") - 1)
        start = (number - int(self.window_starts[piece])) * (sequence - 1)
        return self.pieces[piece][start:start + sequence]


class HuggingFaceTokenReader:
    """One split's token windows for `trainspeed.data.samples.SampleLoader`: `tokens` (seq,) int64."""

    def __init__(self, data: HuggingFaceData, split: str, sequence: int) -> None:
        column = token_column(data)
        self.sequence = sequence
        if data.val is not None:
            self.segments = TokenSegments.of(data.train if split == "train" else data.val, column, sequence, data.path)
            self.first, self.count = 0, self.segments.windows
        else:  # the last 5% of the windows, as a token file's
            self.segments = TokenSegments.of(data.train, column, sequence, data.path)
            total = self.segments.windows
            held = (total * VAL_PER_MILLE + 999) // 1000 if total > 1 else 0
            self.first, self.count = (0, total - held) if split == "train" else (total - held, held)
        self.id_range = self.segments.id_range()
        self.source = DataSource(HF_DATASET, str(data.path), files=data.files, samples=self.count,
                                 fingerprint=data.fingerprint, fingerprint_covers=COVERS,
                                 details={"columns": [column], "window": sequence})
        self.layout = {"tokens": (np.dtype(np.int64), (sequence,))}

    def __len__(self) -> int:
        return self.count

    def read_batch(self, ids: np.ndarray, epoch: int, out: dict[str, np.ndarray]) -> None:
        for row, number in enumerate(ids):
            out["tokens"][row] = self.segments.window(self.first + int(number), self.sequence)


def verify_hf_dataset(path: str | os.PathLike, vocabulary: int | None):
    """Every image decoded (an image dataset) or every id compared with the vocabulary (tokens)."""
    data = open_hf_dataset(path)
    problems: list[str] = []
    parts = data.parts()
    if any(name in data.columns for name in TOKEN_COLUMNS) and not any(name in data.columns for name in IMAGE_COLUMNS):
        column = token_column(data)
        stop = ID_LIMIT if vocabulary is None else min(vocabulary, ID_LIMIT)
        ids = 0
        for split, dataset in parts:
            segments = TokenSegments.of(dataset, column, 2, data.path)
            ids += sum(len(piece) for piece in segments.pieces)
            low, high = segments.id_range()
            if low < 0 or high >= stop:
                problems.append(f"{data.path} ({split}): column {column!r} holds ids from {low} to {high}, outside "
                                f"0..{stop - 1} ({'--vocab' if vocabulary else 'int32'})")
        return InPlaceReport(f"Hugging Face dataset, {ids:,} token ids in column {column!r}", problems)
    if vocabulary is not None:
        raise UsageError(f"--vocab: {path} holds images, not token ids; drop --vocab")
    datasets = import_datasets()
    image, label = image_column(data), label_column(data)
    classes = _class_count(data, label)
    images = 0
    for split, dataset in parts:
        raw = dataset.cast_column(image, datasets.Image(decode=False)).select_columns([image])
        for number in range(len(raw)):
            images += 1
            where = f"{data.path} ({split}) row {number}"
            try:
                check_image(image_payload(raw[number][image], where), where)
            except BadSample as bad:
                problems.append(str(bad))
    return InPlaceReport(f"Hugging Face dataset, {images:,} images of {classes} classes", problems)


def summarize_hf_dataset(path: str | os.PathLike) -> dict:
    data = open_hf_dataset(path)
    return {"format": HF_DATASET, "columns": {name: str(feature) for name, feature in data.train.features.items()},
            "train_rows": len(data.train), "val_rows": len(data.val) if data.val is not None else None,
            "split": "its validation split" if data.val is not None else f"{VAL_PER_MILLE / 10:g}% of the rows held out "
            "by position (a fixed hash)", "files": data.files, "fingerprint": data.fingerprint,
            "fingerprint_covers": COVERS}
