"""The evaluations' figures: each evaluation's mean rank with its 95% interval (1 best, 4 worst,
2.5 even) and its rank shares; strength against samples trained on over a run's checkpoints; and
agreement with the teacher per kind of decision."""

from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, PercentFormatter

from trainspeed.evaluate.rows import MahjongAgreementRow, MahjongEvalRow
from trainspeed.report.figures import EVEN_RANK, compact_number, plt

RANK_COLOURS = ("#2b8a3e", "#74b816", "#f59f00", "#e03131")


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
