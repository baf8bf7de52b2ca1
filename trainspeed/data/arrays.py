"""A user's array files (`.npy`, `.npz`) read as columns whose size is known before a byte of data
is read, and whose rows are read a piece at a time.

numpy's own loader trusts a file: `np.load` of an `.npz` member decompresses it whole (a 0.5 MB
deflated member can declare 512 MiB of zeros), and on a file that is neither format it reports
"pickled (object) data" and suggests loading it unsafely. Here every file is opened only as a
regular file (`trainspeed.user_files`), its header is parsed first, and the array it declares
(dtype x shape) must be numbers or booleans and must be exactly what the file or zip entry holds
(a `.npy` file's size, an `.npz` member's size in the zip directory) before any data is read. Then
`.npy` files are memory-mapped and `.npz` members are read as streams, row ranges in order
(`ArrayColumn.rows`), so a writer holds one shard's rows at a time, whatever the arrays' size.
"""

from __future__ import annotations

import ast
import lzma
import os
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO, Protocol

import numpy as np

from trainspeed.data.shards import STORABLE_KINDS
from trainspeed.errors import UsageError
from trainspeed.user_files import open_regular

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"
MAX_HEADER_BYTES = 65536
DECOMPRESSION_ERRORS = (zlib.error, lzma.LZMAError)
"""What a damaged deflated (np.savez_compressed) or LZMA member raises while it is read: neither
is an OSError, unlike a damaged bzip2 member's."""


class ArrayColumn(Protocol):
    """One column: its dtype and full shape (samples first), and its rows read by range."""

    dtype: np.dtype
    shape: tuple[int, ...]

    def rows(self, start: int, stop: int) -> np.ndarray: ...


@dataclass
class ArrayInMemory:
    """An array already in memory (or memory-mapped) as a column."""

    array: np.ndarray
    where: str = ""
    """The file it came from, for errors about its values ("" for an array handed in)."""

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self.array[start:stop]


@dataclass(frozen=True)
class ArrayHeader:
    """What an `.npy` header declares, and where its data starts."""

    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.shape, dtype=object))


def _not_arrays(where: str) -> UsageError:
    return UsageError(f"{where}: not a numpy array file (.npy) or an archive of them (.npz); save arrays with "
                      "np.save or np.savez")


