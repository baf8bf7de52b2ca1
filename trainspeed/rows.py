"""Result rows as typed records: every kind of row is one frozen dataclass, defined beside the code
that writes it, whose class says its `KIND` and `SCHEMA_VERSION`.

A row on disk is one JSON object: `kind`, `schema_version`, then the dataclass's fields (and, for
kinds that allow it, extra fields a script added, which never shadow the dataclass's own). A
reader takes a row only in the kind and version its dataclass describes (or an older version
its dataclass says how to read, `OLDER_VERSIONS`), and checks every known field's type, so a row
from another program or another version is refused with one line naming the file, the line and
what is wrong, never half read. Files are JSON Lines, or one JSON document
(a run's `summary.json`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import dacite

from trainspeed.atomic import append_line
from trainspeed.errors import UsageError
from trainspeed.user_files import read_regular

KIND = "kind"
VERSION = "schema_version"
SHORT_HASH = 12
"""Hex digits of a workload's definition hash shown in labels: enough to tell definitions apart at a glance."""


class Row(Protocol):
    """A row dataclass: its kind and the version of its schema, on the class.

    A class may also name the older versions of its kind that it still reads, in a class variable
    `OLDER_VERSIONS: ClassVar[dict[int, Callable[[dict], dict]]]`: each turns a record of that version
    into one of the current version (a field renamed, or computed again from the record's own fields),
    so rows written before a change keep reading as what they are. Any other version is refused."""

    KIND: ClassVar[str]
    SCHEMA_VERSION: ClassVar[int]


RowT = TypeVar("RowT")


@dataclass(frozen=True)
class Source:
    """Where a record came from: a file and its line (None for a whole-file JSON document)."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


def row_record(row: Row, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The row as the JSON object written to disk; `extra` fields come last and may not shadow."""
    record = {KIND: row.KIND, VERSION: row.SCHEMA_VERSION, **dataclasses.asdict(row)}  # type: ignore[call-overload]
    clashes = sorted(set(extra or {}) & set(record))
    if clashes:
        raise ValueError(f"extra fields {clashes} would shadow the {row.KIND} row's own fields")
    return {**record, **(extra or {})}


def row_line(row: Row, extra: dict[str, Any] | None = None) -> str:
    return json.dumps(row_record(row, extra))


def append_row(path: str | os.PathLike, row: Row, extra: dict[str, Any] | None = None) -> None:
    """Append one row as one whole line (a crash leaves whole rows only)."""
    append_line(path, row_line(row, extra))


def record_kind(record: Any, source: Source) -> tuple[str, int]:
    """The kind and schema version a JSON object says it is; UsageError when it says neither, or
    says one of them in the wrong type (each case named as what it is)."""
    if not isinstance(record, dict):
        raise UsageError(f"{source}: not a JSON object but {type(record).__name__}")
    if KIND not in record and VERSION not in record:
        raise UsageError(
            f"{source}: a row without a kind and schema_version (written before rows carried them, or by "
            "another program); convert old trainspeed files with `python benchmarks/convert_results.py FILE`")
    kind, version = record.get(KIND), record.get(VERSION)
    for name, value, ok, wanted in ((KIND, kind, isinstance(kind, str), "a name"),
                                    (VERSION, version, isinstance(version, int) and not isinstance(version, bool),
                                     "a whole number")):
        if name not in record:
            raise UsageError(f"{source}: a row without its {name} (the file was edited or written by another program)")
        if not ok:
            raise UsageError(f"{source}: a row whose {name} is {_shown_json(value)}, not {wanted} (the file was "
                             "edited or written by another program)")
    return kind, version


def _shown_json(value: Any, length: int = 40) -> str:
    """A value as JSON, cut to `length` characters, non-ASCII escaped (it came from someone else's file)."""
    try:
        return json.dumps(value)[:length]
    except RecursionError:
        return "a deeply nested value"


