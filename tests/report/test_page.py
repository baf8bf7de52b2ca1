"""The page: a section per kind of row present, statuses instead of numbers, every figure with its
command and environment, nothing fetched from anywhere."""

import re

import pytest

from report_rows import BENCH_COMMAND, INVALID_SAMPLES_PER_S, bench_rows, eval_row, write_every_kind, write_jsonl
from trainspeed.report.inputs import read_inputs
from trainspeed.report.page import NOT_RECORDED, render

ALL_SECTIONS = ["ratio", "throughput", "memory", "first-step", "training", "remote", "selfplay", "batch-size-study"]


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory):
    return render(read_inputs(write_every_kind(tmp_path_factory.mktemp("rows"))))


@pytest.fixture(scope="module")
def bench_page(tmp_path_factory):
    return render(read_inputs([write_jsonl(tmp_path_factory.mktemp("rows") / "b.jsonl", bench_rows())]))


def _section_ids(html):
    return re.findall(r'<section id="([^"]+)">', html)


@pytest.mark.slow
def test_every_kind_of_row_gets_its_section(every_kind):
    assert _section_ids(every_kind) == ALL_SECTIONS


def test_a_section_is_present_only_when_its_rows_are(tmp_path):
    html = render(read_inputs([write_jsonl(tmp_path / "e.jsonl", [eval_row("p", 1, 2.4)])]))
    assert _section_ids(html) == ["selfplay"]


def test_an_invalid_row_never_shows_as_a_number(bench_page):
    whole = f"{INVALID_SAMPLES_PER_S:,.0f}"
    for text in (whole, whole.replace(",", ""), f"{INVALID_SAMPLES_PER_S:.3g}", "98765"):
        assert text not in bench_page
    cells = re.findall(r'<td class="[^"]*status-invalid[^"]*"[^>]*>([^<]*)</td>', bench_page)
    assert cells and all(cell.startswith("invalid") for cell in cells)


def test_rows_that_are_not_ok_show_their_status(bench_page):
    for status in ("oom", "skipped", "error"):
        assert re.search(rf'<td class="[^"]*status-{status}[^"]*"[^>]*>{status}', bench_page), status


@pytest.mark.slow
def test_every_figure_is_inline_svg_with_its_command_and_environment(every_kind):
    figures = re.findall(r'<figure class="figure" id="[^"]+">(.*?)</figure>', every_kind, re.S)
    assert len(figures) >= len(ALL_SECTIONS)
    for figure in figures:
        assert figure.lstrip().startswith("<svg")
        caption = figure.split("<figcaption>")[1]
        assert "<dt>command</dt>" in caption and "<dt>environment</dt>" in caption
        assert "<code>" in caption.split("<dt>environment</dt>")[0] or NOT_RECORDED in caption
    assert BENCH_COMMAND in every_kind
    assert "Test CPU (2 threads), torch 2.9.0+cpu, Python 3.11.7, 2 threads, host testhost" in every_kind


def test_a_figure_without_recorded_commands_says_so(tmp_path):
    rows = [{k: v for k, v in row.items() if k != "command"} for row in bench_rows()[:3]]
    html = render(read_inputs([write_jsonl(tmp_path / "b.jsonl", rows)]))
    assert html.count(NOT_RECORDED) == html.count('<figure class="figure"') >= 3


def test_the_page_fetches_nothing(bench_page):
    assert not re.search(r"<(link|img|iframe|object|embed)\b", bench_page)
    assert not re.search(r"<script[^>]*\bsrc=", bench_page)
    assert "@import" not in bench_page and not re.search(r"url\((?!#)", bench_page)
    assert not re.search(r'(href|src)="(https?:)?//', bench_page)
