"""An npz file's arrays, each read only once its header says what the reader expects.

`numpy.load` allocates whatever a member's header declares: a checkpoint leaf whose header says
2^36 floats asks for 256 GiB before a byte of it is read. Here the members must be exactly the
expected ones, and each header (its shape and dtype) and the member's size in the zip are checked
against what the manifest says before anything is allocated; nothing is unpickled (object arrays
are refused like any other dtype not expected).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

import numpy as np

from trainspeed.errors import UsageError

NPY_HEADER_MAX = 10_000
"""numpy's own limit on a header it reads."""


@dataclass(frozen=True)
class Expected:
    """What one member must hold: `shape` exactly, or (`shape` None) a vector of at most
    `max_elements`; and `dtype` exactly."""

    dtype: np.dtype
    shape: tuple[int, ...] | None = None
    max_elements: int = 0

    def problem(self, shape: tuple[int, ...], dtype: np.dtype) -> str | None:
        fits = shape == self.shape if self.shape is not None else len(shape) == 1 and shape[0] <= self.max_elements
        if dtype != self.dtype or not fits:
            wanted = f"{self.dtype}{list(self.shape)}" if self.shape is not None else \
                f"{self.dtype}[up to {self.max_elements:,}]"
            return f"holds {dtype}{list(shape)}, not {wanted}"
        return None


def _header(member: io.BufferedIOBase) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(member, max_header_size=NPY_HEADER_MAX)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(member, max_header_size=NPY_HEADER_MAX)
    raise ValueError(f"npy format version {version}, not 1.0 or 2.0")


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected: Expected) -> np.ndarray | str:
    """The member's array, or what is wrong with it."""
    with archive.open(info) as member:
        shape, fortran, dtype = _header(member)
        problem = expected.problem(tuple(shape), dtype)
        if problem is not None:
            return problem
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if info.file_size != member.tell() + size:
            return f"is {info.file_size:,} bytes, where its header declares {member.tell() + size:,}"
        data = member.read(size)
    if len(data) != size:
        return f"holds {len(data):,} bytes of data, where its header declares {size:,}"
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def read_npz(data: bytes, expected: dict[str, Expected], what: str, fix: str) -> dict[str, np.ndarray]:
    """The arrays of the npz `data`, which must hold exactly the members `expected` names; one
    UsageError line (`what`: the file, as told; `fix`: what to do) for anything else."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
            if set(infos) != set(expected) or len(infos) != len(archive.infolist()):
                missing, extra = sorted(set(expected) - set(infos)), sorted(set(infos) - set(expected))
                raise UsageError(f"{what}: not the arrays expected (missing {', '.join(missing[:3]) or 'none'}; "
                                 f"unexpected {', '.join(extra[:3]) or 'none'}); {fix}")
            arrays = {}
            for name, spec in expected.items():
                array = _member(archive, infos[name], spec)
                if isinstance(array, str):
                    raise UsageError(f"{what}: array {name} {array}; {fix}")
                arrays[name] = array
            return arrays
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError) as error:
        raise UsageError(f"{what}: not an npz of plain arrays ({type(error).__name__}: "
                         f"{str(error).splitlines()[0][:160] if str(error) else ''}); {fix}") from None
