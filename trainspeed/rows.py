"""Result rows as typed records: every kind of row is one frozen dataclass, defined beside the code
that writes it, whose class says its `KIND` and `SCHEMA_VERSION`.

A row on disk is one JSON object: `kind`, `schema_version`, then the dataclass's fields (and, for
kinds that allow it, extra fields a script added, which never shadow the dataclass's own). A
reader takes a row only in the kind and version its dataclass describes (or an older version
its dataclass says how to read, `OLDER_VERSIONS`), and checks every known field's type, so a row
from another program or another version is refused with one line naming the file, the line and
what is wrong, never half read. Files are JSON Lines, or one JSON document
(a run's `summary.json`).

Every number a row holds is checked against its range too, declared once, on the field's type:
a float is finite and a whole number lies from 0 to 2^63-1 unless the field says otherwise with a
marker (`Positive`, `NonNegative`, `Batch` ... below: `Annotated` types, so the readers and mypy see
the plain number). Rows are read from files someone may have edited or sent, and a NaN, an
infinity, a batch of 0 or of 2^70 passes every type check and then breaks the arithmetic that
reads it (or ranks a negative time first); a value legitimately missing is None, never NaN.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import types
import typing
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Protocol, Sequence, TypeVar

import dacite

from trainspeed.atomic import append_line
from trainspeed.errors import UsageError
from trainspeed.flags import MAX_BATCH_SIZE
from trainspeed.machine import Machine
from trainspeed.user_files import read_regular
from trainspeed.user_json import JSONRefused, loads

KIND = "kind"
VERSION = "schema_version"
SHORT_HASH = 12
"""Hex digits of a workload's definition hash shown in labels: enough to tell definitions apart at a glance."""


WHOLE_MAX = 2**63 - 1
"""The largest whole number a row holds unless its field says less: what an int64 holds."""
BATCH_MAX = MAX_BATCH_SIZE
"""The largest batch or device count a row holds: the largest batch a sweep or a run accepts (2^40)."""


@dataclass(frozen=True)
class Bounds:
    """The values a number of a row may take: `low` and `high` (None: unbounded), and whether NaN
    and the infinities are among them. `words` say it in the error line ("a positive number")."""

    words: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    """True: `low` itself is out of range (a time of 0 s)."""
    finite: bool = True

    def problem(self, value: Any) -> str | None:
        """What `value` must be, where it is not; None where it is in range."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        if isinstance(value, int) and abs(value) > sys.float_info.max:
            return self.words  # beyond every range: no float holds it (math.isfinite overflows on it)
        if not math.isfinite(value):
            return None if not self.finite else self.words
        below = self.low is not None and (value < self.low or (self.low_open and value == self.low))
        above = self.high is not None and value > self.high
        return self.words if below or above else None


@dataclass(frozen=True)
class Length:
    """How many items a list of a row holds (an interval two, a bootstrap at least one draw)."""

    words: str
    least: int = 0
    most: int | None = None
    ordered: bool = False
    """True: the items (where none is None) rise, as an interval's [low, high] does."""

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, (list, tuple)):
            return None
        if len(value) < self.least or (self.most is not None and len(value) > self.most):
            return self.words
        present = [item for item in value if isinstance(item, (int, float)) and not isinstance(item, bool)]
        if self.ordered and len(present) == len(value) and any(b < a for a, b in zip(present, present[1:])):
            return self.words
        return None


FINITE = Bounds("a finite number")
"""Every float field without a marker of its own."""
WHOLE = Bounds(f"a whole number from 0 to {WHOLE_MAX}", 0, WHOLE_MAX)
"""Every int field without a marker of its own: counts, steps, samples, bytes, seeds."""
POSITIVE = Bounds("a positive finite number", 0, low_open=True)
NON_NEGATIVE = Bounds("a finite number of at least 0", 0)
SHARE = Bounds("a finite number from 0 to 1", 0, 1)
BATCH = Bounds(f"a whole number from 1 to {BATCH_MAX}", 1, BATCH_MAX)
SIGNED = Bounds(f"a whole number from {-WHOLE_MAX - 1} to {WHOLE_MAX}", -WHOLE_MAX - 1, WHOLE_MAX)
LOSS = Bounds("a number (NaN where the training diverged)", finite=False)
INTERVAL = Length("an interval [low, high] with low <= high", 2, 2, ordered=True)

