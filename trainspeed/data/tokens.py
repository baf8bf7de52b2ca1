"""Token files read where they lie: a flat array of ids, read a window at a time, cut into windows.

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

Ids are read with `os.pread`, a window at a time into the batch, never through a memory map: a
file cut while a run reads it (rewritten in place, a full disk, a network file system) makes a
read of a memory map beyond the new end fault with SIGBUS, which kills the process (a loader
worker dies with torch's message about shared memory, the training process with no message at
all), where a read that comes back short is an error that names the file. Each read is checked
against the size the file had when it was opened: one line, naming the file and both sizes, and
the run stops (its last checkpoint resumes it once the file is whole again). A read costs a system
call per window: windows of 256 ids are read at about half the memory map's rate, still some
150,000 a second on one loaded core (docs/data_in_place.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, Iterator

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

    @property
    def nbytes(self) -> int:
        """The file's size as opened: its header (an .npy's) and its ids."""
        return self.offset + self.count * self.dtype.itemsize

    def open(self) -> BinaryIO:
        """The file, opened as a regular file (never a FIFO put in its place) and still of the
        size it had when it was opened; UsageError otherwise."""
        handle = open_regular(self.path)
        try:
            self.check_size(handle)
        except UsageError:
            handle.close()
            raise
        return handle

    def check_size(self, handle: BinaryIO) -> None:
        size = os.fstat(handle.fileno()).st_size
        if size != self.nbytes:
            raise self.changed(size)

    def changed(self, size: int) -> UsageError:
        return UsageError(f"{self.path}: now {size:,} bytes, {self.nbytes:,} when it was opened: the file was cut or "
                          "rewritten while it was read; put it back as it was (a run resumes from its last checkpoint "
                          "with --resume)")

    def read(self, handle: BinaryIO, start: int, count: int) -> np.ndarray:
        """Ids [start, start + count) of the open file; UsageError where fewer come back (the file
        was cut after it was opened)."""
        nbytes = count * self.dtype.itemsize
        data = os.pread(handle.fileno(), nbytes, self.offset + start * self.dtype.itemsize)
        if len(data) != nbytes:
            raise self.changed(os.fstat(handle.fileno()).st_size)
        return np.frombuffer(data, dtype=self.dtype)

    def chunks(self, size: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """(first id, ids) of the whole file, `size` ids at a time (SCAN_IDS by default)."""
        size = size or SCAN_IDS
        with self.open() as handle:
            for start in range(0, self.count, size):
                yield start, self.read(handle, start, min(size, self.count - start))

    def ids(self) -> np.ndarray:
        """Every id, read into memory: for small files (tests, an inspection); readers take chunks."""
        if self.count == 0:
            return np.zeros(0, self.dtype)
        with self.open() as handle:
            return self.read(handle, 0, self.count)


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
    low, high = None, None
    for _, chunk in TokenFile(Path(path), np.dtype(dtype), offset, count).chunks():
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
        self._handle: BinaryIO | None = None
        self._pid = -1

    def __len__(self) -> int:
        return self.count

    def _open(self) -> BinaryIO:
        """The file, opened once in each process that reads it (a forked worker opens its own)."""
        if self._handle is None or self._pid != os.getpid():
            self._handle, self._pid = self.file.open(), os.getpid()
        return self._handle

    def read_batch(self, ids: np.ndarray, epoch: int, out: dict[str, np.ndarray]) -> None:
        """The windows `ids` (sorted: reads go forward through the file), one `pread` each, widened
        into the batch at once; UsageError naming the file where a read comes back short."""
        descriptor = self._open().fileno()
        itemsize = self.file.dtype.itemsize
        nbytes = self.sequence * itemsize
        offsets = (self.file.offset + (self.first + ids.astype(np.int64)) * ((self.sequence - 1) * itemsize)).tolist()
        data = b"".join([os.pread(descriptor, nbytes, offset) for offset in offsets])
        if len(data) != nbytes * len(offsets):
            raise self.file.changed(os.fstat(descriptor).st_size)
        out["tokens"][:] = np.frombuffer(data, self.file.dtype).reshape(len(offsets), self.sequence)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_handle": None, "_pid": -1}


def verify_tokens(path: str | os.PathLike, vocabulary: int | None) -> tuple[TokenData, list[str]]:
    """The token data and every problem of its ids: negative, past int32, or past `vocabulary`."""
    data = open_token_data(path)
    stop = ID_LIMIT if vocabulary is None else min(vocabulary, ID_LIMIT)
    problems = []
    for file in data.files:
        first, count = None, 0
        for start, chunk in file.chunks():
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
