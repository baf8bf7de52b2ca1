"""The report's figures, one function per figure, each returning a matplotlib Figure; `svg_text`
turns one into the SVG the page inlines (text stays text: `svg.fonttype: none`).

Bench figures follow the study's conventions: batch size on a log2 axis, a whisker from the
slowest to the fastest timed window on every point, an `invalid` row (a compilation inside a timed
window) as a hollow marker off the line, never as a normal point. A ratio point is drawn only where
the row's own run measured the baseline. Labels are plain text: a `$` in a target or workload name
is a dollar sign, never matplotlib's mathtext.
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
matplotlib.rcParams["text.parse_math"] = False
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter  # noqa: E402

from trainspeed.bench.ratios import RatioTable, RemotePair, inner_target  # noqa: E402
from trainspeed.evaluate.agreement import MahjongAgreementRow  # noqa: E402
from trainspeed.evaluate.mahjong import MahjongEvalRow  # noqa: E402
from trainspeed.report.inputs import TrainRun  # noqa: E402
from trainspeed.studies.batch_size import BatchSizeBatchRow, BatchSizeRunRow, BatchSizeStrengthRow  # noqa: E402

GIB = 2**30
EVEN_RANK = 2.5
RANK_COLOURS = ("#2b8a3e", "#74b816", "#f59f00", "#e03131")
COLOURS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
INVALID_LABEL = "hollow: invalid (compiled inside a timed window)"
Point = tuple[int, float, float, float, bool]
"""(batch size, value, slowest window, fastest window, invalid)."""


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


# --- drawing shared by the bench figures ----------------------------------------------------------

def readable_number(value: float, _position: object = None) -> str:
    """Tick text for samples/s: 1,000 not 10^3; small rates keep their digits."""
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:g}"
    return f"{value:.2g}"


def compact_number(value: float, _position: object = None) -> str:
    """Axis text for counts: 250k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _points(table: RatioTable, series: str, value: Callable[[str, int], float | None],
            spread: Callable[[str, int], tuple[float, float] | None], invalid: Callable[[str, int], bool]) -> list[Point]:
    points = []
    for batch_size in table.batch_sizes:
        y = value(series, batch_size)
        if y is None:
            continue
        low, high = spread(series, batch_size) or (y, y)
        points.append((batch_size, y, min(low, y), max(high, y), invalid(series, batch_size)))
    return points


def _draw(axes: Axes, points: list[Point], color: str, label: str, linestyle: str) -> None:
    """Valid points as a line with whiskers; invalid ones as hollow markers with whiskers, unjoined."""
    for invalid in (False, True):
        chosen = [p for p in points if p[4] == invalid]
        if not chosen:
            continue
        whiskers = [[p[1] - p[2] for p in chosen], [p[3] - p[1] for p in chosen]]
        axes.errorbar([math.log2(p[0]) for p in chosen], [p[1] for p in chosen], yerr=whiskers, color=color,
                      marker="o", capsize=3, elinewidth=1, linestyle="none" if invalid else linestyle,
                      markerfacecolor="none" if invalid else color, label=None if invalid else label)


def label_batch_axis(axes: Axes, batch_sizes: list[int]) -> None:
    powers = sorted({b.bit_length() - 1 for b in batch_sizes if b & (b - 1) == 0})
    if len(powers) == len(batch_sizes):  # every batch size is 2^k: a tick each, written out
        axes.set_xticks(powers, [str(2**k) for k in powers])
    else:
        axes.xaxis.set_major_formatter(FuncFormatter(lambda k, _: f"{2**k:,.0f}"))
    axes.set_xlabel("batch size (log2 scale)")


def _finish_batch_axes(axes: Axes, batch_sizes: list[int], has_invalid: bool) -> None:
    label_batch_axis(axes, batch_sizes)
    axes.grid(True, alpha=0.3)
    if has_invalid:
        axes.plot([], [], "o", color="grey", markerfacecolor="none", label=INVALID_LABEL)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)


def _has_invalid(table: RatioTable) -> bool:
    return any(table.status(s, b) == "invalid" for s in table.targets for b in table.batch_sizes)


