"""The report's figures, one function per figure, each returning a matplotlib Figure; `svg_text`
turns one into the SVG the page inlines (text stays text: `svg.fonttype: none`).

Bench figures follow the study's conventions (`plot.py`): batch size on a log2 axis, a whisker
from the slowest to the fastest timed window on every point, an `invalid` row (a compilation
inside a timed window) as a hollow marker off the line, never as a normal point.
"""

from __future__ import annotations

import io
import math
import re
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter  # noqa: E402

from trainspeed.bench.ratios import RatioTable  # noqa: E402
from trainspeed.report.inputs import BenchRow, EvalRow, TrainRun  # noqa: E402
from trainspeed.report.plot import INVALID_LABEL, _draw, _label_batch_axis, _points  # noqa: E402
from trainspeed.report.study import StudyRow  # noqa: E402

GIB = 2**30
EVEN_RANK = 2.5
RANK_COLOURS = ("#2b8a3e", "#74b816", "#f59f00", "#e03131")
COLOURS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def svg_text(figure: Figure, salt: str) -> str:
    """The figure as an inline `<svg>` element (no XML prolog, no fixed size: the page scales it
    by its viewBox); `salt` keeps its element ids apart from the other figures' on one page."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    svg = text[text.index("<svg"):]
    root_end = svg.index(">")
    root = re.sub(r'\s(width|height)="[^"]*"', "", svg[:root_end])
    return root + svg[root_end:]


# --- bench rows ---------------------------------------------------------------------------------

DEFAULT_BASELINES: tuple[Callable[[str], bool], ...] = (
    lambda target: target == "cuda:eager:fp32",
    lambda target: target.endswith(":eager:fp32"),
    lambda target: ":eager:" in target,
)
"""The baseline of a group without --baseline: the study's (one GPU, eager fp32), else the first
eager fp32 target, else the first eager target, else the first series."""


def newest_per_series(rows: Sequence[BenchRow]) -> list[BenchRow]:
    """The newest row per (series, batch size): reruns replace older results, as in `bench`.
    Newest by the rows' timestamps (to the second), so the order of the input files does not
    matter; rows without one count as older, and of equal times the later one read wins."""
    newest: dict[tuple[str, int], BenchRow] = {}
    for row in sorted(rows, key=lambda r: (r.row.timestamp or "")[:19]):
        newest[(row.series, row.row.batch_size)] = row
    return list(newest.values())


def choose_baseline(rows: Sequence[BenchRow], baselines: Sequence[str] = ()) -> str:
    """The first of `baselines` (a series or a target name) with rows here, else the default rules;
    of a target's series, a device-fed one first, then the first to appear."""
    series = list(dict.fromkeys(row.series for row in rows))

    def first(chosen: list[BenchRow]) -> str:
        best = min(chosen, key=lambda row: (row.row.feed not in (None, "device"), series.index(row.series)))
        return best.series

    for baseline in baselines:
        if baseline in series:
            return baseline
        named = [row for row in rows if row.row.target == baseline]
        if named:
            return first(named)
    for rule in DEFAULT_BASELINES:
        chosen = [row for row in rows if rule(row.row.target) and row.row.is_measured]
        if chosen:
            return first(chosen)
    return series[0]


def plausible_mfu(row: BenchRow) -> float | None:
    """The row's MFU, unless it is above 100%: a peak below the achieved rate cannot be a peak (the
    bench refuses such a peak today; rows written before it did may still carry one)."""
    mfu = row.row.mfu
    return mfu if mfu is not None and mfu <= 1.0 else None


def series_table(rows: Sequence[BenchRow], baselines: Sequence[str] = ()) -> RatioTable:
    """`bench.ratios.ratio_table` over the report's series names (the target, feed and variant)."""
    latest = newest_per_series(rows)
    measured = [r for r in latest if r.row.is_measured]
    return RatioTable(
        baseline=choose_baseline(latest, baselines),
        batch_sizes=sorted({r.row.batch_size for r in latest}),
        targets=list(dict.fromkeys(r.series for r in latest)),
        samples_per_s={(r.series, r.row.batch_size): r.row.samples_per_s for r in measured},
        status={(r.series, r.row.batch_size): r.row.status for r in latest},
        spread={
            (r.series, r.row.batch_size): (r.row.samples_per_s_min, r.row.samples_per_s_max)
            for r in measured if r.row.samples_per_s_min is not None and r.row.samples_per_s_max is not None
        },
        short_windows=frozenset((r.series, r.row.batch_size) for r in measured if r.row.steps_capped),
    )


