"""Files a user points a command at, read only when they are regular files whose size is known.

Opening a FIFO for reading waits for a writer, and a device such as /dev/zero (or a symlink to
it) never ends, so hashing or loading either hangs a command for ever with no message. Every
reader of a user's file (a checkpoint and its checksum, an array file, an index) opens it here:
without blocking, then checks the open descriptor itself (so a rename between the check and the
read changes nothing), and refuses anything but a regular file in one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from trainspeed.errors import UsageError


class FileRefused(UsageError):
    """A file that is not read, and why: the message is `what: reason`, `reason` alone is kept for
    callers that phrase their own line (a checkpoint refused among others)."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.reason = reason


def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, for an error line ("a FIFO", "a character device" ...)."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike, what: str | None = None) -> BinaryIO:
    """`path` opened for binary reading, once it is known to be a regular file (a symlink to one
    counts); FileRefused naming `what` (default: the path) for anything else or an unreadable file."""
    shown = str(path) if what is None else what
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileRefused(shown, "no such file") from None
    except OSError as error:
        raise FileRefused(shown, f"cannot be read ({error.strerror})") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise FileRefused(shown, f"is {kind_of(mode)}, not a regular file")
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def read_regular(path: str | os.PathLike, what: str | None = None, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file (at most `max_bytes` + 1 of them, so a caller can tell a file
    that is too long); FileRefused as `open_regular` says."""
    with open_regular(path, what) as handle:
        try:
            return handle.read() if max_bytes is None else handle.read(max_bytes + 1)
        except OSError as error:
            raise FileRefused(str(path) if what is None else what, f"cannot be read ({error.strerror})") from None


def regular_file_problem(path: Path) -> str | None:
    """Why `path` is not a regular file to read (missing, a FIFO, a device ...), or None; for
    checks that run before a file is opened by a library that opens it itself."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    return None if stat.S_ISREG(mode) else f"is {kind_of(mode)}, not a regular file"