def _samples_axis(axes: Axes) -> None:
    """Log scale where the values span more than a factor of 5, else linear; readable ticks."""
    low, high = axes.dataLim.y0, axes.dataLim.y1
    if low > 0 and high / low > 5:
        axes.set_yscale("log")
        axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        axes.yaxis.set_minor_formatter(NullFormatter())
    axes.yaxis.set_major_formatter(FuncFormatter(readable_number))


def draw_ratio(axes: Axes, table: RatioTable, title: str) -> None:
    """The study's figure: throughput ratio to the baseline of the same run against log2(batch size)."""
    for index, series in enumerate(table.targets):
        points = _points(table, series, table.ratio, table.ratio_spread, table.ratio_invalid)
        _draw(axes, points, COLOURS[index % len(COLOURS)], series, "--" if series == table.baseline else "-")
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set(ylabel=f"throughput ratio to {table.baseline} (same run)", title=title)
    _finish_batch_axes(axes, table.batch_sizes, _has_invalid(table))


def draw_samples(axes: Axes, table: RatioTable, title: str) -> None:
    """Absolute samples/s of the median window, whiskers from the slowest to the fastest."""
    invalid = lambda series, batch: table.status(series, batch) == "invalid"  # noqa: E731
    for index, series in enumerate(table.targets):
        _draw(axes, _points(table, series, table.samples_per_s, table.spread, invalid),
              COLOURS[index % len(COLOURS)], series, "-")
    axes.set(ylabel="samples/s (median window; whiskers: slowest to fastest)", title=title)
    _samples_axis(axes)
    _finish_batch_axes(axes, table.batch_sizes, _has_invalid(table))


# --- bench rows ---------------------------------------------------------------------------------

def ratio_figure(table: RatioTable, workload: str) -> Figure:
    figure, axes = plt.subplots(figsize=(9, 4.6), constrained_layout=True)
    draw_ratio(axes, table, f"{workload}: training throughput vs {table.baseline}")
    return figure


def bench_figure(table: RatioTable, workload: str) -> Figure:
    """`trainspeed plot`'s figure: the study's ratio figure beside absolute samples/s."""
    figure, (ratio_axes, samples_axes) = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True)
    draw_ratio(ratio_axes, table, f"Training throughput vs {table.baseline} ({workload})")
    draw_samples(samples_axes, table, "Absolute throughput")
    return figure


def plausible_mfu(mfu: float | None) -> float | None:
    """An MFU above 100% is no MFU: a peak below the achieved rate cannot be a peak (the bench
    refuses such a peak; rows written before it did may still carry one)."""
    return mfu if mfu is not None and mfu <= 1.0 else None


def throughput_figure(table: RatioTable, workload: str) -> Figure:
    """Absolute samples/s and, where rows have it, MFU."""
    rows = list(table.newest.values())
    has_mfu = any(plausible_mfu(r.mfu) is not None for r in rows)
    figure, axes_list = plt.subplots(1, 2 if has_mfu else 1, figsize=(13 if has_mfu else 9, 4.6),
                                     constrained_layout=True, squeeze=False)
    draw_samples(axes_list[0][0], table, f"{workload}: absolute throughput")
    if has_mfu:
        mfu_axes = axes_list[0][1]
        for index, series in enumerate(table.targets):
            colour = COLOURS[index % len(COLOURS)]
            own = sorted((r for (s, _), r in table.newest.items()
                          if s == series and r.is_measured and plausible_mfu(r.mfu) is not None),
                         key=lambda r: r.batch_size)
            for hollow in (False, True):
                chosen = [r for r in own if (r.status == "invalid") == hollow]
                if chosen:
                    mfu_axes.plot([math.log2(r.batch_size) for r in chosen], [r.mfu for r in chosen], marker="o",
                                  color=colour, linestyle="none" if hollow else "-",
                                  markerfacecolor="none" if hollow else colour, label=None if hollow else series)
        mfu_axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        mfu_axes.set_ylim(bottom=0)
        mfu_axes.set(ylabel="MFU (achieved / peak TFLOP/s)", title=f"{workload}: model FLOPs utilisation (none above 100%)")
        _finish_batch_axes(mfu_axes, table.batch_sizes, _has_invalid(table))
    return figure


