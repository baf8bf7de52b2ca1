"""Where `trainspeed export` writes its folder: checked before anything is traced, written at once.

Tracing every batch size's programs takes minutes, so what can refuse the folder is checked
first, without making anything: `--out` must not exist, the nearest folder above it that exists
must be a folder this process can write in (not a file: `--out afile/sub`), and every name to be
made must fit the file system's limit on a name's length. The files then go into a temporary
folder of a short name beside `--out` (so a long `--out` never makes a longer name), renamed to
`--out` at once: an interrupted export leaves no half folder, and a folder that appeared meanwhile
is kept.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from trainspeed.atomic import current_umask
from trainspeed.errors import UsageError

STAGING_PREFIX = ".export-"
DEFAULT_NAME_MAX = 255


def _existing_parent(out: Path) -> Path:
    """The nearest path above `out` that exists (the current folder for a relative one)."""
    parent = out.absolute().parent
    while not os.path.lexists(parent):
        parent = parent.parent
    return parent


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX


def check_out(out: Path) -> None:
    """UsageError in one line where the folder `out` could not be made (nothing is made here)."""
    if os.path.lexists(out):
        raise UsageError(f"--out {out}: exists; give a new folder (an export never writes over files)")
    parent = _existing_parent(out)
    if not parent.is_dir():
        raise UsageError(f"--out {out}: {parent} is a file, not a folder; give a path in a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: cannot write in {parent}; choose a writable place")
    limit = _name_max(parent)
    to_make = out.absolute().relative_to(parent).parts
    too_long = [name for name in to_make if len(os.fsencode(name)) > limit]
    if too_long:
        raise UsageError(f"--out: the name {too_long[0][:40]}... is {len(os.fsencode(too_long[0]))} bytes, and this file "
                         f"system takes names of at most {limit}; give a shorter --out")


def write_folder(out: Path, files: dict[str, bytes]) -> None:
    """Every file into a temporary folder beside `out`, then the folder renamed to `out` at once."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out.parent))
    try:
        os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp's folder is private; the export is not
        for name, data in files.items():
            (staging / name).write_bytes(data)
        if os.path.lexists(out):
            raise UsageError(f"--out {out}: appeared while exporting; it is left as it is (give a new folder)")
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
