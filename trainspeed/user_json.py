"""JSON that a user hands a command (logs to import, a results file to append rows to), read so
that anything wrong with it is one UsageError line naming the file; `check_rows_file` is the check
every writer of rows makes of the file it will append to.

Python's JSON reader recurses once per nesting level, so a line of 100,000 `[` raises
RecursionError rather than a JSONDecodeError, and a file that is not UTF-8 raises
UnicodeDecodeError before any JSON is parsed: both are bad input here, not crashes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Collection

from trainspeed.errors import UsageError
from trainspeed.user_files import read_regular


def parse_json(text: str, where: str) -> Any:
    """`json.loads(text)`; `where` (e.g. "log.jsonl: line 3") starts the error line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{where}: not valid JSON ({error.msg}: line {error.lineno} column {error.colno})") from None
    except RecursionError:
        raise UsageError(f"{where}: JSON nested too deeply to read (deeper than Python's recursion limit); "
                         "no file this tool writes or reads nests like that") from None


def printable(text: str) -> str:
    """Text from a user's file, safe to print on a terminal: control characters (ESC and the
    rest, which could recolour, retitle or clear the terminal, or hide a line) are shown escaped,
    as repr shows them; everything printable stays as it is."""
    return "".join(char if char.isprintable() or char == " " else repr(char)[1:-1] for char in text)


def read_utf8(path: Path, what: str) -> str:
    """The text of a file the user named; `what` (e.g. "--out results.jsonl") names it in errors.
    Only a regular file is read (`read_regular`): a FIFO or a device such as /dev/zero would never end."""
    if path.is_dir():
        raise UsageError(f"{what}: is a folder; give a file")
    try:
        return read_regular(path, what).decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{what}: not UTF-8 text (byte {error.start}); give a JSONL file or a new path") from None


def check_rows_file(path: Path, what: str, kinds: Collection[str]) -> None:
    """The one check of a file a command will append rows to, made before the command measures,
    trains or plays anything: the file is new, or a regular file (never a folder, a FIFO, a device
    or a link to nothing) holding JSON objects only, one per line, each of one of `kinds` (the row
    kinds the command writes). So rows are never glued onto someone else's file, a plan or an
    evaluation row never lands in a run's metrics.jsonl or a bench file (which their own readers
    would then refuse), and the file can be read back when the work is done."""
    if not path.exists():
        if path.is_symlink():
            raise UsageError(f"{what}: is a link to {printable(os.readlink(path))}, which does not exist; "
                             "rows are appended only to a file of rows (give a new path)")
        return
    for number, line in enumerate(read_utf8(path, what).splitlines(), start=1):
        if not line.strip():
            continue
        row = parse_json(line, f"{what}: line {number}")
        if not isinstance(row, dict):
            raise UsageError(f"{what}: line {number} is not a JSON object; rows are appended only to "
                             "a JSONL file of rows (give a new path)")
        if row.get("kind") not in kinds:
            found = row.get("kind")
            held = f"a {found[:40]!r} row" if isinstance(found, str) else "a row without a kind"
            raise UsageError(f"{what}: line {number} is {held}, not a {' or '.join(map(repr, kinds))} row: this "
                             "command appends only to a file of its own rows (give a new path)")
