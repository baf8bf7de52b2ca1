"""A file's sha256 in a file beside it (`step-N.pt.sha256`), the line `sha256sum` writes and
checks (`sha256sum -c`): how a checkpoint of either trainer says it is whole.

The checksum is written after the file it describes, each atomically, so a kill leaves a file
without a checksum (an unfinished checkpoint, passed over) rather than one whose checksum lies.
Reading it refuses anything but that one line for that file: a symlink or a FIFO in its place, a
line naming another file, or text that is not 64 hexadecimal digits.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainspeed.atomic import atomic_write_text
from trainspeed.user_files import FileRefused, read_regular

SUFFIX = ".sha256"
MAX_BYTES = 256


class ChecksumProblem(Exception):
    """Why a file's checksum cannot be read, as a phrase to follow the file's name."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


def write_checksum(path: Path, digest: str) -> None:
    """Write the checksum of `path` (its sha256 `digest`) beside it."""
    atomic_write_text(checksum_path(path), f"{digest}  {path.name}\n")


def recorded_checksum(path: Path) -> str:
    """The sha256 recorded beside `path`; ChecksumProblem where there is none it can be read from."""
    sidecar = checksum_path(path)
    if not sidecar.exists() and not sidecar.is_symlink():
        raise ChecksumProblem(f"has no checksum file ({sidecar.name} is missing)")
    try:
        fields = read_regular(sidecar, sidecar.name, MAX_BYTES)[:MAX_BYTES].decode("ascii").split()
    except FileRefused as error:
        raise ChecksumProblem(f"has an unreadable checksum file ({sidecar.name} {error.reason})") from None
    except UnicodeDecodeError:
        raise ChecksumProblem(f"has a checksum file {sidecar.name} that is not a sha256 line for it") from None
    if len(fields) != 2 or fields[1] != path.name or not re.fullmatch(r"[0-9a-f]{64}", fields[0]):
        raise ChecksumProblem(f"has a checksum file {sidecar.name} that is not a sha256 line for it")
    return fields[0]