def read_header(stream: IO[bytes], where: str) -> ArrayHeader:
    """Parse an `.npy` header from `stream` (at its start) without numpy's loader: the dtype must
    be a plain number or boolean type, the shape whole numbers. UsageError naming `where`."""
    magic = stream.read(8)
    if len(magic) < 8 or magic[:6] != NPY_MAGIC:
        raise _not_arrays(where)
    major = magic[6]
    size_bytes = 2 if major == 1 else 4 if major in (2, 3) else 0
    if not size_bytes:
        raise UsageError(f"{where}: numpy array format version {major}, which this trainspeed does not read")
    length = int.from_bytes(stream.read(size_bytes), "little")
    if length > MAX_HEADER_BYTES:
        raise UsageError(f"{where}: an array header of {length} bytes, far more than numpy writes; not an array file")
    raw = stream.read(length)
    try:
        header = ast.literal_eval(raw.decode("utf-8" if major == 3 else "latin1"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        raise UsageError(f"{where}: a damaged array header (not the dictionary numpy writes)") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise UsageError(f"{where}: a damaged array header (not the dictionary numpy writes)")
    shape, fortran = header["shape"], header["fortran_order"]
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape) or not isinstance(fortran, bool):
        raise UsageError(f"{where}: a damaged array header (shape {str(shape)[:40]})")
    try:
        dtype = np.dtype(header["descr"]) if isinstance(header["descr"], str) else None
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind not in STORABLE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        shown = str(header["descr"])[:40]
        raise UsageError(f"{where}: an array of dtype {shown}; columns hold numbers or booleans only (arrays of "
                         "Python objects are never unpickled)")
    return ArrayHeader(dtype, shape, fortran, data_offset=8 + size_bytes + length)


def _check_size(where: str, header: ArrayHeader, holds: int) -> None:
    """The declared array must be exactly the bytes the file (or zip entry) holds after its header."""
    if header.data_offset + header.nbytes != holds:
        declared = f"{header.dtype.str} {list(header.shape)}"
        raise UsageError(f"{where}: declares an array of {declared} ({header.nbytes:,} bytes) but holds "
                         f"{max(0, holds - header.data_offset):,} bytes of data; the file is damaged or not what it says")


def open_npy(path: Path) -> np.ndarray:
    """A `.npy` file as a read-only memory map, once its header and size agree."""
    handle = open_regular(path)
    with handle:
        header = read_header(handle, str(path))
        _check_size(str(path), header, os.fstat(handle.fileno()).st_size)
        if header.nbytes == 0:
            return np.zeros(header.shape, header.dtype)
        order = "F" if header.fortran_order else "C"
        return np.memmap(handle, dtype=header.dtype, mode="r", offset=header.data_offset, shape=header.shape,
                         order=order)


@dataclass
class ZipMemberColumn:
    """An `.npz` member read as a stream: rows are decompressed as they are asked for, in order
    (asking for earlier rows opens the member again), never the whole array at once."""

    archive: zipfile.ZipFile
    member: str
    where: str
    header: ArrayHeader
    _stream: IO[bytes] | None = field(default=None, repr=False)
    _next_row: int = 0

    @property
    def dtype(self) -> np.dtype:
        return self.header.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.header.shape

    @property
    def row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))

    def _seek_row(self, row: int) -> IO[bytes]:
        if self._stream is None or row < self._next_row:
            if self._stream is not None:
                self._stream.close()
            self._stream = self.archive.open(self.member)
            self._stream.read(self.header.data_offset)
            self._next_row = 0
        while self._next_row < row:  # skip forward in pieces of at most 16 MiB
            step = max(1, min(row - self._next_row, (16 << 20) // max(1, self.row_bytes)))
            self._read(step)
        return self._stream

    def _read(self, count: int) -> bytes:
        wanted = count * self.row_bytes
        try:
            data = self._stream.read(wanted)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, *DECOMPRESSION_ERRORS) as error:
            raise UsageError(f"{self.where}: damaged ({type(error).__name__}: {str(error)[:80]})") from None
        if len(data) != wanted:
            raise UsageError(f"{self.where}: ends before the array its header declares (truncated)")
        self._next_row += count
        return data

    def rows(self, start: int, stop: int) -> np.ndarray:
        stop = min(stop, self.shape[0])
        self._seek_row(start)
        data = bytearray(self._read(max(0, stop - start)))
        return np.frombuffer(data, dtype=self.dtype).reshape((max(0, stop - start), *self.shape[1:]))


def _open_npz(path: Path, handle: BinaryIO) -> dict[str, ArrayColumn]:
    try:
        archive = zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise UsageError(f"{path}: a damaged .npz archive ({type(error).__name__}: {str(error)[:80]})") from None
    columns: dict[str, ArrayColumn] = {}
    for info in archive.infolist():
        where = f"{path}: member {info.filename!r}"
        if not info.filename.endswith(".npy") or info.is_dir():
            raise UsageError(f"{where} is not an array (an .npz holds only NAME.npy members, as np.savez writes)")
        try:
            with archive.open(info) as member:
                header = read_header(member, where)
        except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError, *DECOMPRESSION_ERRORS) as error:
            raise UsageError(f"{where}: damaged ({type(error).__name__}: {str(error)[:80]})") from None
        _check_size(where, header, info.file_size)
        if header.fortran_order and len(header.shape) > 1:
            raise UsageError(f"{where}: stored in Fortran order, which cannot be read row by row; save it with "
                             "np.savez(path, name=np.ascontiguousarray(array))")
        columns[info.filename[: -len(".npy")]] = ZipMemberColumn(archive, info.filename, where, header)
    return columns


def load_arrays(path: str | os.PathLike) -> dict[str, ArrayColumn]:
    """The named arrays of an `.npz` file, or of a folder of `.npy` files (each file one column,
    named after it), as columns whose rows are read on demand. Never unpickles, never reads an
    array before its declared size is checked: bad input is one UsageError naming the file."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.npy"))
        if not files:
            raise UsageError(f"{path}: a folder without .npy files; give an .npz file or a folder of .npy files")
        return {file.stem: ArrayInMemory(open_npy(file), str(file)) for file in files}
    if not path.exists() and not path.is_symlink():
        raise UsageError(f"{path}: no such file or folder")
    handle = open_regular(path)
    magic = handle.read(6)
    handle.seek(0)
    if magic == NPY_MAGIC:
        handle.close()
        raise UsageError(f"{path}: one array, not an .npz of named columns; save it with np.savez(path, name=array)")
    if magic[:4] not in (ZIP_MAGIC, EMPTY_ZIP_MAGIC):
        handle.close()
        raise _not_arrays(str(path))
    return _open_npz(path, handle)