def memory_figure(table: RatioTable, workload: str) -> Figure:
    """Peak device memory per series against batch size; an `oom` row is a red cross on the top
    edge, a `skipped` one (a smaller batch already ran out) a grey tick; the dotted line between
    the largest batch that fit and the first that did not is the series' OOM boundary."""
    rows = list(table.newest.values())
    figure, axes = plt.subplots(figsize=(9, 4.6), constrained_layout=True)
    top = 1.15 * (max((r.peak_memory_bytes or 0) / GIB for r in rows) or 1.0)
    for index, series in enumerate(table.targets):
        colour = COLOURS[index % len(COLOURS)]
        own = sorted((r for (s, _), r in table.newest.items() if s == series), key=lambda r: r.batch_size)
        fit = [r for r in own if r.status in ("ok", "invalid") and r.peak_memory_bytes is not None]
        if fit:
            axes.plot([math.log2(r.batch_size) for r in fit], [r.peak_memory_bytes / GIB for r in fit],
                      marker="o", color=colour, label=series)
        oom = [r for r in own if r.status == "oom"]
        skipped = [r for r in own if r.status == "skipped"]
        if oom:
            axes.plot([math.log2(r.batch_size) for r in oom], [top] * len(oom), "x", color="#d62728",
                      markersize=10, markeredgewidth=2, clip_on=False)
            fitted = [r.batch_size for r in own if r.status in ("ok", "invalid") and r.batch_size < oom[0].batch_size]
            if fitted:
                axes.axvline((math.log2(max(fitted)) + math.log2(oom[0].batch_size)) / 2, color=colour,
                             linestyle=":", linewidth=1.2)
        if skipped:
            axes.plot([math.log2(r.batch_size) for r in skipped], [top] * len(skipped), "|", color="grey",
                      markersize=10, clip_on=False)
    if any(r.status == "oom" for r in rows):
        axes.plot([], [], "x", color="#d62728", label="out of memory (oom row)")
        axes.plot([], [], ":", color="grey", label="OOM boundary")
    if any(r.status == "skipped" for r in rows):
        axes.plot([], [], "|", color="grey", label="skipped (a smaller batch ran out)")
    axes.set_ylim(0, top * 1.05)
    axes.set(ylabel="peak device memory (GiB)", title=f"{workload}: peak memory and the OOM boundary")
    _finish_batch_axes(axes, table.batch_sizes, False)
    return figure


def first_step_figure(table: RatioTable, workload: str) -> Figure:
    """The first step alone (it includes torch.compile's or XLA's compilation) per batch size."""
    figure, axes = plt.subplots(figsize=(9, 4.6), constrained_layout=True)
    for index, series in enumerate(table.targets):
        own = sorted((r for (s, _), r in table.newest.items() if s == series and r.first_step_s is not None),
                     key=lambda r: r.batch_size)
        if own:
            axes.plot([math.log2(r.batch_size) for r in own], [r.first_step_s for r in own], marker="o",
                      color=COLOURS[index % len(COLOURS)], label=series)
    _samples_axis(axes)
    axes.set(ylabel="first step (s, includes compilation)", title=f"{workload}: first-step (compile) time")
    _finish_batch_axes(axes, table.batch_sizes, False)
    return figure


# --- training -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainBar:
    """One training configuration: the median of its runs' end-to-end samples/s, their spread, and
    its ratio to the one-rank configuration of the same scaling study (None: none to compare with)."""

    label: str
    rates: list[float]
    data_wait: list[float]
    data_wait_worst: list[float]
    ratio: float | None = None
    is_baseline: bool = False

    @property
    def samples_per_s(self) -> float:
        return statistics.median(self.rates)

    @property
    def low(self) -> float:
        return min(self.rates)

    @property
    def high(self) -> float:
        return max(self.rates)


