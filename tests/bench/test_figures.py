"""The bench's batch-size figures take their places from fixed margins, with no layout pass of
their own, and their tick labels, axis labels, titles and legends stay inside the figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainspeed.bench.figures import bench_figure, first_step_figure, memory_figure, ratio_figure, throughput_figure
from trainspeed.bench.ratios import ratio_table
from trainspeed.bench.results import ResultRow
from trainspeed.kinds import read_inputs
from trainspeed.report.figures import plt

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
FIGURES = {"ratio": ratio_figure, "bench": bench_figure, "throughput": throughput_figure, "memory": memory_figure,
           "first step": first_step_figure}


@pytest.fixture(scope="module")
def h200_table():
    """Five series over batch 64..16384, samples/s up to five digits, MFU, an out-of-memory row."""
    rows = [read.row for read in read_inputs([RESULTS / "bench_h200_mahjong_base.jsonl"]).of(ResultRow)]
    return ratio_table(rows, "cuda:eager:fp32")


@pytest.mark.parametrize("name", FIGURES)
def test_a_batch_size_figure_is_drawn_in_one_pass_with_everything_inside_it(name: str, h200_table) -> None:
    figure = FIGURES[name](h200_table, "mahjong base")
    try:
        assert figure.get_layout_engine() is None  # no measuring pass before the drawing one
        figure.canvas.draw()
        drawn = figure.get_tightbbox(figure.canvas.get_renderer())
        width, height = figure.get_size_inches()
        assert drawn.x0 >= 0 and drawn.y0 >= 0 and drawn.x1 <= width and drawn.y1 <= height, (drawn, width, height)
    finally:
        plt.close(figure)


def test_the_mfu_axis_says_which_peak_it_divides_by(h200_table) -> None:
    """The committed H200 rows divide by the matmul chain measured on the GPU; rows of the nominal
    peak say so, and a figure of both says each row has its own."""
    import dataclasses

    def mfu_axes_label(table) -> tuple[str, str]:
        figure = throughput_figure(table, "mahjong base")
        try:
            axes = figure.axes[1]
            return axes.get_ylabel(), axes.get_title()
        finally:
            plt.close(figure)

    rows = list(h200_table.newest.values())
    assert mfu_axes_label(h200_table) == ("MFU (achieved / measured matmul peak)",
                                          "mahjong base: model FLOPs utilisation (none above 100%)")
    nominal = [dataclasses.replace(r, peak_tflops_source="nominal") for r in rows]
    assert mfu_axes_label(ratio_table(nominal, "cuda:eager:fp32"))[0] == "MFU (achieved / chip's nominal peak)"
    mixed = nominal[:1] + rows[1:]
    assert mfu_axes_label(ratio_table(mixed, "cuda:eager:fp32"))[0] == "MFU (achieved / each row's peak (measured, nominal))"