def _invalid(table: RatioTable) -> Callable[[str, int], bool]:
    return lambda series, batch: table.status.get((series, batch)) == "invalid"


def _finish_batch_axes(axes: plt.Axes, batch_sizes: list[int], has_invalid: bool, legend: bool = True) -> None:
    _label_batch_axis(axes, batch_sizes)
    axes.grid(True, alpha=0.3)
    if has_invalid:
        axes.plot([], [], "o", color="grey", markerfacecolor="none", label=INVALID_LABEL)
    if legend and axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)


def compact_number(value: float, _position: object = None) -> str:
    """Axis text for counts: 250k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _samples_axis(axes: plt.Axes) -> None:
    """Log scale where the values span more than a factor of 5, else linear; readable ticks."""
    low, high = axes.dataLim.y0, axes.dataLim.y1
    if low > 0 and high / low > 5:
        axes.set_yscale("log")
        axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        axes.yaxis.set_minor_formatter(NullFormatter())
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"))


def ratio_figure(table: RatioTable, workload: str) -> Figure:
    """The study's figure: throughput ratio to the baseline against log2(batch size)."""
    figure, axes = plt.subplots(figsize=(9, 4.6), constrained_layout=True)
    invalid = _invalid(table)

    def ratio_invalid(series: str, batch: int) -> bool:
        return invalid(series, batch) or invalid(table.baseline, batch)

    for index, series in enumerate(table.targets):
        points = _points(table, series, table.ratio, table.ratio_spread, ratio_invalid)
        _draw(axes, points, COLOURS[index % len(COLOURS)], series, "--" if series == table.baseline else "-")
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set(ylabel=f"throughput ratio to {table.baseline}", title=f"{workload}: training throughput vs {table.baseline}")
    _finish_batch_axes(axes, table.batch_sizes, "invalid" in table.status.values())
    return figure


def throughput_figure(table: RatioTable, rows: Sequence[BenchRow], workload: str) -> Figure:
    """Absolute samples/s (median window, whiskers slowest to fastest) and, where rows have it, MFU."""
    latest = {(r.series, r.row.batch_size): r for r in newest_per_series(rows)}
    has_mfu = any(plausible_mfu(r) is not None for r in latest.values())
    figure, axes_list = plt.subplots(1, 2 if has_mfu else 1, figsize=(13 if has_mfu else 9, 4.6),
                                     constrained_layout=True, squeeze=False)
    samples_axes = axes_list[0][0]
    invalid = _invalid(table)
    for index, series in enumerate(table.targets):
        colour = COLOURS[index % len(COLOURS)]
        points = _points(table, series, lambda s, b: table.samples_per_s.get((s, b)),
                         lambda s, b: table.spread.get((s, b)), invalid)
        _draw(samples_axes, points, colour, series, "-")
    samples_axes.set(ylabel="samples/s (median window; whiskers: slowest to fastest)",
                     title=f"{workload}: absolute throughput")
    _samples_axis(samples_axes)
    _finish_batch_axes(samples_axes, table.batch_sizes, "invalid" in table.status.values())
    if has_mfu:
        mfu_axes = axes_list[0][1]
        for index, series in enumerate(table.targets):
            rows_of = sorted((r for (s, _), r in latest.items()
                              if s == series and plausible_mfu(r) is not None and r.row.is_measured),
                             key=lambda r: r.row.batch_size)
            for hollow in (False, True):
                chosen = [r for r in rows_of if (r.row.status == "invalid") == hollow]
                if chosen:
                    mfu_axes.plot([math.log2(r.row.batch_size) for r in chosen], [plausible_mfu(r) for r in chosen],
                                  marker="o", color=COLOURS[index % len(COLOURS)], linestyle="none" if hollow else "-",
                                  markerfacecolor="none" if hollow else COLOURS[index % len(COLOURS)],
                                  label=None if hollow else series)
        mfu_axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        mfu_axes.set_ylim(bottom=0)
        mfu_axes.set(ylabel="MFU (achieved / peak TFLOP/s)", title=f"{workload}: model FLOPs utilisation (none above 100%)")
        _finish_batch_axes(mfu_axes, table.batch_sizes, "invalid" in table.status.values())
    return figure