Positive = Annotated[float, POSITIVE]
"""Seconds a step or a run took, samples/s, steps to a goal: a time of 0 or below is a broken row."""
NonNegative = Annotated[float, NON_NEGATIVE]
"""Seconds of an overhead, a compilation, a wait: 0 where there was none."""
Share = Annotated[float, SHARE]
Batch = Annotated[int, BATCH]
"""A batch, a per-device batch or a count of devices or ranks: at least 1."""
Signed = Annotated[int, SIGNED]
"""A whole number that may be below 0 (a score's change)."""
Loss = Annotated[float, LOSS]
"""A training loss or a validation metric: NaN is what a diverged training measured, so it is
kept, not refused."""
PositiveInterval = Annotated[list[Positive], INTERVAL]
"""A 95% interval of seconds, steps or samples."""
NonNegativeInterval = Annotated[list[NonNegative], INTERVAL]


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
class Provenance:
    """Where a row came from: the command that wrote it, the workload code it ran (its module,
    version and definition hash: `trainspeed.workloads.identity`) and the machine, with its load.

    A producer builds one (from the workload's identity, or from the summary of the run a row
    describes) and spreads it into each row it writes, `Row(..., **provenance.fields_of(Row))`,
    so every kind of row names these alike and no constructor writes them out. A kind of row
    records the ones it declares (a run's summary has no command; a fit of many runs no machine)."""

    command: str | None = None
    workload_module: str | None = None
    workload_version: str | None = None
    workload_sha256: str | None = None
    machine: Machine | None = None

    def fields_of(self, row_type: type) -> dict[str, Any]:
        """The fields `row_type` declares, by name, to spread into its constructor."""
        declared = {field.name for field in dataclasses.fields(row_type)}
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self) if field.name in declared}


@dataclass(frozen=True)
class Source:
    """Where a record came from: a file and its line (None for a whole-file JSON document)."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


def row_record(row: Row, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The row as the JSON object written to disk; `extra` fields come last and may not shadow.

    A number outside the range its field declares (a NaN where a finite number belongs) is
    ValueError here, before it is written: its readers would refuse the whole file, so a row
    that would poison the file it lands in is its writer's bug, named where it happens. A value
    that may legitimately be NaN says so on its type (`Loss`)."""
    out_of_range = _out_of_range(type(row), row, "")
    if out_of_range is not None:
        path, words, value = out_of_range
        raise ValueError(f"a {row.KIND} row whose field {path} is {_shown_json(value, 60)}, not {words}: its "
                         "readers would refuse the file it is written to")
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
    """JSON writes 3.0 as 3: an integer is a valid float (a bool is not), where a float holds it
    (one that does not is left an int, which the type check then names)."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return value
    return value


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
    out_of_range = _out_of_range(row_type, row, "")
    if out_of_range is not None:
        path, words, value = out_of_range
        raise UsageError(f"{source}: {kind} row: field {path} must be {words}, not {_shown_json(value, 60)} (the "
                         "file was edited or written by another program)")
    return row, extra


@cache
def _hints(data_class: type) -> dict[str, Any]:
    return typing.get_type_hints(data_class, include_extras=True)


def _markers(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """The type under `Annotated[...]`, and the range markers on it."""
    if typing.get_origin(annotation) is Annotated:
        return annotation.__origin__, tuple(m for m in annotation.__metadata__ if hasattr(m, "problem"))
    return annotation, ()


def _member(annotation: Any, value: Any) -> Any:
    """The member of a union that `value` (already checked to fit it) is of."""
    for member in typing.get_args(annotation):
        base = _markers(member)[0]
        origin = typing.get_origin(base) or base
        if member is type(None) or not isinstance(origin, type):
            continue
        if isinstance(value, origin) or (origin is float and isinstance(value, int) and not isinstance(value, bool)):
            return member
    return Any


def _out_of_range(annotation: Any, value: Any, path: str) -> tuple[str, str, Any] | None:
    """The first number (or list) under `value` outside the range its declared type gives it:
    (its dotted path, what it must be, the value); None where every one is within."""
    if value is None:
        return None
    base, markers = _markers(annotation)
    if isinstance(base, types.UnionType) or typing.get_origin(base) is typing.Union:
        return _out_of_range(_member(base, value), value, path)
    for marker in markers:
        words = marker.problem(value)
        if words is not None:
            return path, words, value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            found = _out_of_range(_hints(type(value)).get(field.name, Any), getattr(value, field.name),
                                  f"{path}.{field.name}" if path else field.name)
            if found is not None:
                return found
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if any(isinstance(marker, Bounds) for marker in markers):
            return None
        words = (FINITE if isinstance(value, float) else WHOLE).problem(value)
        return (path, words, value) if words is not None else None
    if isinstance(value, (list, tuple)):
        return _first_of(_items(base, len(value)), value, [f"{path}[{index}]" for index in range(len(value))])
    if isinstance(value, dict):
        args = typing.get_args(base)
        item = args[1] if len(args) == 2 else Any
        return _first_of([item] * len(value), list(value.values()), [f"{path}.{key}" for key in value])
    return None


def _items(annotation: Any, count: int) -> list[Any]:
    """The declared type of each item of a list or tuple (`tuple[int, ...]`, `list[float]`)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
        return list(args) + [Any] * (count - len(args))
    return [args[0] if args else Any] * count


