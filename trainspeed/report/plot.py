"""`trainspeed plot`'s figure: the study's ratio figure beside absolute samples/s, drawn by the same
functions as the report's (`figures.draw_ratio`, `figures.draw_samples`), and every figure's file
writer (PNG and SVG, each written atomically).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from trainspeed.atomic import atomic_path
from trainspeed.bench.ratios import ratio_table
from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.report.figures import bench_figure, plt
from trainspeed.report.machines import machine_lines


def build_figure(rows: list[ResultRow], baseline: str | None = None) -> Figure:
    """The figure of `rows` (newest row per configuration), not yet written anywhere."""
    measured = [row for row in rows if row.is_measured]
    if not measured:
        raise UsageError("no measured rows to plot (every row is oom, skipped or error)")
    workloads = ", ".join(sorted({f"{row.workload} {row.size}" for row in measured}))
    figure = bench_figure(ratio_table(rows, baseline), workloads)
    caption_machines(figure, measured)
    return figure


def caption_machines(figure: Figure, rows: list) -> None:
    """Under the figure: the machine its rows ran on and how loaded it was (a figure travels alone)."""
    lines = machine_lines((row.machine, getattr(row, "cpu_s_per_wall_s", None)) for row in rows)
    if lines:
        figure.text(0.005, 0.0, "\n".join(lines), fontsize=6, color="dimgrey", va="bottom", ha="left", wrap=True)
        figure.get_layout_engine().set(rect=(0, 0.03 * len(lines), 1, 1 - 0.03 * len(lines)))


def save_figure(figure: Figure, out_stem: Path, dpi: int = 120) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg, each atomically, and close the figure; returns the paths."""
    written = []
    for suffix in (".png", ".svg"):
        path = out_stem.with_suffix(suffix)
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format=suffix[1:], dpi=dpi)
        written.append(path)
    plt.close(figure)
    return written


def plot_results(rows: list[ResultRow], out_stem: Path, baseline: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; returns the paths written."""
    return save_figure(build_figure(rows, baseline), out_stem)
