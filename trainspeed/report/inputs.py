"""What `trainspeed report` and `trainspeed plot` have read: every row in the dataclass its writer
defines, by kind, and the files it came from.

The parts build their sections from it, and a part that claims a directory (a run directory) adds
what it read there; reading the paths given is `reading.py`'s. This module knows neither the parts
nor any producer, so every part can name it, and it names none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from trainspeed.rows import Source

T = TypeVar("T")


@dataclass(frozen=True)
class Read(Generic[T]):
    """One row as read: its dataclass, where it came from, and the fields it carried beyond it."""

    row: T
    source: Source
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        value = getattr(self.row, name, None) if hasattr(self.row, name) else self.extra.get(name)
        return default if value is None else value

    @property
    def command(self) -> str | None:
        return self.get("command")


@dataclass
class ReportInputs:
    """Every row read, by kind, and what was given and read."""

    rows: dict[str, list[Read]] = field(default_factory=dict)
    """The rows read, by kind, in the order read."""
    files: list[str] = field(default_factory=list)
    """The inputs as given."""
    read: set[Path] = field(default_factory=set)
    """Every file read, resolved (an output may be none of them)."""

    def of(self, *row_types: type) -> list[Read]:
        """The rows of these dataclasses, in the order read (one type's, then the next's)."""
        return [read for row_type in row_types for read in self.rows.get(row_type.KIND, [])]  # type: ignore[attr-defined]

    def add(self, read: Read) -> None:
        self.rows.setdefault(type(read.row).KIND, []).append(read)  # type: ignore[attr-defined]

    @property
    def count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())
