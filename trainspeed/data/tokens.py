"""Token files read where they lie: a flat array of ids, memory-mapped, cut into windows.

    tokens.bin                 uint16 ids, no header (nanoGPT's layout); `NAME.uint32.bin`: uint32 ids
    tokens.npy                 a 1-D array of integer ids (its header says the type; never unpickled)
    FOLDER/train.bin + val.bin the training and validation files (either suffix)

A model trained on windows of `seq` tokens predicts each token from those before it, so window k is
ids [k (seq-1), k (seq-1) + seq): neighbouring windows share one id, and every id but the first is
predicted once per epoch. Without a validation file, the last 5% of the windows are held out (a
contiguous tail: validation text the model never saw, whatever the seed or rank count).

Refused before anything trains: a file whose length is not a whole number of ids (cut short, or of
another type), an `.npy` that is not 1-D integers, a file too short for one window, and, against a
workload's vocabulary, ids past it: the file's smallest and largest id are read once when it is
opened (one pass, a chunk at a time; at memory speed), and every batch is checked again on its
way to the model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from trainspeed.data.arrays import read_header
from trainspeed.data.ids import ID_LIMIT, count_outside, first_outside
from trainspeed.data.order import VAL_PER_MILLE
from trainspeed.data.sources import TOKENS, DataSource, stat_fingerprint
from trainspeed.errors import UsageError
from trainspeed.user_files import open_regular

BIN_DTYPES = {".uint32.bin": np.dtype("<u4"), ".bin": np.dtype("<u2")}
"""A `.bin` file's id type by its name's ending, the first that matches."""
SCAN_IDS = 1 << 24
"""Ids read at a time by the range scan and the checks (32 MiB of uint16)."""
SPLIT_NAMES = {"train": "train", "val": "val"}
TOKEN_SUFFIXES = (".uint32.bin", ".bin", ".npy")


@dataclass(frozen=True)
class TokenFile:
    """One flat file of ids: where they start, their type and count."""

    path: Path
    dtype: np.dtype
    offset: int
    count: int

    def ids(self) -> np.ndarray:
        """The ids, memory-mapped read-only (an empty array for an empty file)."""
        if self.count == 0:
            return np.zeros(0, self.dtype)
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=(self.count,))


def _bin_dtype(path: Path) -> np.dtype:
    name = path.name.lower()
    return next(dtype for ending, dtype in BIN_DTYPES.items() if name.endswith(ending))


def open_token_file(path: str | os.PathLike) -> TokenFile:
    """The file's ids as declared (`.npy` header) or implied (`.bin`: uint16, or uint32 by name);
    UsageError for a length that is not a whole number of ids or an array that is not 1-D integers."""
    path = Path(path)
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if path.suffix.lower() == ".npy":
            header = read_header(handle, str(path))
            if header.dtype.kind not in "iu" or len(header.shape) != 1:
                raise UsageError(f"{path}: an array of {header.dtype} {header.shape}; a token file holds one row of "
                                 "integer ids (np.save(path, ids.astype(np.uint16)))")
            if size - header.data_offset != header.nbytes:
                raise UsageError(f"{path}: holds {size - header.data_offset} bytes of ids, its header declares "
                                 f"{header.nbytes} ({header.shape[0]} x {header.dtype.itemsize}); the file is cut short "
                                 "or damaged")
            return TokenFile(path, header.dtype, header.data_offset, header.shape[0])
    dtype = _bin_dtype(path)
    if size % dtype.itemsize:
        raise UsageError(f"{path}: {size:,} bytes is not a whole number of {dtype.name} ids ({dtype.itemsize} bytes "
                         "each); the file is cut short, or its ids are of another type (a .bin holds uint16, a "
                         "NAME.uint32.bin uint32; or save an .npy)")
    return TokenFile(path, dtype, 0, size // dtype.itemsize)


@lru_cache(maxsize=16)
def _id_range(path: str, size: int, mtime_ns: int, dtype: str, offset: int, count: int) -> tuple[int, int]:
    ids = TokenFile(Path(path), np.dtype(dtype), offset, count).ids()
    low, high = None, None
    for start in range(0, count, SCAN_IDS):
        chunk = np.asarray(ids[start:start + SCAN_IDS])
        low = int(chunk.min()) if low is None else min(low, int(chunk.min()))
        high = int(chunk.max()) if high is None else max(high, int(chunk.max()))
    return (low or 0, high or 0) if count else (0, 0)


def id_range(file: TokenFile) -> tuple[int, int]:
    """The smallest and largest id of the file (one pass, remembered while the file is unchanged)."""
    stat = file.path.stat()
    return _id_range(str(file.path), stat.st_size, stat.st_mtime_ns, file.dtype.str, file.offset, file.count)


@dataclass(frozen=True)
class TokenData:
    root: Path
    train: TokenFile
    val: TokenFile | None
    """None: the validation windows are the last 5% of the training file's."""

    @property
    def files(self) -> tuple[TokenFile, ...]:
        return (self.train,) if self.val is None else (self.train, self.val)

    def fingerprint(self) -> str:
        base = self.root if self.root.is_dir() else self.root.parent
        return stat_fingerprint(base, [f.path.relative_to(base).as_posix() for f in self.files])

    def windows(self, split: str, sequence: int) -> tuple[TokenFile, int, int]:
        """(file, first window, windows) of a split at windows of `sequence` ids."""
        if sequence < 2:
            raise UsageError(f"windows of {sequence} ids: a window needs at least 2 (an input and its next id)")
        if self.val is not None:
            file = self.train if split == "train" else self.val
            return file, 0, window_count(file.count, sequence)
        total = window_count(self.train.count, sequence)
        held = (total * VAL_PER_MILLE + 999) // 1000 if total > 1 else 0
        return (self.train, 0, total - held) if split == "train" else (self.train, total - held, held)

    def source(self, split: str, sequence: int) -> DataSource:
        _, _, windows = self.windows(split, sequence)
        return DataSource(TOKENS, str(self.root), files=len(self.files), samples=windows, fingerprint=self.fingerprint(),
                          fingerprint_covers="relative paths, sizes and modification times (ns) of the token files",
                          details={"dtype": self.train.dtype.name, "window": sequence,
                                   "ids": sum(f.count for f in self.files)})


