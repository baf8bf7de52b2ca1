"""`trainspeed study all`: what it adds to the studies it runs, the estimate printed first, one
record per study and one for the whole, the data the studies share, and the report of its folder.
It runs the throughput study alone here (`--only`), at the smoke preset: each study at its own
smallest size is tested by its own module."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from trainspeed.bench.ratios import ratio_table
from trainspeed.bench.results import ResultRow
from trainspeed.cli import build_parser, main
from trainspeed.kinds import read_inputs
from trainspeed.studies.rows import StudyRecord


@pytest.fixture(scope="module")
def study_all(tmp_path_factory) -> tuple[Path, str]:
    """`trainspeed study all --preset smoke --only throughput`: the folder and what it printed."""
    out = tmp_path_factory.mktemp("study_all")
    printed = io.StringIO()
    # In this process: the command's own process is not what is tested; the study's bench is a child all the same.
    with contextlib.redirect_stdout(printed):
        code = main(["study", "all", "--preset", "smoke", "--only", "throughput", "--out", str(out)])
    assert code == 0, printed.getvalue()[-3000:]
    return out, printed.getvalue()


@pytest.mark.e2e
def test_it_prints_its_estimate_before_it_starts_and_records_each_study_and_the_whole(study_all):
    out, printed = study_all
    first, plan = printed.splitlines()[:2]
    assert first.startswith("study all (smoke): about ") and f"rows go to {out}" in first
    assert plan.split(":")[0].strip() == "throughput"
    records = [read.row for read in read_inputs([out / "studies.jsonl"]).of(StudyRecord)]
    assert [record.study for record in records] == ["throughput", "all"]
    assert all(record.wall_s > 0 and record.estimate_s > 0 and record.machine.cores_usable for record in records)
    assert records[-1].wall_s >= records[0].wall_s


@pytest.mark.e2e
def test_the_throughput_rows_are_one_bench_run_device_and_host_fed(study_all):
    out, _ = study_all
    rows = [read.row for read in read_inputs([out / "throughput.jsonl"]).of(ResultRow)]
    assert {(row.target, row.feed) for row in rows} == {(t, f) for t in ("cpu:eager:fp32", "cpu:eager:bf16")
                                                        for f in ("device", "host")}
    assert len({row.run_id for row in rows}) == 1 and all(row.status == "ok" for row in rows)
    table = ratio_table(rows)
    assert table.baseline == "cpu:eager:fp32" and table.ratio("cpu:eager:bf16", 16) is not None
    assert all(row.command.startswith("trainspeed study all") for row in rows)


@pytest.mark.e2e
def test_the_report_reads_the_study_folder(study_all, tmp_path):
    out, _ = study_all
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    html = page.read_text()
    for section in ("ratio", "studies"):
        assert f'<section id="{section}">' in html, section


def _config(tmp_path: Path, *flags: str):
    args = build_parser().parse_args(["study", "all", "--preset", "smoke", *flags, "--out", str(tmp_path)])
    return args.face.runner().config_from_args(args, tmp_path)


def test_the_scaling_and_batch_size_studies_share_one_data_set_made_with_the_larger_game_count(tmp_path):
    config = _config(tmp_path)
    assert list(config.studies) == [name for name in ("throughput", "remote", "scaling", "batch-size")
                                    if name not in config.left_out]
    scaling, batch_size = config.studies["scaling"], config.studies["batch-size"]
    assert scaling.data == batch_size.data == str(tmp_path / "mahjong_selfplay")
    assert scaling.make_data_games == batch_size.make_data_games == 22


def test_only_runs_the_studies_it_names_in_the_usual_order(tmp_path):
    config = _config(tmp_path, "--only", "batch-size,throughput")
    assert list(config.studies) == ["throughput", "batch-size"]
    assert config.studies["batch-size"].data != str(tmp_path / "mahjong_selfplay")  # nothing to share it with


def test_a_study_it_does_not_know_is_one_line_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["study", "all", "--only", "throughput,everything", "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: --only 'throughput,everything': give study names"), line
    assert not out.exists() or not any(out.iterdir())
