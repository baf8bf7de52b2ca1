"""Atomic file writes: a reader sees the old file or the complete new one, never half of one.

Files are created with the permissions the process's umask gives (as `open` would), not the
owner-only mode of a temporary file, so others can read a shared run's results.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from trainspeed.errors import UsageError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync and rename it over `path`.

    On any exception the temporary file is removed and `path` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.fchmod(fd, 0o666 & ~current_umask())
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable_directory(directory: str | os.PathLike, what: str) -> None:
    """Create `directory` and write a probe file in it, before any work whose result would be lost;
    UsageError naming `what` (e.g. "--out results/x.jsonl") if that fails."""
    folder = Path(directory)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"cannot write to {what}: {error.strerror} ({folder}); choose a writable place") from None


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line in a single write, so a crash leaves whole lines only. A file whose last
    line has no newline gets one first: the new line never glues onto it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        separator = b""
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            separator = b"" if handle.read(1) == b"\n" else b"\n"
        handle.write(separator + line.rstrip("\n").encode("utf-8") + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
