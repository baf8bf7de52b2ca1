"""What every figure of the report shares: matplotlib set up to draw without a screen, a figure
as the SVG the page inlines (text stays text: `svg.fonttype: none`), a figure with its provenance,
the axes' number formats, and a figure written on its own (PNG and SVG, each atomically, its
machine lines in its caption). Labels are plain text: a `$` in a target or workload name is a
dollar sign, never matplotlib's mathtext.

Each producer draws its own figures beside its rows (`trainspeed/bench/figures.py`, ...).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"
matplotlib.rcParams["text.parse_math"] = False
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from trainspeed.atomic import atomic_path, shown_names  # noqa: E402
from trainspeed.report.page import FigureBlock  # noqa: E402
from trainspeed.report.provenance import machine_lines, provenance  # noqa: E402

COLOURS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
EVEN_RANK = 2.5
"""The mean rank of an even match of four players."""


def show_names(figure: Figure) -> Figure:
    """Every text of the figure drawable: a file name's bytes that are not UTF-8 (a results file or
    a data folder in a title or a legend) shown as `\\xNN`, as the page shows them; the font
    renderer refuses the lone surrogates Python holds them as."""
    for artist in figure.findobj(Text):
        shown = shown_names(artist.get_text())
        if shown != artist.get_text():
            artist.set_text(shown)
    return figure


def svg_text(figure: Figure, salt: str) -> str:
    """The figure as an inline `<svg>` element (no XML prolog, no fixed size: the page scales it
    by its viewBox); `salt` keeps its element ids apart from the other figures' on one page."""
    show_names(figure)
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    svg = text[text.index("<svg"):]
    root_end = svg.index(">")
    root = re.sub(r'\s(width|height)="[^"]*"', "", svg[:root_end])
    return root + svg[root_end:]


def figure_block(figure_id: str, caption: str, figure: Figure, rows: Sequence[Any]) -> FigureBlock:
    """The figure inline, with the commands, machines and files of the rows it draws."""
    return FigureBlock(id=figure_id, caption=caption, svg=svg_text(figure, figure_id), provenance=provenance(rows))


# --- panels at fixed margins -------------------------------------------------------------------

@dataclass(frozen=True)
class Margins:
    """Space around and between a figure's panels, in inches, whatever the figure's size: what a
    batch-size plot's decorations take (tick labels of up to nine characters, one line of axis label
    and of title)."""

    left: float = 1.0
    """The y tick labels and the y label."""
    right: float = 0.3
    """Half the last x tick label."""
    bottom: float = 0.62
    """The x tick labels and the x label."""
    top: float = 0.4
    """A title of one line."""
    between: float = 1.05
    """The next panel's y tick labels and y label."""


BATCH_PLOT_MARGINS = Margins()


def panels(columns: int, size: tuple[float, float],
           margins: Margins = BATCH_PLOT_MARGINS) -> tuple[Figure, list[Axes]]:
    """A figure of `columns` panels side by side, placed at fixed margins.

    A layout engine (constrained layout, tight_layout) measures every tick label and title before
    the figure is drawn, in a pass of its own, which cost as much as drawing the figure itself
    (about a quarter of `trainspeed report`'s time over a hundred batch-size plots). Figures whose
    decorations are known in advance, the batch-size plots, take their places from these margins
    instead; a figure whose labels are the data (a bar per run, a legend outside the axes) keeps
    constrained layout."""
    width, height = size
    figure, grid = plt.subplots(1, columns, figsize=size, squeeze=False)
    panel_width = (width - margins.left - margins.right - (columns - 1) * margins.between) / columns
    figure.subplots_adjust(left=margins.left / width, right=1 - margins.right / width,
                           bottom=margins.bottom / height, top=1 - margins.top / height,
                           wspace=margins.between / panel_width)
    return figure, list(grid[0])


# --- axes ---------------------------------------------------------------------------------------

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


def label_batch_axis(axes: Axes, batch_sizes: list[int]) -> None:
    powers = sorted({b.bit_length() - 1 for b in batch_sizes if b & (b - 1) == 0})
    if len(powers) == len(batch_sizes):  # every batch size is 2^k: a tick each, written out
        axes.set_xticks(powers, [str(2**k) for k in powers])
    else:
        axes.xaxis.set_major_formatter(FuncFormatter(lambda k, _: f"{2**k:,.0f}"))
    axes.set_xlabel("batch size (log2 scale)")


def samples_axis(axes: Axes) -> None:
    """Log scale where the values span more than a factor of 5, else linear; readable ticks."""
    low, high = axes.dataLim.y0, axes.dataLim.y1
    if low > 0 and high / low > 5:
        axes.set_yscale("log")
        axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        axes.yaxis.set_minor_formatter(NullFormatter())
    axes.yaxis.set_major_formatter(FuncFormatter(readable_number))



# --- a figure on its own ------------------------------------------------------------------------

def caption_machines(figure: Figure, rows: list) -> None:
    """Under the figure: the machine its rows ran on and how loaded it was (a figure travels alone)."""
    lines = machine_lines((row.machine, getattr(row, "cpu_s_per_wall_s", None)) for row in rows)
    if not lines:
        return
    figure.text(0.005, 0.0, "\n".join(lines), fontsize=6, color="dimgrey", va="bottom", ha="left", wrap=True)
    engine = figure.get_layout_engine()
    if engine is not None:
        engine.set(rect=(0, 0.03 * len(lines), 1, 1 - 0.03 * len(lines)))
    else:  # panels at fixed margins: the lowest margin grows by the caption's lines
        figure.subplots_adjust(bottom=figure.subplotpars.bottom + 0.03 * len(lines))


def save_figure(figure: Figure, out_stem: Path, dpi: int = 120) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg, each atomically, and close the figure; returns the paths."""
    show_names(figure)
    written = []
    for suffix in (".png", ".svg"):
        path = out_stem.with_suffix(suffix)
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format=suffix[1:], dpi=dpi)
        written.append(path)
    plt.close(figure)
    return written
