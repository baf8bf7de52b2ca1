"""`shard-state` splits the state over the devices of `train --nproc N`: every command whose step
runs on one device refuses it in one line, before it writes anything."""

from __future__ import annotations

import pytest

TARGET = "jax:jit:fp32:shard-state"
ONE_LINE = "shard-state splits the state over the devices of `train --nproc N`, and this step runs on one device"


@pytest.mark.parametrize("command", [
    ["bench", "--workload", "mahjong", "--size", "tiny", "--target", TARGET, "--batch-sizes", "8", "--no-plot"],
    ["train", "--workload", "mahjong", "--size", "tiny", "--target", TARGET, "--synthetic-data", "--steps", "2",
     "--batch-size-per-device", "8"],
    ["train", "--workload", "mahjong", "--size", "tiny", "--target", TARGET, "--synthetic-data", "--steps", "2",
     "--batch-size-per-device", "8", "--nproc", "1"],
    ["export", "--workload", "mahjong", "--size", "tiny", "--target", TARGET, "--platform", "cpu", "--batch-sizes", "8"],
])
def test_shard_state_on_one_device_is_refused_before_anything_is_written(cli_error, tmp_path, command):
    out = tmp_path / "out" / "rows.jsonl" if command[0] == "bench" else tmp_path / "out"
    assert ONE_LINE in cli_error(*command, "--out", str(out))
    assert not out.exists()
