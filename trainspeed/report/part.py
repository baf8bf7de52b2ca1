"""How a producer plugs its rows into the report: the kinds of row it writes and the sections (and
the figure of `trainspeed plot`) it builds from them.

Each producer (the bench, the trainer, each evaluation, each study) keeps its row dataclasses in a
module that imports no torch, and beside them a `ReportPart`; the registry (`trainspeed.kinds`)
lists the parts. The report reads every row by the reader of its kind and hands each part the rows
as read; it knows no producer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section

if TYPE_CHECKING:
    from trainspeed.rows import Source


@dataclass(frozen=True)
class RowKind:
    """One kind of row: the dataclass it is read into, and what a row must hold beyond its types."""

    row_type: type
    """A row dataclass (its `KIND` and `SCHEMA_VERSION` on the class)."""
    parse: Callable[[dict[str, Any], "Source"], tuple[Any, dict[str, Any]]] | None = None
    """The row and its extra fields from a JSON object; None: `trainspeed.rows.parse_row`."""
    check: Callable[[Any, "Source"], None] | None = None
    """Raises UsageError, naming the row's source, for a row that fits its types but not its sense."""
    wrap: Callable[[Any, "Source", dict[str, Any]], Read] | None = None
    """The read row (a subclass of `Read` with what a producer derives from its rows); None: `Read`."""

    @property
    def kind(self) -> str:
        return self.row_type.KIND  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PlotRequest:
    """`trainspeed plot RESULTS`: where the figure goes, and the bench's options."""

    results: Path
    stem: Path
    baseline: str | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class ReportPart:
    """One producer's share of the page."""

    name: str
    kinds: tuple[RowKind, ...]
    sections: Callable[[ReportInputs, Sequence[str]], list[Section]]
    """The part's sections from every row read (and the baselines given with --baseline); a
    section without figures or tables is left off the page."""
    counts: Callable[[ReportInputs], list[tuple[str, int]]]
    """What the page's header counts of this part's rows ("12 bench rows")."""
    read_directory: Callable[[Path, ReportInputs, bool], bool] | None = None
    """Reads a directory that is this producer's (a run directory) and says so; False: not one.
    Called with `nested` True for a directory inside a folder given, which it may pass over."""
    directory_kind: tuple[str, str] | None = None
    """(the file that marks such a directory, what they are called), for the message about a
    folder that holds none: ("summary.json", "run directories")."""
    plot: Callable[[ReportInputs, PlotRequest], list[Path]] | None = None
    """`trainspeed plot`'s figure of this part's rows; the paths written."""
    plot_first: int = 0
    """A file with rows of several parts is plotted by the part with the highest number: a study's
    file holds its evaluations' rows too, and its own figure shows them."""
