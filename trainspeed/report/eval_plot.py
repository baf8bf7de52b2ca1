"""Figures written on their own from evaluation rows: the one `trainspeed eval mahjong` redraws
after each evaluation (the report's self-play strength figure: each evaluation's mean rank with its
95% interval, and its rank shares, one line per row, oldest at the top), and the batch-size study's
(`trainspeed plot` of its rows). Each carries the machine its rows ran on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trainspeed.errors import UsageError
from trainspeed.evaluate.mahjong import MahjongEvalRow
from trainspeed.report.figures import eval_figure, study_figure
from trainspeed.report.plot import caption_machines, save_figure
from trainspeed.studies.batch_size import BatchSizeBatchRow, BatchSizeRunRow, BatchSizeStrengthRow


def plot_mahjong_eval(rows: Sequence[MahjongEvalRow], out_stem: Path, title: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; returns the paths written."""
    if not rows:
        raise UsageError("no mahjong-eval rows to plot")
    figure = eval_figure(rows)
    figure.suptitle(title or "Duplicate 1-vs-3 Mahjong evaluation")
    caption_machines(figure, list(rows))
    return save_figure(figure, out_stem)


def plot_batch_size_study(rows: Sequence[object], out_stem: Path) -> list[Path]:
    """The batch-size study's figure (the report's) from its rows, captioned with its runs' machine."""
    runs = [row for row in rows if isinstance(row, BatchSizeRunRow)]
    strengths = [row for row in rows if isinstance(row, BatchSizeStrengthRow)]
    if not runs and not strengths:
        raise UsageError("no batch-size study runs or strengths to plot")
    figure = study_figure(runs, [row for row in rows if isinstance(row, BatchSizeBatchRow)], strengths)
    caption_machines(figure, runs)
    return save_figure(figure, out_stem)