def training_figure(bars: Sequence[TrainBar]) -> Figure:
    """End-to-end samples/s per configuration ("N ranks vs one" only within one scaling study), and
    where each configuration's ranks waited for data."""
    figure, (rate_axes, wait_axes) = plt.subplots(1, 2, figsize=(13, 1.6 + 0.5 * len(bars)), constrained_layout=True,
                                                  sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    positions = list(range(len(bars)))[::-1]
    for position, bar in zip(positions, bars):
        colour = "#1971c2" if bar.ratio is not None and not bar.is_baseline else "#adb5bd"
        rate_axes.barh(position, bar.samples_per_s, color=colour,
                       xerr=[[bar.samples_per_s - bar.low], [bar.high - bar.samples_per_s]] if len(bar.rates) > 1 else None,
                       capsize=3)
        text = f"{bar.samples_per_s:,.0f}/s"
        if bar.is_baseline:
            text += "  (the study's one-rank run)"
        elif bar.ratio is not None:
            text += f"  {bar.ratio:.2f}x one rank"
        rate_axes.annotate(text, (bar.high, position), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        if bar.data_wait:
            wait_axes.barh(position + 0.18, statistics.median(bar.data_wait), height=0.35, color="#f59f00",
                           label="mean over ranks" if position == positions[0] else None)
        if bar.data_wait_worst:
            wait_axes.barh(position - 0.18, statistics.median(bar.data_wait_worst), height=0.35, color="#e8590c",
                           label="worst rank" if position == positions[0] else None)
    rate_axes.set_yticks(positions, [bar.label for bar in bars], fontsize=8)
    rate_axes.set_xlim(0, max(bar.high for bar in bars) * 1.45)
    rate_axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
    rate_axes.set(xlabel="end-to-end samples/s (all ranks; ratio to one rank of the same scaling study)",
                  title="End-to-end training: N ranks vs one")
    wait_axes.xaxis.set_major_formatter(PercentFormatter(1.0))
    wait_axes.set(xlabel="share of time waiting for data", title="Data wait")
    for axes in (rate_axes, wait_axes):
        axes.grid(True, axis="x", alpha=0.3)
    if wait_axes.get_legend_handles_labels()[0]:
        wait_axes.legend(fontsize=8)
    return figure


COLUMNS = 4


def curves_figure(runs: Sequence[TrainRun]) -> Figure:
    """Training loss and every validation metric the runs' workloads name, per run, against step."""
    names = [("train", "loss")] if any(run.train_curve for run in runs) else []
    names += [("val", name) for name in dict.fromkeys(name for run in runs for record in run.val_curve
                                                      for name in record.metrics)]
    columns = min(COLUMNS, len(names))
    rows = math.ceil(len(names) / columns)
    figure, axes_grid = plt.subplots(rows, columns, figsize=(4.4 * columns + 1, 3.8 * rows), constrained_layout=True,
                                     squeeze=False)
    axes_list = [axes for row in axes_grid for axes in row]
    for index, run in enumerate(runs):
        colour = COLOURS[index % len(COLOURS)]
        for (kind, name), axes in zip(names, axes_list):
            if kind == "train":
                points = [(record.step, record.loss) for record in run.train_curve]
            else:
                points = [(record.step, record.metrics[name]) for record in run.val_curve if name in record.metrics]
            if points:
                axes.plot(*zip(*points), color=colour, label=run.label, marker="o" if kind == "val" else None)
    for (kind, name), axes in zip(names, axes_list):
        title = "training loss (logged windows)" if kind == "train" else f"validation {name}"
        axes.set(xlabel="step", ylabel=title, title=title[0].upper() + title[1:])
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=7)
    for axes in axes_list[len(names):]:
        axes.set_visible(False)
    return figure


# --- remote vs local ----------------------------------------------------------------------------

def remote_series(pair: RemotePair) -> str:
    row = pair.remote
    return f"{inner_target(row.target)} over {row.link} ({row.in_flight} in flight, {row.feed or 'device'}-fed)"


def remote_figure(pairs: Sequence[RemotePair]) -> Figure:
    """Remote over local samples/s per batch size (local: the same run's row), and where a remote
    step's time goes: the device's own step against the whole step the client saw. A row whose
    wire time is flagged gets no device point: its two times do not cover the same steps."""
    figure, (ratio_axes, step_axes) = plt.subplots(1, 2, figsize=(14, 5.2), constrained_layout=True)
    names = list(dict.fromkeys(remote_series(p) for p in pairs))
    batch_sizes = sorted({p.remote.batch_size for p in pairs})
    for index, name in enumerate(names):
        colour = COLOURS[index % len(COLOURS)]
        own = sorted((p for p in pairs if remote_series(p) == name), key=lambda p: p.remote.batch_size)
        measured = [p for p in own if p.ratio is not None]
        if measured:
            ratio_axes.plot([math.log2(p.remote.batch_size) for p in measured], [p.ratio for p in measured],
                            marker="o", color=colour, label=name)
        timed = [p.remote for p in own if p.remote.status == "ok" and p.remote.step_time_s is not None]
        if timed:
            step_axes.plot([math.log2(r.batch_size) for r in timed], [r.step_time_s * 1e3 for r in timed], marker="o",
                           color=colour, label=f"{name}: step seen by the client")
            device = [r for r in timed if r.server_step_s is not None and not r.wire_flagged]
            if device:
                step_axes.plot([math.log2(r.batch_size) for r in device], [r.server_step_s * 1e3 for r in device],
                               marker="s", linestyle="--", color=colour, markerfacecolor="none",
                               label=f"{name}: step on the device")
            flagged = [r for r in timed if r.wire_flagged]
            if flagged:
                step_axes.plot([math.log2(r.batch_size) for r in flagged], [r.step_time_s * 1e3 for r in flagged],
                               "x", color="#d62728", markersize=9, markeredgewidth=2)
    if any(p.remote.wire_flagged for p in pairs):
        step_axes.plot([], [], "x", color="#d62728", label="wire time flagged (device time not comparable)")
    ratio_axes.axhline(1.0, color="grey", linewidth=0.8)
    ratio_axes.set(ylabel="remote samples/s / local samples/s (same run)", title="What the remote path costs")
    _samples_axis(step_axes)
    step_axes.set(ylabel="step time (ms); the gap is the wire", title="Remote step: client vs device")
    for axes in (ratio_axes, step_axes):
        label_batch_axis(axes, batch_sizes)
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=6)
    return figure