def memory_figure(rows: Sequence[BenchRow], workload: str) -> Figure:
    """Peak device memory per series against batch size; an `oom` row is a red cross on the top
    edge, a `skipped` one (a smaller batch already ran out) a grey tick; the dotted line between
    the largest batch that fit and the first that did not is the series' OOM boundary."""
    latest = newest_per_series(rows)
    series_names = list(dict.fromkeys(r.series for r in latest))
    batch_sizes = sorted({r.row.batch_size for r in latest})
    figure, axes = plt.subplots(figsize=(9, 4.6), constrained_layout=True)
    top = max((r.row.peak_memory_bytes or 0) / GIB for r in latest) or 1.0
    top *= 1.15
    for index, series in enumerate(series_names):
        colour = COLOURS[index % len(COLOURS)]
        own = sorted((r for r in latest if r.series == series), key=lambda r: r.row.batch_size)
        fit = [r for r in own if r.row.status in ("ok", "invalid") and r.row.peak_memory_bytes is not None]
        if fit:
            axes.plot([math.log2(r.row.batch_size) for r in fit], [r.row.peak_memory_bytes / GIB for r in fit],
                      marker="o", color=colour, label=series)
        oom = [r for r in own if r.row.status == "oom"]
        skipped = [r for r in own if r.row.status == "skipped"]
        if oom:
            axes.plot([math.log2(r.row.batch_size) for r in oom], [top] * len(oom), "x", color="#d62728",
                      markersize=10, markeredgewidth=2, clip_on=False)
            fitted = [r.row.batch_size for r in own if r.row.status in ("ok", "invalid") and r.row.batch_size < oom[0].row.batch_size]
            if fitted:
                boundary = (math.log2(max(fitted)) + math.log2(oom[0].row.batch_size)) / 2
                axes.axvline(boundary, color=colour, linestyle=":", linewidth=1.2)
        if skipped:
            axes.plot([math.log2(r.row.batch_size) for r in skipped], [top] * len(skipped), "|", color="grey",
                      markersize=10, clip_on=False)
    if any(r.row.status == "oom" for r in latest):
        axes.plot([], [], "x", color="#d62728", label="out of memory (oom row)")
        axes.plot([], [], ":", color="grey", label="OOM boundary")
    if any(r.row.status == "skipped" for r in latest):
        axes.plot([], [], "|", color="grey", label="skipped (a smaller batch ran out)")
    axes.set_ylim(0, top * 1.05)
    axes.set(ylabel="peak device memory (GiB)", title=f"{workload}: peak memory and the OOM boundary")
    _finish_batch_axes(axes, batch_sizes, False)
    return figure


def first_step_figure(rows: Sequence[BenchRow], workload: str) -> Figure:
    """The first step alone (it includes torch.compile's or XLA's compilation) per batch size."""
    latest = newest_per_series(rows)
    series_names = list(dict.fromkeys(r.series for r in latest))
    figure, axes = plt.subplots(figsize=(9, 4.6), constrained_layout=True)
    for index, series in enumerate(series_names):
        own = sorted((r for r in latest if r.series == series and r.row.first_step_s is not None),
                     key=lambda r: r.row.batch_size)
        if own:
            axes.plot([math.log2(r.row.batch_size) for r in own], [r.row.first_step_s for r in own], marker="o",
                      color=COLOURS[index % len(COLOURS)], label=series)
    _samples_axis(axes)
    axes.set(ylabel="first step (s, includes compilation)", title=f"{workload}: first-step (compile) time")
    _finish_batch_axes(axes, sorted({r.row.batch_size for r in latest}), False)
    return figure


