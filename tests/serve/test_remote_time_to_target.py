"""A run on a remote target validates on a host copy of the server's weights, so it records its
time to target like a local run; the noise scale, whose gradients stay on the server, is said to be
not measured."""

from __future__ import annotations

import json

import pytest

from trainspeed.cli import main

pytestmark = pytest.mark.e2e


def test_a_remote_run_reaches_its_goal_on_validations_of_the_servers_weights(server, selfplay_data, tmp_path,
                                                                           capsys) -> None:
    out = tmp_path / "run"
    code = main(["train", "--workload", "mahjong", "--size", "tiny", "--data", str(selfplay_data),
                 "--target", f"remote:127.0.0.1:{server.address.port}/cpu:eager:fp32", "--batch-size-per-device", "16",
                 "--steps", "12", "--eval-every-samples", "64", "--eval-batches", "1", "--threads", "1", "--no-progress",
                 "--num-workers", "0", "--log-every", "2", "--until", "val/loss<=100", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "noise scale is not measured on remote:" in printed
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if row["kind"] == "val"] == [4, 8, 12]
    (reached,) = [row for row in rows if row["kind"] == "time-to-target"]
    assert reached["reached"] and reached["step"] == 4 and reached["target"].startswith("remote:")
    assert not [row for row in rows if row["kind"] == "noise-scale"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["noise_scale"] is None and summary["validation"]["loss"] > 0