def _float_hook(value: Any) -> Any:
    """JSON writes 3.0 as 3: an integer is a valid float (a bool is not)."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


_CONFIG = dacite.Config(check_types=True, type_hooks={float: _float_hook}, cast=[tuple])


def parse_row(row_type: type[RowT], record: dict[str, Any], source: Source) -> tuple[RowT, dict[str, Any]]:
    """The row of `row_type` that `record` holds, and the extra fields it carried beside it."""
    kind, version = record_kind(record, source)
    if kind != row_type.KIND:  # type: ignore[attr-defined]
        raise UsageError(f"{source}: a {kind!r} row where a {row_type.KIND!r} row belongs")  # type: ignore[attr-defined]
    upgrade = getattr(row_type, "OLDER_VERSIONS", {}).get(version)
    if upgrade is not None:
        record = upgrade(record)
    elif version != row_type.SCHEMA_VERSION:  # type: ignore[attr-defined]
        raise UsageError(
            f"{source}: a {kind} row of schema_version {version}; this trainspeed reads version "
            f"{row_type.SCHEMA_VERSION} of it (use the trainspeed that wrote it, or rewrite the row)")  # type: ignore[attr-defined]
    names = {field.name for field in dataclasses.fields(row_type)}  # type: ignore[arg-type]
    known = {key: value for key, value in record.items() if key in names}
    extra = {key: value for key, value in record.items() if key not in names and key not in (KIND, VERSION)}
    try:
        row = dacite.from_dict(row_type, known, config=_CONFIG)
    except dacite.WrongTypeError as error:
        # A value nested nearly as deep as JSON reads, dumped from deeper in the stack, recurses too far.
        shown = _shown_json(_raw(known, error.field_path), 60)
        raise UsageError(f"{source}: {kind} row: field {error.field_path} must be "
                         f"{_type_name(_annotation(row_type, error.field_path) or error.field_type)}, not {shown}") from None
    except dacite.MissingValueError as error:
        raise UsageError(f"{source}: {kind} row without its field {error.field_path}") from None
    except (dacite.DaciteError, RecursionError) as error:
        raise UsageError(f"{source}: {kind} row does not fit its schema ({error})") from None
    return row, extra


def _raw(record: dict[str, Any], path: str | None) -> Any:
    """The value a dotted field path names in the record as read (dacite reports the value it built)."""
    value: Any = record
    for part in (path or "").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _annotation(row_type: type, path: str | None) -> Any:
    """The declared type of a dotted field path (`machine.cores_usable`), or None."""
    owner: Any = row_type
    annotation = None
    for part in (path or "").split("."):
        if not dataclasses.is_dataclass(owner):
            return None
        annotation = typing.get_type_hints(owner).get(part)
        owner = next((arg for arg in typing.get_args(annotation) if dataclasses.is_dataclass(arg)), annotation)
    return annotation


def _type_name(annotation: Any) -> str:
    text = str(annotation) if typing.get_args(annotation) else getattr(annotation, "__name__", str(annotation))
    return text.replace("typing.", "")


def read_records(path: str | os.PathLike) -> list[tuple[Any, Source]]:
    """Every JSON value of a file: one per line (JSON Lines), or the whole file as one document.

    A file that is not UTF-8 text, a line that is not JSON and JSON nested too deeply to read are
    each one UsageError naming the file (and the line)."""
    file = Path(path)
    try:
        text = read_regular(file).decode("utf-8")  # a FIFO or a device would never end
    except UnicodeDecodeError:
        raise UsageError(f"{file}: not a text file of JSON rows (it is not UTF-8)") from None
    if "\x00" in text:
        raise UsageError(f"{file}: not a text file of JSON rows (it holds NUL bytes)")
    records: list[tuple[Any, Source]] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append((json.loads(line), Source(str(file), number)))
        except RecursionError:
            raise UsageError(f"{file}:{number}: JSON nested too deeply to be a row") from None
        except json.JSONDecodeError as error:
            if not records:
                document = _document(text, file)
                if document is not None:
                    return [(document, Source(str(file)))]
            raise UsageError(f"{file}:{number}: not a trainspeed result row (not JSON: {error.msg} at column "
                             f"{error.colno})") from None
    return records


def _document(text: str, file: Path) -> Any:
    """The file as one JSON document (pretty-printed JSON), or None when it is not one."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{file}: JSON nested too deeply to be a row") from None
    except json.JSONDecodeError:
        return None


def is_finite(value: Any) -> bool:
    """A number a table or figure can show: an int or float that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