# --- self-play evaluation -----------------------------------------------------------------------

def eval_label(row: MahjongEvalRow) -> str:
    """`<run name> @<step> vs <opponent>` (run directories by their last part)."""
    policy = row.policy.rstrip("/").rsplit("/", 1)[-1] or row.policy
    opponent = row.opponent.rstrip("/").rsplit("/", 1)[-1] if "/" in row.opponent else row.opponent
    return f"{policy} @{row.policy_step} vs {opponent}"


def eval_figure(rows: Sequence[MahjongEvalRow]) -> Figure:
    """Each evaluation's mean rank with its 95% interval (1 best, 4 worst, 2.5 even), and its rank shares."""
    count = len(rows)
    figure, (rank_axes, share_axes) = plt.subplots(
        1, 2, figsize=(13, 1.6 + 0.45 * count), constrained_layout=True, sharey=True,
        gridspec_kw={"width_ratios": [3, 2]})
    positions = list(range(count))[::-1]
    for position, row in zip(positions, rows):
        interval = row.mean_rank_ci95
        error = [[row.mean_rank - interval[0]], [interval[1] - row.mean_rank]] if interval and len(interval) == 2 else None
        rank_axes.errorbar(row.mean_rank, position, xerr=error, fmt="o", color="black", capsize=4)
        rank_axes.annotate(f"{row.mean_rank:.3f}", (row.mean_rank, position), xytext=(0, 6), textcoords="offset points",
                           ha="center", fontsize=8)
        left = 0.0
        for rank, (share, colour) in enumerate(zip(row.rank_distribution, RANK_COLOURS), start=1):
            share_axes.barh(position, share, left=left, color=colour, label=f"rank {rank}" if position == positions[0] else None)
            left += share
    rank_axes.axvline(EVEN_RANK, color="grey", linestyle="--", linewidth=0.8)
    rank_axes.set_yticks(positions, [f"{eval_label(row)}, {row.games} games" for row in rows], fontsize=8)
    rank_axes.set(xlabel="mean rank (1 best, 4 worst; 2.5 even), 95% interval clustered by deal", xlim=(1, 4),
                  title="Self-play strength")
    rank_axes.grid(True, axis="x", alpha=0.3)
    share_axes.set(xlabel="share of games at each rank", xlim=(0, 1), title="Rank distribution")
    figure.legend(*share_axes.get_legend_handles_labels(), fontsize=8, ncols=4, loc="outside lower right")
    return figure


