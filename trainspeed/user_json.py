"""JSON read by one policy, wherever it comes from (a results file, a run's summary, a dataset's
index, logs to import, a record a command left): anything wrong with it is one error naming the
file; `check_rows_file` is the check every writer of rows makes of the file it will append to.

What Python's JSON reader lets through, and what this module makes one error line of instead:
- a line of 100,000 `[` raises RecursionError rather than a JSONDecodeError (nesting past the
  recursion limit);
- an integer of more than 4,300 digits raises ValueError (Python's limit on converting digits to
  an int), and one of 400 digits reads as an int that `float()` cannot convert (OverflowError),
  far from where it was read;
- a number such as `1e400` reads as infinity, which the file never wrote.
So every number read is one a float holds finitely (about 1.8e308 at most): the numbers JSON
carries between programs are IEEE 754 doubles (RFC 8259, section 6), and no file trainspeed writes
or reads holds a larger one. The constants NaN, Infinity and -Infinity, which Python's writer writes
for a non-finite float, are read as such: whether one belongs where it stands is the reader's to
say (a diverged run's loss is NaN; a row's other numbers are finite, `trainspeed.rows`).
A file that is not UTF-8 raises UnicodeDecodeError before any JSON is parsed: bad input here too.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Collection

from trainspeed.errors import UsageError
from trainspeed.user_files import read_regular

FLOAT_DIGITS = len(str(int(sys.float_info.max)))
"""Digits of the largest float (309): an integer of more is larger than any float."""
SHOWN_DIGITS = 20
"""Characters of a refused number shown in its error line (it may have thousands): any 64-bit
integer in full, few enough for one line."""


class JSONRefused(ValueError):
    """Text that is no JSON this tool reads; `str(error)` says why in words, without a file name
    (the reader names the file and the line). `kind` says which: SYNTAX (not JSON at all; `error`
    is the JSONDecodeError), NESTING (nested past the recursion limit) or NUMBER (a number no
    float holds)."""

    SYNTAX = "syntax"
    NESTING = "nesting"
    NUMBER = "number"

    def __init__(self, reason: str, kind: str, error: json.JSONDecodeError | None = None) -> None:
        super().__init__(reason)
        self.kind = kind
        self.error = error

    @property
    def syntax(self) -> bool:
        """The text is not JSON at all (as opposed to JSON this tool does not read)."""
        return self.kind == self.SYNTAX


def cut_short(text: str, length: int = SHOWN_DIGITS) -> str:
    """Text from a user's file or flag, cut to `length` characters for an error line:
    `11111111111111111111... (5000 digits)`, or `... (N characters)` for text other than digits."""
    if len(text) <= length:
        return text
    unsigned = text.lstrip("-")
    return f"{text[:length]}... ({len(unsigned)} {'digits' if unsigned.isdigit() else 'characters'})"


TOO_LARGE = ("is larger than any number a float holds (about 1.8e308); no file this tool writes holds one "
             "(the file was edited or written by another program)")


def _integer(text: str) -> int:
    """An integer literal, read only where a float holds it: its digits are counted before any
    conversion (Python refuses more than 4,300 with a ValueError of its own). Fewer digits than the
    largest float's are always within it."""
    digits = len(text) - (text[0] == "-")
    if digits < FLOAT_DIGITS:
        return int(text)
    if digits == FLOAT_DIGITS:
        value = int(text)
        if abs(value) <= sys.float_info.max:
            return value
    raise JSONRefused(f"the number {cut_short(text)} {TOO_LARGE}", JSONRefused.NUMBER)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JSONRefused(f"the number {cut_short(text)} {TOO_LARGE}", JSONRefused.NUMBER)
    return value


def loads(text: str | bytes) -> Any:
    """`json.loads(text)` by the module's policy; JSONRefused saying what is wrong (bytes that
    are not UTF-8 are json's own UnicodeDecodeError)."""
    try:
        return json.loads(text, parse_int=_integer, parse_float=_float)
    except json.JSONDecodeError as error:
        raise JSONRefused(f"not valid JSON ({error.msg}: line {error.lineno} column {error.colno})",
                          JSONRefused.SYNTAX, error) from None
    except RecursionError:
        raise JSONRefused("JSON nested too deeply to read (deeper than Python's recursion limit); no file this "
                          "tool writes or reads nests like that", JSONRefused.NESTING) from None


def parse_json(text: str | bytes, where: str) -> Any:
    """`loads(text)`; `where` (e.g. "log.jsonl: line 3") starts the error line."""
    try:
        return loads(text)
    except JSONRefused as refused:
        raise UsageError(f"{where}: {refused}") from None


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
