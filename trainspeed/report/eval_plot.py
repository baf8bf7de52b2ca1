"""The figure `trainspeed eval mahjong` redraws after each evaluation: the report's self-play
strength figure (each evaluation's mean rank with its 95% interval, and its rank shares) over the
`mahjong-eval` rows of its results file, one line per row, oldest at the top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trainspeed.errors import UsageError
from trainspeed.evaluate.mahjong import MahjongEvalRow
from trainspeed.report.figures import eval_figure
from trainspeed.report.plot import caption_machines, save_figure


def plot_mahjong_eval(rows: Sequence[MahjongEvalRow], out_stem: Path, title: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; returns the paths written."""
    if not rows:
        raise UsageError("no mahjong-eval rows to plot")
    figure = eval_figure(rows)
    figure.suptitle(title or "Duplicate 1-vs-3 Mahjong evaluation")
    caption_machines(figure, list(rows))
    return save_figure(figure, out_stem)
