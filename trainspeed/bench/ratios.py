"""Throughput ratios to a baseline target, per batch size: the study's main comparison."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainspeed.bench.results import ResultRow


@dataclass(frozen=True)
class RatioTable:
    baseline: str
    batch_sizes: list[int]
    targets: list[str]
    """Series names (`ResultRow.series`): the target, plus the feed for host-fed rows."""
    samples_per_s: dict[tuple[str, int], float]
    status: dict[tuple[str, int], str]
    spread: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)
    """(slowest, fastest) window's samples/s, where the row has them."""
    short_windows: frozenset[tuple[str, int]] = frozenset()
    """Configurations whose windows the cap on steps per window left shorter than asked."""

    def ratio(self, target: str, batch_size: int) -> float | None:
        base = self.samples_per_s.get((self.baseline, batch_size))
        value = self.samples_per_s.get((target, batch_size))
        return value / base if base and value is not None else None

    def ratio_spread(self, target: str, batch_size: int) -> tuple[float, float] | None:
        """The slowest and fastest window over the baseline's median: how far a ratio can move
        with the target's own window-to-window spread."""
        base = self.samples_per_s.get((self.baseline, batch_size))
        spread = self.spread.get((target, batch_size))
        return (spread[0] / base, spread[1] / base) if base and spread else None


def latest_rows(rows: list[ResultRow]) -> list[ResultRow]:
    """The newest row per (workload, size, target, feed, batch size): reruns replace older results."""
    newest: dict[tuple, ResultRow] = {}
    for row in rows:
        newest[(row.workload, row.size, row.series, row.batch_size)] = row
    return list(newest.values())


def _baseline_series(series: list[str], rows: list[ResultRow], baseline: str | None) -> str:
    """A series name as given, else the first series of that target (`--baseline cpu:eager:fp32`
    names the host-fed series when a run has no device-fed one)."""
    if baseline is None or baseline in series:
        return baseline or series[0]
    return next((row.series for row in rows if row.target == baseline), baseline)


def ratio_table(rows: list[ResultRow], baseline: str | None = None) -> RatioTable:
    rows = latest_rows(rows)
    series = list(dict.fromkeys(row.series for row in rows))
    return RatioTable(
        baseline=_baseline_series(series, rows, baseline),
        batch_sizes=sorted({row.batch_size for row in rows}),
        targets=series,
        samples_per_s={(r.series, r.batch_size): r.samples_per_s for r in rows if r.is_measured},
        status={(r.series, r.batch_size): r.status for r in rows},
        spread={
            (r.series, r.batch_size): (r.samples_per_s_min, r.samples_per_s_max)
            for r in rows
            if r.is_measured and r.samples_per_s_min is not None and r.samples_per_s_max is not None
        },
        short_windows=frozenset((r.series, r.batch_size) for r in rows if r.is_measured and r.steps_capped),
    )


def format_table(table: RatioTable) -> str:
    """Plain-text table: samples/s and the ratio to the baseline, or the status where unmeasured."""
    width = max(16, *(len(t) + 2 for t in table.targets))
    lines = [f"samples/s (ratio to {table.baseline})", "batch".rjust(7) + "".join(t.rjust(width) for t in table.targets)]
    for batch_size in table.batch_sizes:
        cells = []
        for target in table.targets:
            value = table.samples_per_s.get((target, batch_size))
            status = table.status.get((target, batch_size), "-")
            if value is None:
                cells.append(status.rjust(width))
                continue
            ratio = table.ratio(target, batch_size)
            mark = ("!" if status == "invalid" else "") + ("~" if (target, batch_size) in table.short_windows else "")
            text = f"{value:,.0f}{mark}" + (f" ({ratio:.2f}x)" if ratio is not None else "")
            cells.append(text.rjust(width))
        lines.append(str(batch_size).rjust(7) + "".join(cells))
    if any(s == "invalid" for s in table.status.values()):
        lines.append("! invalid: a compilation happened inside a timed window")
    if table.short_windows:
        lines.append("~ windows shorter than --min-window-s: --max-steps-per-window stopped them")
    return "\n".join(lines)