# --- training runs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainBar:
    """One training configuration: the median of its repeats, their spread, and the ratio to the
    one-device baseline of the same workload, size and data kind."""

    label: str
    runs: list[TrainRun]
    samples_per_s: float
    low: float
    high: float
    baseline: "TrainBar | None" = None

    @property
    def is_baseline(self) -> bool:
        return self.baseline is not None and self.baseline.runs is self.runs

    @property
    def ratio(self) -> float | None:
        return self.samples_per_s / self.baseline.samples_per_s if self.baseline else None

    def median(self, name: str) -> float | None:
        values = [run.get(name) for run in self.runs if run.get(name) is not None]
        return statistics.median(values) if values else None


def train_rate(run: TrainRun) -> float:
    """End-to-end samples/s: all samples over the wall time from the first to the last step."""
    return float(run.summary["end_to_end_samples_per_s"])


def train_bars(runs: Sequence[TrainRun]) -> list[TrainBar]:
    groups: dict[tuple, list[TrainRun]] = {}
    for run in runs:
        groups.setdefault(run.config_key, []).append(run)
    bars = []
    for key, members in groups.items():
        rates = [train_rate(run) for run in members]
        first = members[0]
        label = (f"{first.get('workload')} {first.get('size')}: {first.label}"
                 + (f" ({len(members)} runs)" if len(members) > 1 else ""))
        bars.append(TrainBar(label, members, statistics.median(rates), min(rates), max(rates)))
    ordered = sorted(bars, key=lambda b: (b.runs[0].config_key[:2], b.runs[0].synthetic, b.runs[0].get("world_size"),
                                          b.runs[0].get("target"), b.runs[0].get("batch_size_per_device")))
    with_baseline = []
    for bar in ordered:
        first = bar.runs[0]
        candidates = [b for b in ordered if b.runs[0].get("world_size") == 1
                      and b.runs[0].config_key[:2] == first.config_key[:2] and b.runs[0].synthetic == first.synthetic]
        same = [b for b in candidates if b.runs[0].config_key[2] == first.config_key[2]
                and b.runs[0].get("batch_size_per_device") == first.get("batch_size_per_device")]
        baseline = (same or candidates or [None])[0]
        with_baseline.append(TrainBar(bar.label, bar.runs, bar.samples_per_s, bar.low, bar.high, baseline))
    return with_baseline


