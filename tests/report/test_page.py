"""The page: a section per kind of row present, statuses instead of numbers, ratios only within a
run, a machine line under every figure, nothing fetched from anywhere."""

import html
import re

import pytest
from report_rows import (
    BENCH_COMMAND,
    BUSY,
    INVALID_SAMPLES_PER_S,
    bench,
    bench_rows,
    eval_row,
    remote_rows,
    scaling_rows,
    write_every_kind,
    write_jsonl,
)

from trainspeed.bench.results import ResultRow
from trainspeed.kinds import read_inputs, render
from trainspeed.report.page import NOT_RECORDED

ALL_SECTIONS = ["ratio", "throughput", "memory", "first-step", "remote", "training", "time-to-quality", "selfplay", "agreement", "null-test",
                "scaling", "batch-size-study", "measurements"]


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory, tiny_run, classifier_run):
    return render(read_inputs([*write_every_kind(tmp_path_factory.mktemp("rows")), tiny_run, classifier_run]))


@pytest.fixture(scope="module")
def bench_page(tmp_path_factory):
    return render(read_inputs([write_jsonl(tmp_path_factory.mktemp("rows") / "b.jsonl", bench_rows())]))


def _section_ids(html):
    return re.findall(r'<section id="([^"]+)">', html)


def _section(html, name):
    return html.split(f'<section id="{name}">')[1].split("</section>")[0]


def _figures(html):
    return re.findall(r'<figure class="figure" id="([^"]+)">(.*?)</figure>', html, re.S)


@pytest.mark.e2e
@pytest.mark.slow
def test_every_kind_of_row_gets_its_section(every_kind):
    assert _section_ids(every_kind) == ALL_SECTIONS


def test_a_section_is_present_only_when_its_rows_are(tmp_path):
    html = render(read_inputs([write_jsonl(tmp_path / "e.jsonl", [eval_row("p", 1, 2.4)])]))
    assert _section_ids(html) == ["selfplay"]


def test_an_invalid_row_never_shows_as_a_number(bench_page):
    whole = f"{INVALID_SAMPLES_PER_S:,.0f}"
    for shown in (whole, whole.replace(",", ""), f"{INVALID_SAMPLES_PER_S:.3g}", "98765"):
        assert shown not in bench_page
    cells = re.findall(r'<td class="[^"]*status-invalid[^"]*"[^>]*>([^<]*)</td>', bench_page)
    assert cells and all(cell.startswith("invalid") for cell in cells)


def test_rows_that_are_not_ok_show_their_status(bench_page):
    for status in ("oom", "skipped", "error"):
        assert re.search(rf'<td class="[^"]*status-{status}[^"]*"[^>]*>{status}', bench_page), status


@pytest.mark.e2e
@pytest.mark.slow
def test_every_figure_is_inline_svg_with_its_command_machine_and_files(every_kind):
    figures = _figures(every_kind)
    assert len(figures) >= len(ALL_SECTIONS)
    for figure_id, figure in figures:
        assert figure.lstrip().startswith("<svg"), figure_id
        caption = figure.split("<figcaption>")[1]
        assert "<dt>command</dt>" in caption and "<dt>machine</dt>" in caption and "<dt>rows from</dt>" in caption
        assert re.search(r'<dd class="machine">\d+ rows?: ', caption), figure_id
    assert BENCH_COMMAND in every_kind
    assert ("Test CPU, 2 of 4 cores usable, load average 1.25-1.50, 1.00 CPU s per wall s, 2 torch threads, "
            "OMP_NUM_THREADS=2, torch 2.9.0+cpu, Python 3.11.7, host testhost") in every_kind


def test_the_machine_line_says_shared_machine_when_the_load_exceeded_the_usable_cores(tmp_path):
    rows = [bench("cpu:eager:fp32", 64), bench("cpu:eager:fp32", 128, machine=BUSY), bench("cpu:compile:fp32", 64)]
    html = render(read_inputs([write_jsonl(tmp_path / "b.jsonl", rows)]))
    assert "load average 1.25-4.00: shared machine (load above the usable cores for 1 of 3 rows)" in html


