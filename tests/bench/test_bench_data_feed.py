"""`trainspeed bench --feed data --data PATH`: each timed step's batch read in place by a training
rank's loader, its row beside the device feed's in one run, recording what it read; data the
workload cannot read refused in one line before anything is measured. In the test's process."""

from __future__ import annotations

import csv
import html
import json
import os
from pathlib import Path

import pytest
from in_place_data import snapshot, write_image_folder, write_tokens

from trainspeed.cli import main
from trainspeed.data.base import LoaderConfig
from trainspeed.data.in_place import open_images

WORKLOAD = ["--workload", "timm:test_resnet", "--size", "tiny,res=16,classes=3", "--targets", "cpu:eager:fp32"]
QUICK = ["--warmup-steps", "0", "--windows", "1", "--min-window-s", "0.01", "--max-steps-per-window", "2",
         "--threads", "1", "--peak-tflops", "1", "--no-plot", "--no-progress"]


NOT_UTF8 = os.fsdecode(b"ph\xffotos")
"""A folder name whose bytes are not UTF-8, as Python's os functions hold it (a lone surrogate)."""


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("bench_data_feed") / NOT_UTF8, per_class=3)


def test_the_data_feed_times_steps_on_the_data_beside_the_device_feed_and_records_what_it_read(
        photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    before = snapshot(photos)
    out = tmp_path / "bench.jsonl"
    assert main(["bench", *WORKLOAD, "--batch-sizes", "4", "--feed", "device,data", "--data", str(photos),
                 "--num-workers", "0", "--out", str(out), *QUICK]) == 0
    device, data = [json.loads(line) for line in out.read_text().splitlines()]
    assert (device["feed"], data["feed"]) == ("device", "data") and device["run_id"] == data["run_id"]
    assert device["status"] == data["status"] == "ok" and data["samples_per_s"] > 0
    assert device["data"] is None and device["data_fingerprint"] is None
    record = open_images(photos, LoaderConfig(batch_size=4), 16).loader.data_record()
    assert data["data"] == str(photos) and data["data_format"] == "image-folder"
    assert (data["data_files"], data["data_samples"], data["data_fingerprint"]) == (
        record["files"], record["samples"], record["fingerprint"])
    assert (data["data_workers"], data["data_skipped"]) == (0, 0)
    assert data["bytes_per_step"] == 4 * 3 * 16 * 16 + 4 * 8  # uint8 images and int64 labels, no sample ids
    assert "cpu:eager:fp32 data-fed" in capsys.readouterr().out
    assert snapshot(photos) == before
    # the folder's name is not UTF-8: the row keeps its bytes, the CSV table and the page show them
    assert os.fsencode(data["data"]) == os.fsencode(photos)
    with out.with_suffix(".csv").open(encoding="utf-8") as table:
        assert [row["data"] for row in csv.DictReader(table)] == ["", str(photos).replace(NOT_UTF8, r"ph\xffotos")]
    page, again = tmp_path / "report.html", tmp_path / os.fsdecode(b"b\xffench.jsonl")
    again.write_bytes(out.read_bytes())  # two files of rows: the figures' titles name them
    assert main(["report", str(out), str(again), "--out", str(page)]) == 0
    shown = html.unescape(page.read_text(encoding="utf-8"))
    assert r"--data '" + str(photos).replace(NOT_UTF8, r"ph\xffotos") in shown and r"(b\xffench.jsonl)" in shown


@pytest.mark.parametrize("case", ["feed-data-without-data", "data-without-feed-data", "tokens-for-a-vision-model",
                                  "fewer-samples-than-a-batch", "no-such-path"])
def test_data_the_bench_cannot_feed_is_one_line_before_anything_is_measured(photos: Path, tmp_path: Path, case: str,
                                                                           cli_error) -> None:
    out = tmp_path / "bench.jsonl"
    tokens = write_tokens(tmp_path / "text.bin", 400)
    args, said = {
        "feed-data-without-data": (["--feed", "data"], "--feed data reads each step's batch from --data: give --data"),
        "data-without-feed-data": (["--data", str(photos)], "is read only by --feed data: add it"),
        "tokens-for-a-vision-model": (["--feed", "data", "--data", str(tokens)], "a token file, which holds no "
                                      "labelled images"),
        "fewer-samples-than-a-batch": (["--feed", "data", "--data", str(photos), "--batch-sizes", "4,64"],
                                       "fewer than batch 64; lower --batch-sizes"),
        "no-such-path": (["--feed", "data", "--data", str(tmp_path / "gone")], "gone: no such file or folder"),
    }[case]
    batch = [] if "--batch-sizes" in args else ["--batch-sizes", "4"]
    line = cli_error("bench", *WORKLOAD, *batch, *args, "--num-workers", "0", "--out", str(out), *QUICK)
    assert said in line, line
    assert not out.exists()
