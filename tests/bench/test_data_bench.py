"""`trainspeed data bench`: the loader's samples/s per worker count beside the step's, the verdict
of how many workers keep the device fed, rows appended whole and drawn by the report; bad input
refused in one line before anything is timed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from in_place_data import snapshot, write_image_folder

from trainspeed.bench.data_feed_report import DataBenchRow, fed_workers, verdict
from trainspeed.bench.results import ResultRow
from trainspeed.cli import main
from trainspeed.kinds import read_inputs, render
from trainspeed.rows import row_line

WORKLOAD = ["--workload", "timm:test_resnet", "--size", "tiny,res=16,classes=3", "--batch-size", "4", "--batches", "3"]
SIZE = "tiny,classes=3,res=16"  # as the workload normalizes it


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("data_bench") / "photos", per_class=4)


def bench(batch_size: int, samples_per_s: float = 100.0) -> ResultRow:
    return ResultRow(run_id="r1", timestamp="2026-01-01T00:00:00+00:00", workload="timm:test_resnet", size=SIZE,
                     target="cpu:eager:fp32", batch_size=batch_size, status="ok", samples_per_s=samples_per_s)


def write_jsonl(path: Path, rows: list[ResultRow]) -> Path:
    path.write_text("".join(row_line(row) + "\n" for row in rows))
    return path


def _step_rows(path: Path, samples_per_s: float) -> Path:
    return write_jsonl(path, [bench(4, samples_per_s)])


def _row(workers: int, loader: float, step: float | None) -> DataBenchRow:
    return DataBenchRow(run_id="r", timestamp="t", data="d", data_format="image-folder", workload="w", size="s",
                        batch_size=4, workers=workers, loader_samples_per_s=loader, loader_batches=3, loader_s=1.0,
                        step_samples_per_s=step, step_source="rows")


def test_the_fewest_workers_whose_loader_reaches_the_step_keep_the_device_fed() -> None:
    rows = [_row(1, 80.0, 100.0), _row(2, 150.0, 100.0), _row(4, 260.0, 100.0)]
    assert fed_workers(rows) == 2 and verdict(rows).startswith("2 workers keep the device fed")
    starved = [_row(1, 30.0, 100.0), _row(2, 50.0, 100.0)]
    assert fed_workers(starved) is None and "the best, 2 workers, makes 50 samples/s of the step's 100 (50%)" in \
        verdict(starved)
    assert fed_workers([_row(1, 30.0, None)]) is None and "not known" in verdict([_row(1, 30.0, None)])


def test_data_bench_times_each_worker_count_beside_the_bench_rows_step_and_the_report_draws_it(
        photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    before = snapshot(photos)
    out = tmp_path / "data_bench.jsonl"
    steps = _step_rows(tmp_path / "bench.jsonl", 1e-3)  # a step any loader outruns
    assert main(["data", "bench", str(photos), *WORKLOAD, "--workers", "0,1", "--bench-rows", str(steps),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0 workers keep the device fed" in printed and printed.count("(fed)") == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["workers"] for row in rows] == [0, 1] and {row["kind"] for row in rows} == {"data-bench"}
    assert all(row["loader_samples_per_s"] > 0 and row["loader_batches"] == 3 for row in rows)
    assert {row["step_source"] for row in rows} == {str(steps)} and rows[0]["data_format"] == "image-folder"
    assert rows[0]["machine"]["cores_total"] >= 1 and rows[0]["command"].startswith("trainspeed data bench")
    assert snapshot(photos) == before

    html = render(read_inputs([out]))
    assert "Is the device fed? Loader against step" in html and "figure-data-bench" in html
    assert "0 workers keep the device fed" in html


def test_data_bench_without_bench_rows_times_the_step_itself(photos: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["data", "bench", str(photos), *WORKLOAD, "--workers", "0", "--out", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["step_source"] == "quick bench on cpu:eager:fp32 (host feed)" and row["step_samples_per_s"] > 0
    assert "samples/s (quick bench" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["bench-rows-without-the-batch", "bench-rows-a-device", "bad-data",
                                  "fewer-samples-than-a-batch", "out-of-another-kind", "workers"])
def test_bad_input_to_data_bench_is_one_line_before_anything_is_timed(photos: Path, tmp_path: Path, case: str,
                                                                      cli_error) -> None:
    out, data, extra = tmp_path / "rows.jsonl", str(photos), []
    said = {"bench-rows-without-the-batch": "no measured row of timm:test_resnet",
            "bench-rows-a-device": "--bench-rows: results file /dev/zero is a character device, not a regular file; "
                                   "give the JSONL file of rows `trainspeed bench --out` wrote",
            "bad-data": "an empty class folder",
            "fewer-samples-than-a-batch": f"{photos}: its training split holds 12 samples, fewer than one batch of 64 "
                                          "(--batch-size); give --batch-size 12 or less",
            "out-of-another-kind": "rows.jsonl", "workers": "--workers"}[case]
    if case == "bench-rows-without-the-batch":
        extra = ["--bench-rows", str(write_jsonl(tmp_path / "b.jsonl", [bench(64)]))]
    elif case == "bench-rows-a-device":
        extra = ["--bench-rows", "/dev/zero"]
    elif case == "fewer-samples-than-a-batch":  # the 12 images of the training split, told apart from the batch
        extra = ["--batch-size", "64"]
    elif case == "bad-data":
        data = str(write_image_folder(tmp_path / "bad", per_class=1))
        (tmp_path / "bad" / "empty").mkdir()
    elif case == "out-of-another-kind":
        write_jsonl(out, [bench(64)])
    else:
        extra = ["--workers", "1,-1"]
    before = out.read_bytes() if out.exists() else None
    line = cli_error("data", "bench", data, *WORKLOAD, *extra, "--out", str(out))
    assert said in line, line
    assert (out.read_bytes() if out.exists() else None) == before
