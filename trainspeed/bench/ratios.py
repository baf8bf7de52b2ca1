"""Throughput ratios, the study's main comparison, taken only where they mean something.

A ratio divides a row by the baseline measured in the same run (the same `run_id`: one bench
invocation, or commands measured as one comparison), at the same batch size. A row whose run has
no baseline row gets no ratio: two runs hours apart on a shared machine differ by more than most
of what a ratio is meant to show. Remote against local is one ratio too, remote / local, of rows
of one run.

Where one configuration was measured several times, figures and plain tables show its newest
row: the latest timestamp, and of equal timestamps the one read last (`newest`).
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Sequence, TypeVar

from trainspeed.bench.results import ResultRow

NO_BASELINE = "no baseline in this run"
REMOTE_PREFIX = "remote:"
LOCAL_FAMILIES = ("cpu", "cuda", "xla", "jax")
"""The built-in families whose devices are local (the report reads rows without importing the
targets, which need torch; a test keeps this equal to the registry's)."""
Item = TypeVar("Item")
SeriesName = Callable[[ResultRow], str]


def _local(target: str) -> bool:
    """A target of a built-in local family (not remote, not a reference peer's own name)."""
    return target.split(":")[0] in LOCAL_FAMILIES


DEFAULT_BASELINES: tuple[Callable[[str], bool], ...] = (
    lambda target: target == "cuda:eager:fp32",
    lambda target: _local(target) and target.endswith(":eager:fp32"),
    lambda target: _local(target) and ":eager:" in target,
)
"""A table's baseline when none is named: the study's (one GPU, eager fp32), else the first local
eager fp32 target, else the first local eager target, else the first series."""


def timestamp_key(text: str | None) -> float:
    """Seconds since the epoch of an ISO timestamp (a naive one read as UTC); rows without a
    readable one count as older than any that has one."""
    try:
        moment = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return -math.inf
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def newest(items: Iterable[Item], key: Callable[[Item], Hashable], timestamp: Callable[[Item], str | None]) -> list[Item]:
    """The newest item per key: the latest timestamp; of equal timestamps, the one that came last."""
    chosen: dict[Hashable, tuple[float, int, Item]] = {}
    for order, item in enumerate(items):
        rank = (timestamp_key(timestamp(item)), order)
        current = chosen.get(key(item))
        if current is None or rank >= current[:2]:
            chosen[key(item)] = (*rank, item)
    return [item for _, _, item in sorted(chosen.values(), key=lambda entry: entry[1])]


def latest_rows(rows: Sequence[ResultRow], series: SeriesName = lambda row: row.series) -> list[ResultRow]:
    """The newest row per (workload, size, series, batch size)."""
    return newest(rows, lambda row: (row.workload, row.workload_sha256, row.size, series(row), row.batch_size),
                  lambda row: row.timestamp)


def choose_baseline(rows: Sequence[ResultRow], preferred: Sequence[str] = (),
                    series: SeriesName = lambda row: row.series) -> str:
    """The first of `preferred` (a series or a target) with rows here, else the default rules; of a
    target's series, a device-fed one first, then the first to appear."""
    names = list(dict.fromkeys(series(row) for row in rows))

    def first(chosen: list[ResultRow]) -> str:
        """Device-fed before host-fed, the plain target before its variants, then the first seen."""
        return series(min(chosen, key=lambda row: (row.feed not in (None, "device"), series(row) != row.target,
                                                   names.index(series(row)))))

    for baseline in preferred:
        if baseline in names:
            return baseline
        named = [row for row in rows if row.target == baseline]
        if named:
            return first(named)
    for rule in DEFAULT_BASELINES:
        chosen = [row for row in rows if rule(row.target) and row.is_measured]
        if chosen:
            return first(chosen)
    return names[0]


@dataclass(frozen=True)
class RatioTable:
    """One workload's rows: the newest per (series, batch size) for figures, every row's ratio to
    the baseline of its own run for tables."""

    baseline: str
    batch_sizes: list[int]
    targets: list[str]
    """Series names, in the order they first appear."""
    newest: dict[tuple[str, int], ResultRow]
    baselines: dict[tuple[str, int], ResultRow] = field(default_factory=dict)
    """(run id, batch size) -> the baseline series' newest measured row in that run."""

    def row(self, series: str, batch_size: int) -> ResultRow | None:
        return self.newest.get((series, batch_size))

    def samples_per_s(self, series: str, batch_size: int) -> float | None:
        row = self.row(series, batch_size)
        return row.samples_per_s if row is not None and row.is_measured else None

    def status(self, series: str, batch_size: int) -> str | None:
        row = self.row(series, batch_size)
        return row.status if row is not None else None

    def spread(self, series: str, batch_size: int) -> tuple[float, float] | None:
        row = self.row(series, batch_size)
        if row is None or not row.is_measured or row.samples_per_s_min is None or row.samples_per_s_max is None:
            return None
        return row.samples_per_s_min, row.samples_per_s_max

    def short_window(self, series: str, batch_size: int) -> bool:
        row = self.row(series, batch_size)
        return bool(row is not None and row.is_measured and row.steps_capped)

    def baseline_of(self, row: ResultRow) -> ResultRow | None:
        """The baseline row measured in `row`'s run at its batch size (None: the run has none)."""
        return self.baselines.get((row.run_id, row.batch_size))

    def row_ratio(self, row: ResultRow) -> float | None:
        base = self.baseline_of(row)
        if base is None or not row.is_measured or not base.samples_per_s:
            return None
        return row.samples_per_s / base.samples_per_s

    def ratio(self, series: str, batch_size: int) -> float | None:
        row = self.row(series, batch_size)
        return self.row_ratio(row) if row is not None else None

    def ratio_invalid(self, series: str, batch_size: int) -> bool:
        """The ratio rests on an invalid row: this series' or its run's baseline."""
        row = self.row(series, batch_size)
        base = self.baseline_of(row) if row is not None else None
        return any(r is not None and r.status == "invalid" for r in (row, base))

    def row_ratio_spread(self, row: ResultRow) -> tuple[float, float] | None:
        """The row's slowest and fastest window over its run's baseline median: how far its ratio can
        move with its own window-to-window spread."""
        base = self.baseline_of(row)
        if (base is None or not base.samples_per_s or not row.is_measured or row.samples_per_s_min is None
                or row.samples_per_s_max is None):
            return None
        return row.samples_per_s_min / base.samples_per_s, row.samples_per_s_max / base.samples_per_s

    def ratio_spread(self, series: str, batch_size: int) -> tuple[float, float] | None:
        row = self.row(series, batch_size)
        return self.row_ratio_spread(row) if row is not None else None


def ratio_table(rows: Sequence[ResultRow], baseline: str | Sequence[str] | None = None,
                series: SeriesName = lambda row: row.series) -> RatioTable:
    """The table of one workload's rows; `baseline` is a series or target name (or a preference
    order of them), None for the default rules."""
    preferred = [baseline] if isinstance(baseline, str) else list(baseline or ())
    latest = latest_rows(rows, series)
    names = list(dict.fromkeys(series(row) for row in rows))
    latest.sort(key=lambda row: names.index(series(row)))
    chosen = choose_baseline(latest, preferred, series)
    runs = newest([row for row in rows if series(row) == chosen and row.is_measured],
                  lambda row: (row.run_id, row.batch_size), lambda row: row.timestamp)
    return RatioTable(
        baseline=chosen,
        batch_sizes=sorted({row.batch_size for row in latest}),
        targets=list(dict.fromkeys(series(row) for row in latest)),
        newest={(series(row), row.batch_size): row for row in latest},
        baselines={(row.run_id, row.batch_size): row for row in runs},
    )


def format_table(table: RatioTable) -> str:
    """Plain-text table: samples/s and the ratio to the baseline of the same run, or the status
    where unmeasured."""
    width = max(16, *(len(t) + 2 for t in table.targets))
    lines = [f"samples/s (ratio to {table.baseline} in the same run)",
             "batch".rjust(7) + "".join(t.rjust(width) for t in table.targets)]
    no_baseline = False
    for batch_size in table.batch_sizes:
        cells = []
        for target in table.targets:
            value = table.samples_per_s(target, batch_size)
            if value is None:
                cells.append((table.status(target, batch_size) or "-").rjust(width))
                continue
            ratio = table.ratio(target, batch_size)
            mark = ("!" if table.status(target, batch_size) == "invalid" else "") + (
                "~" if table.short_window(target, batch_size) else "")
            if ratio is None:
                no_baseline = True
            text = f"{value:,.0f}{mark}" + (f" ({ratio:.2f}x)" if ratio is not None else " (-)")
            cells.append(text.rjust(width))
        lines.append(str(batch_size).rjust(7) + "".join(cells))
    if any(table.status(t, b) == "invalid" for t in table.targets for b in table.batch_sizes):
        lines.append("! invalid: a compilation happened inside a timed window")
    if any(table.short_window(t, b) for t in table.targets for b in table.batch_sizes):
        lines.append("~ windows shorter than --min-window-s: --max-steps-per-window stopped them")
    if no_baseline:
        lines.append(f"(-) {NO_BASELINE}")
    return "\n".join(lines)


# --- remote against local -----------------------------------------------------------------------

def inner_target(target: str) -> str:
    """The target a remote one runs on its server: `remote:HOST:PORT/TARGET[/SWITCHES]` -> TARGET."""
    if not target.startswith(REMOTE_PREFIX):
        return target
    parts = target[len(REMOTE_PREFIX):].split("/")
    return parts[1] if len(parts) > 1 else parts[0]


def remote_over_local(remote: ResultRow, local: ResultRow | None) -> float | None:
    """Remote samples/s over local samples/s (below 1: what the remote path costs); None unless
    both rows are `ok`."""
    if local is None or remote.status != "ok" or local.status != "ok" or not local.samples_per_s:
        return None
    return remote.samples_per_s / local.samples_per_s


@dataclass(frozen=True)
class RemotePair:
    remote: ResultRow
    local: ResultRow | None
    """The local row of the remote row's own run: the same inner target, batch and feed."""

    @property
    def ratio(self) -> float | None:
        return remote_over_local(self.remote, self.local)


def remote_configuration(row: ResultRow) -> tuple:
    """What makes two remote rows the same configuration: not the server's address (a new server
    gets a new port), but the inner target, the link, the steps in flight, the feed, the batch."""
    return (row.workload, row.workload_sha256, row.size, inner_target(row.target), row.link, row.in_flight,
            row.feed or "device", row.batch_size)


def remote_pairs(rows: Sequence[ResultRow]) -> list[RemotePair]:
    """The newest row of every remote configuration, each with the local row of its own run."""
    local = {(row.run_id, row.workload, row.workload_sha256, row.size, row.target, row.feed or "device",
              row.batch_size): row
             for row in newest([r for r in rows if not r.is_remote],
                               lambda r: (r.run_id, r.workload, r.workload_sha256, r.size, r.target, r.feed, r.batch_size),
                               lambda r: r.timestamp)}
    remote = newest([row for row in rows if row.is_remote], remote_configuration, lambda row: row.timestamp)
    return [RemotePair(row, local.get((row.run_id, row.workload, row.workload_sha256, row.size,
                                       inner_target(row.target), row.feed or "device", row.batch_size)))
            for row in remote]
