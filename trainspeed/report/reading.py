"""Reading what `trainspeed report` and `trainspeed plot` are given: result files and directories,
every row by the reader of its kind (`RowKind`) into the dataclass its writer defines.

The kinds come from the parts given (`trainspeed.kinds` lists every producer's): this module knows
none of them. A directory is one a part claims (a run directory), or a folder of result files and
such directories (`trainspeed study all --out DIR` writes one), read one level deep. A row of an
unknown kind or schema version, a field of the wrong type, a line that is not JSON: each is one
error naming the file and the line. Fields a row carries beyond its dataclass are kept (`extra`)
and shown in the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from trainspeed.errors import UsageError
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.part import ReportPart, RowKind
from trainspeed.rows import Source, parse_row, read_records, record_kind

RESULT_SUFFIXES = (".jsonl", ".json")


def kinds_of(parts: Sequence[ReportPart]) -> dict[str, RowKind]:
    """Every kind the parts read; two parts may share a kind only as one and the same reader."""
    kinds: dict[str, RowKind] = {}
    for part in parts:
        for row_kind in part.kinds:
            known = kinds.setdefault(row_kind.kind, row_kind)
            if known is not row_kind:
                raise ValueError(f"two readers of the {row_kind.kind!r} row: {known} and {row_kind}")
    return kinds


@dataclass
class Reader:
    """Reads paths into `inputs` with the parts' readers."""

    parts: Sequence[ReportPart]
    inputs: ReportInputs = field(default_factory=ReportInputs)

    def __post_init__(self) -> None:
        self.kinds = kinds_of(self.parts)

    def add_record(self, record: Any, source: Source) -> None:
        kind, _ = record_kind(record, source)
        row_kind = self.kinds.get(kind)
        if row_kind is None:
            raise UsageError(f"{source}: a row of kind {kind!r}, which the report does not read "
                             f"(it reads {', '.join(sorted(self.kinds))})")
        row, extra = (row_kind.parse(record, source) if row_kind.parse
                      else parse_row(row_kind.row_type, record, source))
        if row_kind.check is not None:
            row_kind.check(row, source)
        self.inputs.add(row_kind.wrap(row, source, extra) if row_kind.wrap else Read(row, source, extra))

    def read_file(self, path: Path) -> None:
        for record, source in read_records(path):
            self.add_record(record, source)
        self.inputs.read.add(path.resolve())

    def read_claimed(self, directory: Path, nested: bool) -> bool:
        """Whether a part read `directory` as its own (a nested one it may pass over)."""
        return any(part.read_directory(directory, self.inputs, nested) for part in self.parts if part.read_directory)

    def read_folder(self, folder: Path) -> None:
        """A folder of result files and directories the parts read, one level deep; other entries are skipped."""
        entries = sorted(folder.iterdir())
        files = [p for p in entries if p.is_file() and p.suffix in RESULT_SUFFIXES and not p.name.startswith(".")]
        for path in files:
            self.read_file(path)
        claimed = [p for p in entries if p.is_dir() and self.read_claimed(p, nested=True)]
        if not files and not claimed:
            kinds = [part.directory_kind for part in self.parts if part.directory_kind]
            markers = "".join(f"{marker}, " for marker, _ in kinds)
            nouns = "".join(f" or {noun}" for _, noun in kinds)
            raise UsageError(f"{folder}: a directory without {markers}result files (*.jsonl, *.json){nouns} in it")

    def read_path(self, path: Path) -> None:
        if path.is_dir():
            if not self.read_claimed(path, nested=False):
                self.read_folder(path)
        elif path.is_file():
            self.read_file(path)
        elif path.exists():
            raise UsageError(f"{path}: not a regular file (a pipe, a device or the like); give a result file, "
                             "a run directory or a folder of them")
        else:
            raise UsageError(f"{path}: no such file or directory")
        self.inputs.files.append(str(path))


def read_inputs(paths: Sequence[Path], parts: Sequence[ReportPart]) -> ReportInputs:
    """Every row of every path; a missing path, an unknown row or a bad line is one UsageError."""
    if not paths:
        raise UsageError(
            "report: no results given; pass result files, run directories or a study's folder, "
            "e.g. trainspeed report results/*.jsonl runs/* --out report.html")
    reader = Reader(parts)
    for path in paths:
        reader.read_path(path)
    if reader.inputs.count == 0:
        raise UsageError(f"no rows in {', '.join(str(p) for p in paths)}")
    return reader.inputs
