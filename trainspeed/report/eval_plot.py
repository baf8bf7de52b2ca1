"""The evaluation figure: each evaluation's mean rank with its 95% interval, and its rank shares.

Reads `mahjong-eval` rows as plain dicts (the JSON lines the evaluation appends), one line per row
in the figure, oldest at the top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"
import matplotlib.pyplot as plt  # noqa: E402

from trainspeed.atomic import atomic_path  # noqa: E402
from trainspeed.errors import UsageError  # noqa: E402

EVEN_RANK = 2.5
RANK_COLOURS = ("#2b8a3e", "#74b816", "#f59f00", "#e03131")


def _opponent_label(opponent: str) -> str:
    return opponent if "/" not in opponent else Path(opponent).name


def eval_label(row: dict[str, Any]) -> str:
    """`<run name>@<step> vs <opponent>, <games> games` (run directories by their last part)."""
    policy = Path(row["policy"]).name or row["policy"]
    return f"{policy}@{row['policy_step']} vs {_opponent_label(row['opponent'])}, {row['games']} games"


def plot_mahjong_eval(rows: Sequence[dict[str, Any]], out_stem: Path, title: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; returns the paths written."""
    if not rows:
        raise UsageError("no mahjong-eval rows to plot")
    count = len(rows)
    figure, (rank_axes, share_axes) = plt.subplots(
        1, 2, figsize=(13, 1.2 + 0.45 * count), constrained_layout=True, sharey=True,
        gridspec_kw={"width_ratios": [3, 2]})
    positions = list(range(count))[::-1]
    for position, row in zip(positions, rows):
        interval = row.get("mean_rank_ci95")
        error = None
        if interval is not None:
            error = [[row["mean_rank"] - interval[0]], [interval[1] - row["mean_rank"]]]
        rank_axes.errorbar(row["mean_rank"], position, xerr=error, fmt="o", color="black", capsize=4)
        rank_axes.annotate(f"{row['mean_rank']:.3f}", (row["mean_rank"], position), xytext=(0, 6),
                           textcoords="offset points", ha="center", fontsize=8)
        left = 0.0
        for rank, (share, colour) in enumerate(zip(row["rank_distribution"], RANK_COLOURS), start=1):
            share_axes.barh(position, share, left=left, color=colour, label=f"rank {rank}" if position == positions[0] else None)
            left += share
    rank_axes.axvline(EVEN_RANK, color="grey", linestyle="--", linewidth=0.8)
    rank_axes.set_yticks(positions, [eval_label(row) for row in rows], fontsize=8)
    rank_axes.set(xlabel="mean rank of the policy (1 best, 4 worst), 95% CI clustered by deal", xlim=(1, 4))
    rank_axes.grid(True, axis="x", alpha=0.3)
    share_axes.set(xlabel="share of games at each rank", xlim=(0, 1))
    share_axes.legend(fontsize=8, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    figure.suptitle(title or "Duplicate 1-vs-3 Mahjong evaluation")
    written = []
    for suffix in (".png", ".svg"):
        path = out_stem.with_suffix(suffix)
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format=suffix[1:], dpi=120)
        written.append(path)
    plt.close(figure)
    return written