def test_a_figure_without_recorded_commands_says_so(tmp_path):
    rows = [{**row, "command": None} for row in bench_rows()[:3]]
    html = render(read_inputs([write_jsonl(tmp_path / "b.jsonl", rows)]))
    assert html.count(NOT_RECORDED) == html.count('<figure class="figure"') + html.count('class="provenance"') >= 3


def test_a_ratio_pairs_a_row_only_with_the_baseline_of_its_own_run(tmp_path):
    """A row of another run is not divided by this run's baseline (the reference peers at 1.13x of
    a bench run hours apart, 1.54x of the one beside them): it says there was none."""
    rows = [bench("cpu:eager:fp32", 64, samples_per_s=1000.0, run_id="a"),
            bench("reference-torch:cpu:eager:fp32", 64, samples_per_s=1540.0, run_id="a"),
            bench("cpu:eager:fp32", 64, samples_per_s=1363.0, run_id="b", timestamp="2026-01-02T00:00:00+00:00"),
            bench("cpu:compile:fp32", 64, samples_per_s=1500.0, run_id="c")]
    html = render(read_inputs([write_jsonl(tmp_path / "r.jsonl", rows)]))
    table = _section(html, "ratio").split('id="table-ratio"')[1]
    cells = {target: re.search(rf"<td[^>]*>{re.escape(target)}</td>(.*?)</tr>", table, re.S).group(1)
             for target in ("reference-torch:cpu:eager:fp32", "cpu:compile:fp32")}
    assert ">1.54x<" in cells["reference-torch:cpu:eager:fp32"] and "1.13x" not in html
    assert "no baseline in this run" in cells["cpu:compile:fp32"] and "1.10x" not in html


def test_remote_over_local_is_one_convention_and_a_negative_wire_time_is_flagged(tmp_path):
    html = render(read_inputs([write_jsonl(tmp_path / "r.jsonl", remote_rows())]))
    remote = _section(html, "remote")
    assert ">0.33x<" in remote and ">0.50x<" in remote  # 300 / 900 and 500 / 1000: remote over local
    assert ">3.00x<" not in remote
    flagged = re.findall(r'<td class="[^"]*status-invalid[^"]*"[^>]*title="([^"]*)">flagged</td>', remote)
    assert len(flagged) == 1 and "negative" in flagged[0]
    assert "-244" not in remote  # (0.256 - 0.5) s as a wire time in ms


def test_the_scaling_figure_compares_ranks_only_within_one_scaling_study(tmp_path):
    rows = scaling_rows("one") + [row for row in scaling_rows("two") if row["world_size"] == 2]
    html = render(read_inputs([write_jsonl(tmp_path / "s.jsonl", rows)]))
    table = _section(html, "scaling").split('id="table-scaling"')[1]
    study_one = re.findall(r"<tr>\s*<td[^>]*>one</td>(.*?)</tr>", table, re.S)
    study_two = re.findall(r"<tr>\s*<td[^>]*>two</td>(.*?)</tr>", table, re.S)
    assert any(">1.70x<" in row for row in study_one)
    assert study_two and all("no one-rank run in this study" in row for row in study_two)


@pytest.mark.e2e
@pytest.mark.slow
def test_every_validation_metric_a_workload_names_is_plotted_against_step(every_kind):
    (curves,) = [figure for figure_id, figure in _figures(every_kind) if figure_id == "fig-training-curves"]
    for title in ("Validation top1_accuracy", "Validation mean_loss", "Validation accuracy", "Validation loss",
                  "Training loss (logged windows)"):
        assert title in curves, title


