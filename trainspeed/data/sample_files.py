"""The files a reader of data in place takes a sample from: an image of a folder, an image a
Hugging Face dataset names by path, a member of a tar shard.

Every one is opened by `trainspeed.user_files.open_regular` (without blocking, the open descriptor
checked), so a FIFO, a device, a socket or a folder where a sample should be is refused in one line
naming its path, never read: a FIFO would wait for a writer for ever, /dev/zero would fill memory.
What is read is bounded twice: by the size the file (or the tar header) says, and by
`MAX_SAMPLE_BYTES`, so no sample takes more memory than a sample may.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from trainspeed.data.decode import BadSample
from trainspeed.user_files import FileRefused, open_regular

MAX_SAMPLE_BYTES = 1 << 30
"""The most bytes one sample's file or member may hold (1 GiB): more than any image or token
window a model trains on, and small enough that reading one never exhausts a loader worker."""


def _too_large(size: int) -> str:
    return f"is {size:,} bytes, more than the {MAX_SAMPLE_BYTES:,} a sample may hold"


def open_sample_file(path: str | os.PathLike, name: str | None = None) -> BinaryIO:
    """`path` open for reading, once it is a regular file of at most `MAX_SAMPLE_BYTES`; BadSample
    named `name` (default: the path) with the reason otherwise."""
    shown = str(path) if name is None else name
    try:
        handle = open_regular(path)
    except FileRefused as refused:
        raise BadSample(shown, refused.reason) from None
    size = os.fstat(handle.fileno()).st_size
    if size > MAX_SAMPLE_BYTES:
        handle.close()
        raise BadSample(shown, _too_large(size))
    return handle


def read_sample_file(path: str | os.PathLike, name: str | None = None) -> bytes:
    """The bytes of a sample's file (as `open_sample_file` takes it), as many as its size says and
    never more (a file that grows while read is read to the size it had); BadSample for one cut
    while read."""
    shown = str(path) if name is None else name
    with open_sample_file(path, name) as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            data = handle.read(size)
        except OSError as error:
            raise BadSample(shown, f"cannot be read ({error.strerror})") from None
    if len(data) != size:
        raise BadSample(shown, f"was cut while read ({len(data):,} of its {size:,} bytes)")
    return data


def member_size_problem(size: int) -> str | None:
    """Why a member a tar header declares `size` bytes long is not read as a sample, or None."""
    return _too_large(size) if size > MAX_SAMPLE_BYTES else None
