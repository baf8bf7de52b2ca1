"""What the figure shows, read from its matplotlib objects: whiskers, ticks, invalid points."""

import math

import pytest
from matplotlib.container import ErrorbarContainer

from trainspeed.bench.report import build_figure
from trainspeed.bench.results import ResultRow
from trainspeed.report.figures import readable_number


def _row(target, batch_size, median, low, high, status="ok", feed=None):
    return ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny", target=target, batch_size=batch_size,
                     status=status, samples_per_s=median, samples_per_s_min=low, samples_per_s_max=high, feed=feed)


ROWS = [
    _row("base", 64, 1000.0, 900.0, 1100.0),
    _row("base", 128, 2000.0, 1900.0, 2050.0),
    _row("fast", 64, 1500.0, 1200.0, 1600.0),
    _row("fast", 128, 3000.0, 2500.0, 3100.0, status="invalid"),
    _row("base", 64, 1200.0, 1100.0, 1300.0, feed="host"),
]


def _containers(axes):
    """(label, x, y, whisker (low, high) per point, hollow) of each errorbar drawn on `axes`."""
    drawn = []
    for container in axes.containers:
        assert isinstance(container, ErrorbarContainer)
        line, _caps, (bars,) = container.lines
        whiskers = [(segment[0][1], segment[1][1]) for segment in bars.get_segments()]
        hollow = line.get_markerfacecolor() == "none"
        drawn.append((container.get_label(), list(line.get_xdata()), list(line.get_ydata()), whiskers, hollow))
    return drawn


@pytest.fixture(scope="module")
def figure():
    return build_figure(ROWS, baseline="base")


def test_every_point_of_both_panels_has_a_whisker_from_slowest_to_fastest_window(figure):
    ratio_axes, absolute_axes = figure.axes
    absolute = {label: (x, y, w) for label, x, y, w, hollow in _containers(absolute_axes) if not hollow}
    assert absolute["base"] == ([6, 7], [1000.0, 2000.0], [(900.0, 1100.0), (1900.0, 2050.0)])
    assert absolute["fast"] == ([6], [1500.0], [(1200.0, 1600.0)])
    assert absolute["base host-fed"] == ([6], [1200.0], [(1100.0, 1300.0)])
    ratio = {label: (x, y, w) for label, x, y, w, hollow in _containers(ratio_axes) if not hollow}
    x, y, whiskers = ratio["fast"]
    assert x == [6] and y == [pytest.approx(1.5)] and whiskers == [(pytest.approx(1.2), pytest.approx(1.6))]
    assert ratio["base host-fed"][1] == [pytest.approx(1.2)]


def test_an_invalid_row_is_a_hollow_point_off_the_line_in_both_panels(figure):
    for axes in figure.axes:
        drawn = _containers(axes)
        hollow = [(x, w) for label, x, y, w, is_hollow in drawn if is_hollow]
        assert len(hollow) == 1 and hollow[0][0] == [7]
        assert all(7 not in x for label, x, y, w, is_hollow in drawn if label == "fast" and not is_hollow)
        assert any("invalid" in text.get_text() for text in axes.get_legend().get_texts())


def test_the_axes_are_labelled_with_batch_sizes_and_readable_rates(figure):
    ratio_axes, absolute_axes = figure.axes
    for axes in figure.axes:
        assert [tick.get_text() for tick in axes.get_xticklabels()] == ["64", "128"]
    assert absolute_axes.get_yscale() == "linear"  # a log axis only where the rates span more than 5x
    formatter = absolute_axes.yaxis.get_major_formatter()
    assert [formatter(v) for v in (2000.0, 500.0, 30.0)] == ["2,000", "500", "30"]
    ticks = [t for t in absolute_axes.get_yticks() if 900 <= t <= 3100]
    assert {1000.0, 2000.0, 3000.0} <= set(ticks)
    assert readable_number(0.25) == "0.25" and not math.isnan(float(readable_number(1.5)))


def test_where_a_file_holds_several_sizes_every_line_is_named_by_its_size():
    """Two sizes with as many rows each: neither may be left unnamed, as if it were the title's."""
    rows = [ResultRow(run_id="r", timestamp="t", workload="mahjong", size=size, target="jax:jit:bf16", batch_size=batch,
                      status="ok", samples_per_s=rate, samples_per_s_min=rate, samples_per_s_max=rate)
            for size, rate in (("base+flat-tokens", 900.0), ("base", 1000.0)) for batch in (64, 128)]
    figure = build_figure(rows)
    labels = {label for label, *_ in _containers(figure.axes[1])}
    assert labels == {"jax:jit:bf16 [base+flat-tokens]", "jax:jit:bf16 [base]"}
    assert figure.axes[0].get_title().endswith("(mahjong)")