def test_the_page_fetches_nothing(bench_page):
    assert not re.search(r"<(link|img|iframe|object|embed)\b", bench_page)
    assert not re.search(r"<script[^>]*\bsrc=", bench_page)
    assert "@import" not in bench_page and not re.search(r"url\((?!#)", bench_page)
    assert not re.search(r'(href|src)="(https?:)?//', bench_page)


def test_the_within_deal_correlation_of_an_evaluation_is_shown(tmp_path):
    """The four games of a deal are correlated; the committed evaluations against the rule-based
    agent show +0.13 to +0.25, so luck of the deal does not cancel out."""
    html = render(read_inputs([write_jsonl(tmp_path / "e.jsonl", [eval_row("p", 1, 2.4)])]))
    assert "within-deal correlation" in html


@pytest.mark.e2e
@pytest.mark.slow
def test_the_committed_results_and_a_fresh_run_make_one_page_without_a_cross_run_ratio(tmp_path, tiny_run):
    """`trainspeed report docs/results/*.jsonl RUN --out r.html`: every figure has its machine line,
    no wire time is negative, every ratio pairs rows of one run."""
    from pathlib import Path

    from trainspeed.cli import main

    results = Path(__file__).resolve().parents[2] / "docs" / "results"
    page = tmp_path / "r.html"
    assert main(["report", *map(str, sorted(results.glob("*.jsonl"))), str(tiny_run), "--out", str(page)]) == 0
    html = page.read_text()
    figures = _figures(html)
    assert len(figures) >= 15 and all('<dd class="machine">' in figure for _, figure in figures)
    remote = _section(html, "remote")
    wire = [re.findall(r"<td[^>]*>([^<]*)</td>", row)[12] for row in re.findall(r"<tr>(.*?)</tr>", remote, re.S)[1:]]
    assert wire and all(cell == "flagged" or cell == "–" or float(cell.replace(",", "")) >= 0 for cell in wire)
    assert wire.count("flagged") >= 1
    inputs = read_inputs([*sorted(results.glob("*.jsonl")), tiny_run])
    from trainspeed.bench.report import bench_groups

    for group in bench_groups([row for row in inputs.of(ResultRow) if not row.is_remote], ()):
        for read in group.rows:
            base = group.table.baseline_of(read.row)
            assert base is None or base.run_id == read.row.run_id


def test_agreement_strength_curves_null_tests_and_the_batch_size_framings_have_their_figures_and_tables(tmp_path):
    html = render(read_inputs(write_every_kind(tmp_path)))
    for anchor in ("fig-agreement", "table-agreement", "fig-selfplay-curve", "table-null-test",
                   "table-batch-size-settings", "table-batch-size-strength", "table-batch-size-comparisons"):
        assert f'id="{anchor}' in html, anchor
    assert "inconclusive at a minimum detectable difference of 0.085 ranks" in html
    assert "head to head" in html and "equal wall time" in html


def test_the_bench_table_says_which_peak_each_mfu_divides_by_and_gives_the_measured_ones_beside(tmp_path):
    rows = [bench("jax:jit:bf16", 64, device_name="TPU v5 lite", mfu=0.4, peak_tflops=197.0,
                  peak_tflops_source="nominal", nominal_peak_chip="TPU v5e bf16", measured_peak_tflops=171.0,
                  mfu_of_measured_peak=0.4608),
            bench("cpu:eager:fp32", 64)]  # a row of before the nominal peaks: its peak the measured chain
    page = render(read_inputs([write_jsonl(tmp_path / "b.jsonl", rows)]))
    section = _section(page, "throughput")
    assert ">peak for MFU (TFLOP/s)</th>" in section and ">MFU, measured peak</th>" in section
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", section)
    assert "197 nominal (TPU v5e bf16)" in cells and "46.1%" in cells and "40.0%" in cells
    assert "1 measured" in cells and cells.count("25.0%") == 2  # its MFU is its measured-peak MFU too
    assert "the chip's nominal peak where one is known" in html.unescape(section)  # the section's text says so