def window_count(ids: int, sequence: int) -> int:
    """Windows of `sequence` ids, neighbours sharing one id, in a file of `ids` ids."""
    return 0 if ids < sequence else (ids - 1) // (sequence - 1)


def _split_file(folder: Path, split: str) -> Path | None:
    found = [folder / f"{SPLIT_NAMES[split]}{suffix}" for suffix in TOKEN_SUFFIXES
             if (folder / f"{SPLIT_NAMES[split]}{suffix}").exists()]
    if len(found) > 1:
        raise UsageError(f"{folder}: both {found[0].name} and {found[1].name}; keep one {split} file")
    return found[0] if found else None


def open_token_data(path: str | os.PathLike) -> TokenData:
    """A token file, or a folder with train.bin|.npy (and val.bin|.npy)."""
    path = Path(path)
    if path.is_file():
        return TokenData(path, open_token_file(path), None)
    train = _split_file(path, "train")
    if train is None:
        raise UsageError(f"{path}: no train.bin or train.npy; a token folder holds train.bin (and val.bin)")
    val = _split_file(path, "val")
    data = TokenData(path, open_token_file(train), None if val is None else open_token_file(val))
    if data.val is not None and data.val.dtype != data.train.dtype:
        raise UsageError(f"{val}: ids of {data.val.dtype.name}, the training file's are {data.train.dtype.name}; "
                         "write both with one type")
    return data


class TokenReader:
    """One split of token data for `trainspeed.data.samples.SampleLoader`: `tokens` (seq,) as
    int32 (int64 for ids of 32 bits, which the workload narrows after checking them)."""

    def __init__(self, data: TokenData, split: str, sequence: int) -> None:
        self.file, self.first, self.count = data.windows(split, sequence)
        self.sequence = sequence
        self.source = data.source(split, sequence)
        wide = self.file.dtype.itemsize >= 4
        self.layout = {"tokens": (np.dtype(np.int64 if wide else np.int32), (sequence,))}
        self._windows: np.ndarray | None = None

    def __len__(self) -> int:
        return self.count

    def _view(self) -> np.ndarray:
        if self._windows is None:
            ids = self.file.ids()
            step = self.sequence - 1
            total = window_count(self.file.count, self.sequence)
            self._windows = np.lib.stride_tricks.as_strided(
                ids, shape=(total, self.sequence), strides=(step * ids.itemsize, ids.itemsize), writeable=False)
        return self._windows

    def read_batch(self, ids: np.ndarray, epoch: int, out: dict[str, np.ndarray]) -> None:
        """One gather of the windows `ids` (sorted: a forward sweep through the memory map). Indexing,
        not `np.take`: on this strided view `np.take` first copies the whole file into memory."""
        out["tokens"][:] = self._view()[self.first + ids]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_windows": None}


def verify_tokens(path: str | os.PathLike, vocabulary: int | None) -> tuple[TokenData, list[str]]:
    """The token data and every problem of its ids: negative, past int32, or past `vocabulary`."""
    data = open_token_data(path)
    stop = ID_LIMIT if vocabulary is None else min(vocabulary, ID_LIMIT)
    problems = []
    for file in data.files:
        ids = file.ids()
        first, count = None, 0
        for start in range(0, file.count, SCAN_IDS):
            chunk = np.asarray(ids[start:start + SCAN_IDS])
            outside = first_outside(chunk, stop)
            if outside is None:
                continue
            count += count_outside(chunk, stop)
            if first is None:
                first = (start + outside.index[0], outside.value, outside.what(stop, "--vocab" if vocabulary else "int32"))
        if first is not None:
            position, value, what = first
            more = f" ({count - 1:,} more)" if count > 1 else ""
            problems.append(f"{file.path}: token id {value} at position {position:,} {what}{more}")
    return data, problems


def summarize_tokens(path: str | os.PathLike) -> dict:
    data = open_token_data(path)
    files = {}
    for file in data.files:
        low, high = id_range(file)
        files[file.path.name] = {"dtype": file.dtype.name, "ids": file.count, "min": low, "max": high}
    return {"format": TOKENS, "files": files, "split": "val file" if data.val is not None else
            f"the last {VAL_PER_MILLE / 10:g}% of the windows", "fingerprint": data.fingerprint(),
            "fingerprint_covers": "relative paths, sizes and modification times (ns) of the token files"}
