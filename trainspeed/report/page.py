"""The page model of `trainspeed report`: sections of figures and sortable tables, and the cells
of those tables.

A section is present only when its rows are. A table cell keeps the text it shows apart from the
value its column sorts by, and a row whose status is not `ok` shows its status where its numbers
would be: an `invalid` row's samples/s is never printed. Every producer builds its sections from
these (`trainspeed.report.part`); the renderer (`render.py`) turns them into one page.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from trainspeed.rows import SHORT_HASH, is_finite

NOT_RECORDED = "command not recorded in the rows"
GIB = 2**30


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | str | None = None
    """The value a numeric column sorts by (None: the cell sorts after every number)."""
    status: str | None = None
    """Set on a cell that shows a row's status (or a flag) instead of a number."""
    numeric: bool = False
    title: str | None = None
    """The whole text where the cell shows a shortened one (a long error)."""


@dataclass(frozen=True)
class Provenance:
    """What a figure or a table rests on: commands, machines, files."""

    commands: list[str]
    unrecorded: int
    """How many of its rows carry no command."""
    machines: list[str]
    sources: list[str]


@dataclass(frozen=True)
class Table:
    id: str
    caption: str
    columns: list[tuple[str, bool]]
    """(header, numeric) per column."""
    rows: list[list[Cell]]
    provenance: Provenance | None = None


@dataclass(frozen=True)
class FigureBlock:
    id: str
    caption: str
    svg: str
    provenance: Provenance


@dataclass
class Section:
    id: str
    title: str
    intro: str
    figures: list[FigureBlock] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


# --- cells --------------------------------------------------------------------------------------

def text(value: Any) -> Cell:
    return Cell("" if value is None else str(value), sort=None if value is None else str(value))


def number(value: Any, form: str = "{:,.0f}") -> Cell:
    if not is_finite(value):
        return Cell("–", numeric=True)
    return Cell(form.format(value), sort=float(value), numeric=True)


def ratio_cell(value: float | None, missing: str = "–") -> Cell:
    """A ratio with two decimals, or two significant digits below 0.1 (0.0022x, not 0.00x)."""
    if not is_finite(value):
        return Cell(missing, numeric=True)
    return number(value, "{:.2f}x" if abs(value) >= 0.1 else "{:.2g}x")


def readable(value: float | None) -> Cell:
    """Samples/s: thousands separated, small rates with three significant digits."""
    if not is_finite(value):
        return Cell("–", numeric=True)
    return number(value, "{:,.0f}" if abs(value) >= 100 else "{:.3g}")


def percent(value: float | None, form: str = "{:.1f}%") -> Cell:
    return number(value * 100 if is_finite(value) else None, form)


ERROR_SHOWN = 60
"""Characters of a row's error shown in its status cell; the whole error is the cell's tooltip."""


def status_cell(status: str, error: str | None = None) -> Cell:
    if not error:
        return Cell(status, sort=status, status=status)
    shown = error if len(error) <= ERROR_SHOWN else error[:ERROR_SHOWN].rstrip() + "…"
    return Cell(f"{status}: {shown}", sort=status, status=status, title=f"{status}: {error}")


def measured(status: str, cell: Cell) -> Cell:
    """A measurement of a row: the number when the row is `ok`, else the row's status."""
    return cell if status == "ok" else Cell(status, status=status, numeric=True)


def interval(values: Sequence[float] | None, form: str) -> str:
    if values and len(values) == 2 and all(is_finite(v) for v in values):
        return f"[{form.format(values[0])}, {form.format(values[1])}]"
    return ""


def value_cell(value: Any) -> Cell:
    """A value of any JSON type: numbers formatted, lists and objects as (shortened) JSON."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return text(value)
    if isinstance(value, int):
        return number(value, "{:,d}")
    if isinstance(value, float):
        return number(value, "{:,.4g}" if abs(value) < 1e6 else "{:,.0f}")
    shown = json.dumps(value)
    return Cell(shown if len(shown) <= ERROR_SHOWN else shown[:ERROR_SHOWN] + "…", title=shown)


def workload_label(name: str, sha256: str | None, size: str) -> str:
    """`name@hash12 size`: two workloads of one name but different definitions get two labels (rows
    written before rows carried the hash have the bare name)."""
    return f"{name}@{sha256[:SHORT_HASH]} {size}" if sha256 else f"{name} {size}"


def slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
