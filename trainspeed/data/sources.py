"""Data read where it lies: which format a `--data` path is, and what a run records of it.

`--data` takes trainspeed's own shard sets and, with no conversion step, a user's data as it lies:

| format | a path that is |
|---|---|
| `shards` | a folder with trainspeed's `index.json` (`data from-arrays`, self-play) |
| `image-folder` | a folder of class folders of images (`ROOT/CLASS/*.jpg`, torchvision's ImageFolder layout) |
| `tokens` | a flat token file (`.bin` of uint16 ids, nanoGPT's layout; `.npy`), or a folder with `train.bin` and `val.bin` |
| `hf-dataset` | a Hugging Face dataset folder (`save_to_disk`), or parquet files (a folder of them or one) |
| `webdataset` | WebDataset tar shards (one `.tar` or a folder of them; `KEY.jpg` + `KEY.cls` members) |

`detect_format` tells them apart from names alone (no file is read whole), so `data verify`,
`data inspect` and a workload's `open_dataset` dispatch on one answer. Nothing here writes into the
user's folder: a reader only lists, stats and reads.

What a run records of its data (`DataSource`): the format, how many files it read, and a content
fingerprint that is cheap on a dataset of a million files: a sha256 over the sorted relative paths,
sizes and modification times (ns) of every file read (`stat_fingerprint`), or, for trainspeed's own
shards, over their recorded checksums. Two runs with one fingerprint read the same files unchanged
since; a file rewritten with the same size within the same nanosecond would go unseen.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from trainspeed.errors import UsageError

SHARDS = "shards"
IMAGE_FOLDER = "image-folder"
TOKENS = "tokens"
HF_DATASET = "hf-dataset"
WEBDATASET = "webdataset"
FORMATS = (SHARDS, IMAGE_FOLDER, TOKENS, HF_DATASET, WEBDATASET)

INDEX_NAME = "index.json"
TOKEN_SUFFIXES = (".bin", ".npy")
HF_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
"""torchvision's IMG_EXTENSIONS: what an image folder holds as images (case-insensitive)."""
STAT_COVERS = "sorted relative paths, sizes and modification times (ns) of the files read"

FORMATS_HELP = ("a trainspeed shard set (index.json), an image folder (ROOT/CLASS/*.jpg), a token file (.bin "
                "of uint16 ids, .npy, or a folder with train.bin and val.bin), a Hugging Face dataset "
                "(save_to_disk folder or parquet files), or WebDataset .tar shards")


@dataclass(frozen=True)
class DataSource:
    """What a run read: recorded in its summary (`data`), shown by `data inspect`."""

    format: str
    path: str
    files: int
    """Files read (images, token files, Arrow or parquet files, tar shards, shard files)."""
    samples: int
    """Samples of the split read."""
    fingerprint: str
    fingerprint_covers: str
    """What the fingerprint is a hash of, in words."""
    details: dict = field(default_factory=dict)
    """Format-specific facts (classes, dtype, window length, columns ...)."""

    def as_record(self, skipped: int = 0) -> dict:
        return {"format": self.format, "path": self.path, "files": self.files, "samples": self.samples,
                "fingerprint": self.fingerprint, "fingerprint_covers": self.fingerprint_covers,
                "skipped": skipped, **({"details": self.details} if self.details else {})}


def stat_fingerprint(root: Path, relative: Iterable[str]) -> str:
    """sha256 over `path\\tsize\\tmtime_ns` lines of the files, in sorted order (see the module)."""
    digest = hashlib.sha256()
    for name in sorted(relative):
        try:
            stat = os.stat(root / name)
        except OSError as error:
            raise UsageError(f"{root / name}: cannot be read ({error.strerror})") from None
        digest.update(f"{name}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _is_tar(path: Path) -> bool:
    return path.suffix.lower() == ".tar"


def _visible(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as error:
        raise UsageError(f"{folder}: cannot be listed ({error.strerror})") from None


def detect_format(path: str | os.PathLike) -> str:
    """The format of a `--data` path (module table), from its names alone; UsageError for a path
    that is none of them, saying what each looks like."""
    path = Path(path)
    absent = _absent(path)
    if absent is not None:
        raise UsageError(absent)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix in TOKEN_SUFFIXES:
            return TOKENS
        if suffix == ".tar":
            return WEBDATASET
        if suffix == ".parquet":
            return HF_DATASET
        raise UsageError(f"{path}: a file trainspeed does not read as data; give {FORMATS_HELP}")
    if not path.is_dir():
        raise UsageError(f"{path}: not a regular file or folder")
    if (path / INDEX_NAME).exists() or (path / "writer.json").exists():
        return SHARDS
    if any((path / marker).is_file() for marker in HF_MARKERS):
        return HF_DATASET
    entries = _visible(path)
    files = [p for p in entries if p.is_file()]
    if files and all(p.suffix.lower() == ".parquet" for p in files) and not any(p.is_dir() for p in entries):
        return HF_DATASET
    if files and all(_is_tar(p) for p in files) and not any(p.is_dir() for p in entries):
        return WEBDATASET
    names = {p.name for p in files}
    if any(f"train{suffix}" in names for suffix in TOKEN_SUFFIXES) or any(
            f"train.uint32{suffix}" in names for suffix in (".bin",)):
        return TOKENS
    if any(p.is_dir() for p in entries) or any(p.suffix.lower() in IMAGE_SUFFIXES for p in files):
        return IMAGE_FOLDER
    if not entries:
        raise UsageError(_empty_folder(path))
    raise UsageError(f"{path}: holds no data trainspeed reads; give {FORMATS_HELP}")


def _absent(path: Path) -> str | None:
    """Why nothing is at `path`, in one line; None where something is."""
    if path.exists():
        return None
    if path.is_symlink():
        return f"{path}: a symlink to nothing (or a symlink loop)"
    return f"{path}: no such file or folder"


def _empty_folder(path: Path) -> str:
    return f"{path}: an empty folder; give {FORMATS_HELP}"


def nothing_at(path: str | os.PathLike) -> str | None:
    """Why no reader at all, trainspeed's or a workload's own, can find data at `path`, in one line:
    nothing is there, or a folder with nothing in it (hidden names aside); None otherwise."""
    path = Path(path)
    absent = _absent(path)
    if absent is not None or not path.is_dir():
        return absent
    try:
        return None if _visible(path) else _empty_folder(path)
    except UsageError as error:
        return str(error)


def data_missing(path: str | os.PathLike | None) -> str | None:
    """Why `path` holds no data a run can read, in one line (it is not there, or it is no format
    `--data` reads: an empty folder, a file of another kind), or None where it does. The commands
    that start runs on another command's `--data` (the studies, the plan's checks and measurements)
    ask this before any run, for every format alike: from names alone, as `detect_format` tells
    them apart, so a folder of a million images costs a listing, not a scan."""
    if path is None or str(path) == "":
        return "no data given"
    try:
        detect_format(path)
    except UsageError as error:
        return str(error)
    return None


class PathTable:
    """Relative paths of a million files in two numpy arrays (UTF-8 bytes and offsets), not a list
    of str: forked loader workers share them unchanged, where touching a million Python strings'
    reference counts would copy every page they lie on into each worker."""

    def __init__(self, names: list[str]) -> None:
        encoded = [name.encode("utf-8", "surrogateescape") for name in names]
        self.offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=self.offsets[1:])
        self.blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> str:
        start, end = self.offsets[index], self.offsets[index + 1]
        return self.blob[start:end].tobytes().decode("utf-8", "surrogateescape")

    def __iter__(self):
        return (self[i] for i in range(len(self)))