def curve_key(row: MahjongEvalRow) -> tuple:
    """Evaluations of checkpoints of one run against one opponent on the same deals form one curve."""
    return (row.policy.rstrip("/"), row.opponent, row.eval_seed, row.games, row.temperature)


def strength_curves(rows: Sequence[MahjongEvalRow]) -> dict[tuple, list[MahjongEvalRow]]:
    """The curves with at least two checkpoints, each sorted by samples seen (the newest row of a step)."""
    curves: dict[tuple, dict[int, MahjongEvalRow]] = {}
    for row in rows:
        curves.setdefault(curve_key(row), {})[row.policy_step] = row
    return {key: [by_step[step] for step in sorted(by_step)] for key, by_step in curves.items() if len(by_step) > 1}


def strength_curve_figure(curves: dict[tuple, list[MahjongEvalRow]]) -> Figure:
    """Mean rank against samples seen, one line per run and opponent, every point on the same deals."""
    figure, axes = plt.subplots(figsize=(9, 4.5), constrained_layout=True)
    for key, rows in curves.items():
        xs = [row.policy_samples for row in rows]
        ys = [row.mean_rank for row in rows]
        lows = [row.mean_rank - (row.mean_rank_ci95 or [row.mean_rank])[0] for row in rows]
        highs = [(row.mean_rank_ci95 or [0, row.mean_rank])[1] - row.mean_rank for row in rows]
        axes.errorbar(xs, ys, yerr=[lows, highs], fmt="o-", capsize=3,
                      label=f"{eval_label(rows[-1]).rsplit(' @', 1)[0]} vs {rows[-1].opponent.rsplit('/', 1)[-1]}, "
                            f"{rows[-1].games} games (seed {rows[-1].eval_seed})")
    axes.axhline(EVEN_RANK, color="grey", linestyle="--", linewidth=0.8)
    axes.set(xscale="log", xlabel="samples the policy trained on", ylabel="mean rank (1 best, 4 worst), 95% interval",
             title="Strength as training goes on (the same deals at every checkpoint)")
    axes.xaxis.set_major_formatter(FuncFormatter(compact_number))
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7)
    return figure


AGREEMENT_KINDS = ("overall", "discard_building", "discard_folding", "riichi", "win", "pon", "chi", "kan", "pass")


def agreement_figure(rows: Sequence[MahjongAgreementRow]) -> Figure:
    """Each policy's agreement with its teacher per kind of decision (bars), the samples of each kind above."""
    figure, axes = plt.subplots(figsize=(11, 4.2), constrained_layout=True)
    width = 0.8 / max(1, len(rows))
    for index, row in enumerate(rows):
        kinds = [kind for kind in AGREEMENT_KINDS if row.agreement.get(kind) is not None]
        positions = [AGREEMENT_KINDS.index(kind) + (index - (len(rows) - 1) / 2) * width for kind in kinds]
        label = f"{row.policy.rstrip('/').rsplit('/', 1)[-1]} @{row.policy_step} ({row.split}, {row.samples:,} decisions)"
        axes.bar(positions, [row.agreement[kind] for kind in kinds], width=width, label=label)
    axes.set_xticks(range(len(AGREEMENT_KINDS)), [kind.replace("_", "\n") for kind in AGREEMENT_KINDS], fontsize=8)
    axes.set(ylim=(0, 1.05), ylabel="agreement with the teacher's action", title="Agreement per kind of decision")
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(fontsize=7)
    return figure