def _first_of(annotations: Sequence[Any], values: Sequence[Any], paths: Sequence[str]) -> tuple[str, str, Any] | None:
    for annotation, value, path in zip(annotations, values, paths):
        found = _out_of_range(annotation, value, path)
        if found is not None:
            return found
    return None


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
    """A type as it is written (`float | None`, `list[int]`), whatever `typing` made of it."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " | ".join("None" if arg is type(None) else _type_name(arg) for arg in args)
    origin = typing.get_origin(annotation)
    if origin is not None and args:
        shown = ", ".join("..." if arg is Ellipsis else _type_name(arg) for arg in args)
        return f"{getattr(origin, '__name__', str(origin))}[{shown}]"
    return getattr(annotation, "__name__", str(annotation)).replace("typing.", "")


def read_records(path: str | os.PathLike) -> list[tuple[Any, Source]]:
    """Every JSON value of a file: one per line (JSON Lines), or the whole file as one document.

    Read by the one JSON policy (`trainspeed.user_json`): a file that is not UTF-8 text, a line that
    is not JSON, JSON nested too deeply to read and a number no float holds are each one UsageError
    naming the file (and the line)."""
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
            records.append((loads(line), Source(str(file), number)))
        except JSONRefused as refused:
            if refused.error is None:
                raise UsageError(f"{file}:{number}: {_refused_row(refused)}") from None
            if not records:
                document = _document(text, file)
                if document is not None:
                    return [(document, Source(str(file)))]
            raise UsageError(f"{file}:{number}: not a trainspeed result row (not JSON: {refused.error.msg} at column "
                             f"{refused.error.colno})") from None
    return records


def _refused_row(refused: JSONRefused) -> str:
    """Why JSON that parses no row is refused (a row's own words for nesting too deep)."""
    return "JSON nested too deeply to be a row" if refused.kind == JSONRefused.NESTING else str(refused)


def _document(text: str, file: Path) -> Any:
    """The file as one JSON document (pretty-printed JSON), or None when it is not JSON at all."""
    try:
        return loads(text)
    except JSONRefused as refused:
        if refused.syntax:
            return None
        raise UsageError(f"{file}: {_refused_row(refused)}") from None


def is_finite(value: Any) -> bool:
    """A number a table or figure can show: an int or float that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
