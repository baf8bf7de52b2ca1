"""`bench --noise-scale off,on`: each configuration runs without and with the one-rank noise-scale
meter, back to back in one run, as two series of its own, so the meter's cost is a ratio of one run."""

import json

import pytest

from trainspeed.cli import main


def test_off_and_on_are_two_series_of_one_run_at_every_batch(tmp_path):
    out = tmp_path / "bench.jsonl"
    assert main(["bench", "--workload", "mahjong", "--size", "tiny", "--targets", "cpu:eager:fp32",
                 "--batch-sizes", "8,16", "--noise-scale", "off,on", "--windows", "1", "--warmup-steps", "1",
                 "--min-window-s", "0.01", "--threads", "1", "--no-plot", "--no-progress", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["batch_size"], row["noise_scale"]) for row in rows] == \
        [(8, None), (8, "previous-step"), (16, None), (16, "previous-step")]
    assert len({row["run_id"] for row in rows}) == 1
    assert all(row["status"] == "ok" and row["samples_per_s"] > 0 for row in rows)


@pytest.mark.parametrize("text", ["maybe", "on,on", ","])
def test_a_variant_that_is_not_off_or_on_is_refused(cli_error, tmp_path, text):
    out = tmp_path / "bench.jsonl"
    line = cli_error("bench", "--noise-scale", text, "--out", str(out))
    assert f"--noise-scale {text!r}: give off or on" in line, line
    assert not out.exists()