# --- batch-size study ---------------------------------------------------------------------------

FRAMING_STYLES = {"equal samples": "-", "equal steps": ":", "equal wall time": "--"}


def study_figure(runs: Sequence[BatchSizeRunRow], batches: Sequence[BatchSizeBatchRow],
                 strengths: Sequence[BatchSizeStrengthRow]) -> Figure:
    """Validation loss and accuracy at equal samples (filled) and equal steps (hollow) and training
    time against the global batch, every run a small point and each batch's mean over its seeds a
    line; then playing strength in each framing, each seed a point, the line the mean over seeds and
    deals with its interval over both."""
    panels = [("val_loss", "equal_steps_val_loss", "validation loss"),
              ("val_accuracy", "equal_steps_val_accuracy", "validation accuracy"),
              ("train_wall_s", None, "training wall time (s)")]
    count = len(panels) + bool(strengths)
    figure, axes_list = plt.subplots(1, count, figsize=(4.2 * count + 1, 4.4), constrained_layout=True, squeeze=False)
    batches = sorted(batches, key=lambda b: b.global_batch)
    all_batches = sorted({r.global_batch for r in [*runs, *batches, *strengths]})
    factors = sorted({r.lr_factor for r in runs})
    for axes, (name, equal_steps, label) in zip(axes_list[0], panels):
        for run in runs:
            colour = COLOURS[factors.index(run.lr_factor) % len(COLOURS)]
            x = math.log2(run.global_batch) + 0.04 * (run.train_seed % 5 - 2)
            axes.plot(x, getattr(run, name), "o", markersize=4, color=colour, alpha=0.8)
            if equal_steps:
                axes.plot(x, getattr(run, equal_steps), "o", markersize=5, color=colour, markerfacecolor="none")
        if batches:
            xs = [math.log2(b.global_batch) for b in batches]
            axes.plot(xs, [getattr(b, name) for b in batches], "-", color="black", label="best LR, mean over seeds")
            if equal_steps:
                axes.plot(xs, [getattr(b, equal_steps) for b in batches], "--", color="black", label="same, at equal steps")
        if name == "val_accuracy":
            axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        axes.set(ylabel=label, title=label[0].upper() + label[1:], xlabel="global batch (log2 scale)")
    if strengths:
        axes = axes_list[0][-1]
        for framing, style in FRAMING_STYLES.items():
            own = sorted((row for row in strengths if row.framing == framing), key=lambda row: row.global_batch)
            if not own:
                continue
            xs = [math.log2(row.global_batch) for row in own]
            shift = 0.06 * (list(FRAMING_STYLES).index(framing) - 1)
            axes.errorbar([x + shift for x in xs], [row.mean_rank for row in own],
                          yerr=[[row.mean_rank - row.mean_rank_ci95[0] for row in own],
                                [row.mean_rank_ci95[1] - row.mean_rank for row in own]],
                          fmt="o" + style, color="black", capsize=4, label=framing)
            for x, row in zip(xs, own):
                axes.plot([x + shift] * len(row.mean_rank_per_seed), row.mean_rank_per_seed, ".", color="grey")
        axes.axhline(EVEN_RANK, color="grey", linestyle="--", linewidth=0.8)
        axes.set(ylabel="mean rank vs 3 rule-based (1 best)", xlabel="global batch (log2 scale)",
                 title="Strength, 95% interval over seeds and deals")
        axes.legend(fontsize=7)
    for axes in axes_list[0]:
        axes.set_xticks([math.log2(b) for b in all_batches], [str(b) for b in all_batches])
        axes.grid(True, alpha=0.3)
    first = axes_list[0][0]
    for factor in factors:
        first.plot([], [], "o", color=COLOURS[factors.index(factor) % len(COLOURS)],
                   label=f"run, LR x{factor:g} of the square-root-scaled")
    first.plot([], [], "o", color="grey", markerfacecolor="none", label="hollow: at equal steps")
    first.legend(fontsize=7)
    return figure