def training_figure(bars: Sequence[TrainBar]) -> Figure:
    """The study's bar chart (N devices vs one device: "11.23x"), and where each configuration's
    ranks waited for data."""
    figure, (rate_axes, wait_axes) = plt.subplots(1, 2, figsize=(13, 1.6 + 0.5 * len(bars)), constrained_layout=True,
                                                  sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    positions = list(range(len(bars)))[::-1]
    for position, bar in zip(positions, bars):
        colour = "#adb5bd" if bar.is_baseline or bar.baseline is None else "#1971c2"
        rate_axes.barh(position, bar.samples_per_s, color=colour,
                       xerr=[[bar.samples_per_s - bar.low], [bar.high - bar.samples_per_s]] if len(bar.runs) > 1 else None,
                       capsize=3)
        text = f"{bar.samples_per_s:,.0f}/s"
        if bar.is_baseline:
            text += "  (one-device baseline)"
        elif bar.ratio is not None:
            text += f"  {bar.ratio:.2f}x"
        rate_axes.annotate(text, (bar.high, position), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        mean_wait = bar.median("data_wait_fraction")
        worst_wait = bar.median("data_wait_fraction_worst_rank")
        if mean_wait is not None:
            wait_axes.barh(position + 0.18, mean_wait, height=0.35, color="#f59f00",
                           label="mean over ranks" if position == positions[0] else None)
        if worst_wait is not None:
            wait_axes.barh(position - 0.18, worst_wait, height=0.35, color="#e8590c",
                           label="worst rank" if position == positions[0] else None)
    rate_axes.set_yticks(positions, [bar.label for bar in bars], fontsize=8)
    rate_axes.set_xlim(0, max(bar.high for bar in bars) * 1.35)
    rate_axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
    rate_axes.set(xlabel="end-to-end samples/s (all ranks; ratio to the one-device run)",
                  title="End-to-end training: N devices vs one")
    wait_axes.xaxis.set_major_formatter(PercentFormatter(1.0))
    wait_axes.set(xlabel="share of time waiting for data", title="Data wait")
    for axes in (rate_axes, wait_axes):
        axes.grid(True, axis="x", alpha=0.3)
    if wait_axes.get_legend_handles_labels()[0]:
        wait_axes.legend(fontsize=8)
    return figure


def curves_figure(runs: Sequence[TrainRun]) -> Figure:
    """Training loss and validation metrics per run, against samples seen."""
    curves = [("train", "loss", "training loss (logged windows)")] if any(
        "loss" in p.values for run in runs for p in run.train_curve) else []
    curves += [("val", name, f"validation {name}") for name in ("loss", "accuracy")
               if any(name in p.values for run in runs for p in run.val_curve)]
    figure, axes_list = plt.subplots(1, len(curves), figsize=(4.6 * len(curves) + 1, 4.2), constrained_layout=True,
                                     squeeze=False)
    for index, run in enumerate(runs):
        colour = COLOURS[index % len(COLOURS)]
        batch = run.get("global_batch", 1)
        label = f"{run.get('workload')} {run.get('size')}: {run.label}"
        for (kind, name, _), axes in zip(curves, axes_list[0]):
            points = [p for p in (run.train_curve if kind == "train" else run.val_curve) if name in p.values]
            if points:
                axes.plot([p.step * batch for p in points], [p.values[name] for p in points], color=colour, label=label,
                          marker="o" if kind == "val" else None)
    for (kind, name, title), axes in zip(curves, axes_list[0]):
        axes.set(xlabel="samples seen", ylabel=title, title=title[0].upper() + title[1:])
        axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
        if name == "accuracy":
            axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=7)
    return figure


# --- remote vs local ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RemotePair:
    remote: BenchRow
    local: BenchRow | None

    @property
    def series(self) -> str:
        remote = self.remote
        return (f"{remote.local_target} over {remote.get('link')} "
                f"({remote.get('transport')}, {remote.get('in_flight')} in flight, {remote.row.feed or 'device'}-fed)")

    @property
    def ratio(self) -> float | None:
        """Local samples/s over remote samples/s: what direct access gains (the study: about 5x)."""
        if self.local is None or self.remote.row.status != "ok" or self.local.row.status != "ok":
            return None
        return self.local.row.samples_per_s / self.remote.row.samples_per_s


def remote_pairs(rows: Sequence[BenchRow]) -> list[RemotePair]:
    """Each remote row with its local counterpart: from the same bench run where it measured one
    (side by side, minutes apart at most), else the newest such row of any input."""
    def key(row: BenchRow, target: str) -> tuple:
        return (row.row.workload, row.row.size, target, row.row.feed or "device", row.row.batch_size)

    local_rows = [r for r in rows if not r.is_remote]
    same_run = {(r.row.run_id, *key(r, r.row.target)): r for r in local_rows}
    newest = {key(r, r.row.target): r for r in newest_per_series(local_rows)}
    pairs = []
    for remote in newest_per_series([r for r in rows if r.is_remote]):
        wanted = key(remote, remote.local_target)
        pairs.append(RemotePair(remote, same_run.get((remote.row.run_id, *wanted), newest.get(wanted))))
    return sorted(pairs, key=lambda p: (p.series, p.remote.row.batch_size))


def remote_figure(pairs: Sequence[RemotePair]) -> Figure:
    """Local over remote samples/s per batch size, and where a remote step's time goes (the device's
    own step against the wire)."""
    figure, (ratio_axes, step_axes) = plt.subplots(1, 2, figsize=(13, 4.6), constrained_layout=True)
    names = list(dict.fromkeys(p.series for p in pairs))
    batch_sizes = sorted({p.remote.row.batch_size for p in pairs})
    for index, name in enumerate(names):
        colour = COLOURS[index % len(COLOURS)]
        own = [p for p in pairs if p.series == name]
        measured = [p for p in own if p.ratio is not None]
        if measured:
            ratio_axes.plot([math.log2(p.remote.row.batch_size) for p in measured], [p.ratio for p in measured],
                            marker="o", color=colour, label=name)
        timed = [p for p in own if p.remote.row.status == "ok" and p.remote.row.step_time_s is not None]
        if timed:
            xs = [math.log2(p.remote.row.batch_size) for p in timed]
            client = [p.remote.row.step_time_s * 1e3 for p in timed]
            step_axes.plot(xs, client, marker="o", color=colour, label=f"{name}: step seen by the client")
            server = [(x, p.remote.get("server_step_s")) for x, p in zip(xs, timed) if p.remote.get("server_step_s") is not None]
            if server:
                step_axes.plot([x for x, _ in server], [s * 1e3 for _, s in server], marker="s", linestyle="--",
                               color=colour, markerfacecolor="none", label=f"{name}: step on the device")
    ratio_axes.axhline(1.0, color="grey", linewidth=0.8)
    ratio_axes.set(ylabel="local samples/s / remote samples/s", title="What direct access gains")
    _samples_axis(step_axes)
    step_axes.set(ylabel="step time (ms); the gap is the wire", title="Remote step: client vs device")
    for axes in (ratio_axes, step_axes):
        _finish_batch_axes(axes, batch_sizes, False)
    return figure


# --- self-play evaluation -----------------------------------------------------------------------

def eval_figure(rows: Sequence[EvalRow]) -> Figure:
    """Each evaluation's mean rank with its 95% interval (1 best, 4 worst, 2.5 even), and its rank shares."""
    count = len(rows)
    figure, (rank_axes, share_axes) = plt.subplots(
        1, 2, figsize=(13, 1.6 + 0.45 * count), constrained_layout=True, sharey=True,
        gridspec_kw={"width_ratios": [3, 2]})
    positions = list(range(count))[::-1]
    for position, row in zip(positions, rows):
        mean = float(row.get("mean_rank"))
        interval = row.get("mean_rank_ci95")
        error = [[mean - interval[0]], [interval[1] - mean]] if isinstance(interval, list) and len(interval) == 2 else None
        rank_axes.errorbar(mean, position, xerr=error, fmt="o", color="black", capsize=4)
        rank_axes.annotate(f"{mean:.3f}", (mean, position), xytext=(0, 6), textcoords="offset points",
                           ha="center", fontsize=8)
        left = 0.0
        for rank, (share, colour) in enumerate(zip(row.get("rank_distribution"), RANK_COLOURS), start=1):
            share_axes.barh(position, share, left=left, color=colour, label=f"rank {rank}" if position == positions[0] else None)
            left += share
    rank_axes.axvline(EVEN_RANK, color="grey", linestyle="--", linewidth=0.8)
    rank_axes.set_yticks(positions, [f"{row.label}, {row.get('games')} games" for row in rows], fontsize=8)
    rank_axes.set(xlabel="mean rank (1 best, 4 worst; 2.5 even), 95% interval clustered by deal", xlim=(1, 4),
                  title="Self-play strength")
    rank_axes.grid(True, axis="x", alpha=0.3)
    share_axes.set(xlabel="share of games at each rank", xlim=(0, 1), title="Rank distribution")
    figure.legend(*share_axes.get_legend_handles_labels(), fontsize=8, ncols=4, loc="outside lower right")
    return figure


# --- batch-size study ---------------------------------------------------------------------------

def batch_summaries(runs: Sequence[StudyRow]) -> list[StudyRow]:
    """Per global batch, its best learning rate (lowest mean validation loss over seeds) and that
    rate's metrics averaged over seeds: what the study script's `batch-study-batch` rows hold, for
    rows of single runs."""
    summaries = []
    for batch in sorted({r.get("global_batch") for r in runs}):
        by_lr: dict[object, list[StudyRow]] = {}
        for run in runs:
            if run.get("global_batch") == batch:
                by_lr.setdefault(run.get("lr"), []).append(run)
        scored = {lr: [r.get("val_loss") for r in members if r.get("val_loss") is not None] for lr, members in by_lr.items()}
        best = min(by_lr, key=lambda lr: statistics.mean(scored[lr]) if scored[lr] else math.inf)
        chosen = by_lr[best]
        fields: dict[str, object] = {"global_batch": batch, "lr": best, "seeds": [r.get("seed") for r in chosen]}
        for name in ("val_loss", "val_accuracy", "equal_steps_val_loss", "equal_steps_val_accuracy", "wall_s", "mean_rank"):
            values = [r.get(name) for r in chosen if r.get(name) is not None]
            if values:
                fields[name] = statistics.mean(values)
        summaries.append(StudyRow(role="batch", fields=fields, source=chosen[0].source))
    return summaries


def study_figure(rows: Sequence[StudyRow]) -> Figure:
    """Validation loss and accuracy at equal samples (filled) and equal steps (hollow), wall time
    and playing strength, against the global batch. Every run is a small point; a global batch's
    summary (its best learning rate over seeds) a large one joined by a line."""
    runs = [r for r in rows if r.role == "run"]
    batches = sorted((r for r in rows if r.role == "batch"), key=lambda r: r.get("global_batch")) or batch_summaries(runs)
    panels = [("val_loss", "equal_steps_val_loss", "validation loss"),
              ("val_accuracy", "equal_steps_val_accuracy", "validation accuracy"),
              ("wall_s", None, "training wall time (s)"),
              ("mean_rank", None, "mean rank (95% interval)")]
    panels = [p for p in panels if any(r.get(p[0]) is not None for r in rows)]
    figure, axes_list = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1, 4.4), constrained_layout=True,
                                     squeeze=False)
    all_batches = sorted({r.get("global_batch") for r in rows if r.get("global_batch") is not None})
    lrs = sorted({r.get("lr") for r in runs if r.get("lr") is not None})
    for axes, (name, equal_steps, label) in zip(axes_list[0], panels):
        for run in runs:
            value = run.get(name)
            if value is None:
                continue
            colour = COLOURS[lrs.index(run.get("lr")) % len(COLOURS)] if run.get("lr") in lrs else "grey"
            x = math.log2(run.get("global_batch")) + 0.04 * ((run.get("seed") or 0) % 5 - 2)
            interval = run.rank_interval if name == "mean_rank" else None
            error = [[value - interval[0]], [interval[1] - value]] if interval else None
            axes.errorbar(x, value, yerr=error, fmt="o", markersize=4, color=colour, capsize=2, alpha=0.8)
            if equal_steps and run.get(equal_steps) is not None:
                axes.plot(x, run.get(equal_steps), "o", markersize=5, color=colour, markerfacecolor="none")
        summary = [b for b in batches if b.get(name) is not None]
        if summary:
            xs = [math.log2(b.get("global_batch")) for b in summary]
            axes.plot(xs, [b.get(name) for b in summary], "-", color="black", label="best LR, mean over seeds")
            if name == "mean_rank":
                for x, b in zip(xs, summary):
                    if b.rank_interval:
                        axes.errorbar(x, b.get(name), yerr=[[b.get(name) - b.rank_interval[0]],
                                                            [b.rank_interval[1] - b.get(name)]], color="black", capsize=5)
            if equal_steps and any(b.get(equal_steps) is not None for b in summary):
                axes.plot([x for x, b in zip(xs, summary) if b.get(equal_steps) is not None],
                          [b.get(equal_steps) for b in summary if b.get(equal_steps) is not None],
                          "--", color="black", label="same, at equal steps")
        if name == "mean_rank":
            axes.axhline(EVEN_RANK, color="grey", linestyle="--", linewidth=0.8)
        if name == "val_accuracy":
            axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        axes.set(ylabel=label, title=label[0].upper() + label[1:])
        axes.set_xticks([math.log2(b) for b in all_batches], [str(b) for b in all_batches])
        axes.set_xlabel("global batch (log2 scale)")
        axes.grid(True, alpha=0.3)
    first = axes_list[0][0]
    for lr in lrs:
        first.plot([], [], "o", color=COLOURS[lrs.index(lr) % len(COLOURS)], label=f"run, peak LR {lr:.3g}")
    if any(r.get("equal_steps_val_loss") is not None for r in rows):
        first.plot([], [], "o", color="grey", markerfacecolor="none", label="hollow: at equal steps")
    if first.get_legend_handles_labels()[0]:
        first.legend(fontsize=7)
    return figure
