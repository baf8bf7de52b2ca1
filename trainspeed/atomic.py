"""Atomic file writes: a reader sees the old file or the complete new one, never half of one.

Files are created with the permissions the process's umask gives (as `open` would), not the
owner-only mode of a temporary file, so others can read a shared run's results. A file that must
be new (a result a user named, a record beside a run) is published by a hard link, which fails
when anything is at its path by then, never by a rename, which would replace what appeared there
while the command ran. Lines are appended only to a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from trainspeed.errors import UsageError
from trainspeed.user_files import FileRefused, kind_of


@contextlib.contextmanager
def _written_beside(target: Path, publish: Callable[[Path, Path], None]) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success fsync it and `publish(tmp, target)`.
    The temporary file is gone afterwards, whatever happened; on an exception `target` is as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.fchmod(fd, 0o666 & ~current_umask())
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        publish(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync and rename it over `path`.

    On any exception the temporary file is removed and `path` is left as it was.
    """
    with _written_beside(Path(path), os.replace) as tmp:
        yield tmp


class FileAppeared(UsageError):
    """A file that had to be new was made by someone else while the command ran; it is left alone."""


NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP}
"""What `link` says on a file system that has no hard links (FAT, some network and FUSE mounts)."""


def _link_new(what: str) -> Callable[[Path, Path], None]:
    """Publish a finished temporary file at a path that must still be free: `link` (or, without
    hard links, a copy into a file opened with O_EXCL) fails when anything is there."""

    def publish(tmp: Path, target: Path) -> None:
        try:
            try:
                os.link(tmp, target)
                return
            except OSError as error:
                if error.errno not in NO_HARD_LINKS:
                    raise
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            with os.fdopen(descriptor, "wb") as handle, open(tmp, "rb") as source:
                shutil.copyfileobj(source, handle)
                handle.flush()
                os.fsync(handle.fileno())
        except FileExistsError:
            raise FileAppeared(f"{what}: a file appeared there while this command ran (made by you or another "
                               "command); it is left as it is and nothing was written over it (give a new path)") from None

    return publish


@contextlib.contextmanager
def exclusive_path(path: str | os.PathLike, what: str) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it becomes `path`, which must not exist:
    FileAppeared naming `what` (e.g. "--out check.json") when something is there by then, which
    stays as it was. On any exception the temporary file is removed."""
    with _written_beside(Path(path), _link_new(what)) as tmp:
        yield tmp


def create_exclusive_text(path: str | os.PathLike, text: str, what: str) -> None:
    """Write `text` whole to the new file `path` (see `exclusive_path`): never over anything."""
    with exclusive_path(path, what) as tmp:
        tmp.write_bytes(text.encode("utf-8"))


def move_to_new(source: str | os.PathLike, target: str | os.PathLike) -> bool:
    """Move the file `source` to `target` unless something is at `target` (False then, and nothing
    moved): a hard link, then `source` unlinked, so a file that appeared at `target` meanwhile is
    never replaced as a rename would replace it (on a file system without hard links: a rename
    after a check)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as error:
        if error.errno not in NO_HARD_LINKS:
            raise
        if os.path.lexists(target):
            return False
        os.rename(source, target)
        return True
    os.unlink(source)
    return True


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable_directory(directory: str | os.PathLike, what: str) -> None:
    """Create `directory` and write a probe file in it, before any work whose result would be lost;
    UsageError naming `what` (e.g. "--out results/x.jsonl") if that fails. The probe's name is new
    to each call (commands run from several threads of one process probe one folder at once)."""
    folder = Path(directory)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(prefix=".write-probe-", dir=folder)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise UsageError(f"cannot write to {what}: {error.strerror} ({folder}); choose a writable place") from None


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def shown_names(text: str) -> str:
    """`text` with the bytes of a file name that are not UTF-8 shown as `\\xNN`, for a file written
    for people (a page, a CSV table). Python holds such bytes of a name (a data folder, a results
    file) as lone surrogates, which no UTF-8 file can hold; a JSON row keeps them exactly (as a
    `\\udcff` escape, which reads back to the same name), a file for people shows them. Any other
    lone surrogate (a JSON row may hold one) is shown as `\\uNNNN`."""
    return _SURROGATE.sub(_shown_surrogate, text)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _shown_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def atomic_write_shown_text(path: str | os.PathLike, text: str) -> None:
    """`atomic_write_text` of a file for people: names that are not UTF-8 shown (`shown_names`)."""
    atomic_write_text(path, shown_names(text))


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line in a single write, so a crash leaves whole lines only. A file whose last
    line has no newline gets one first: the new line never glues onto it. Only a regular file is
    appended to (checked on the open descriptor): a FIFO or a device put at the path after the
    command checked it is refused in one line, not written to."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise FileRefused(str(target), f"is {kind_of(mode)}, not a regular file; rows are appended only to one")
    os.set_blocking(descriptor, True)
    with os.fdopen(descriptor, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        separator = b""
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            separator = b"" if handle.read(1) == b"\n" else b"\n"
        handle.write(separator + line.rstrip("\n").encode("utf-8") + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
