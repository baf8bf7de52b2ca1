"""A device family that only the environment names runs `bench`, and `train` on 1 and 2 ranks.

The family (toy_target.HostTarget) is registered for the CLI and every process it starts through
TRAINSPEED_TARGET_FAMILIES; nothing in trainspeed knows it. It drives the host CPU, written
against the Target protocol from scratch (not a subclass of the built-in CPU family), and names
itself in `device_name`, so the rows prove it ran.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from child_commands import TESTS, run_trainspeed, trainspeed_env
from toy_target import DEVICE_NAME

pytestmark = pytest.mark.e2e


def _trainspeed(*args: str) -> subprocess.CompletedProcess:
    env = trainspeed_env(TESTS, TRAINSPEED_TARGET_FAMILIES="host=toy_target:HostTarget")
    return run_trainspeed(*args, env=env, timeout=300)


@pytest.mark.slow
def test_bench_measures_through_the_new_family(tmp_path: Path) -> None:
    out = tmp_path / "bench.jsonl"
    result = _trainspeed("bench", "--workload", "mahjong", "--size", "tiny", "--targets", "host:eager:fp32",
                         "--batch-sizes", "16", "--windows", "1", "--min-window-s", "0.01", "--warmup-steps", "1",
                         "--peak-tflops", "1", "--threads", "1", "--no-progress", "--no-plot", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["target"] == "host:eager:fp32" and row["device_name"] == DEVICE_NAME
    assert row["status"] == "ok" and row["samples_per_s"] > 0


@pytest.mark.slow
def test_train_runs_on_one_and_two_ranks_of_the_new_family(tmp_path: Path) -> None:
    for nproc in (1, 2):
        out = tmp_path / f"ranks{nproc}"
        result = _trainspeed("train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data",
                             "--target", "host:eager:fp32", "--nproc", str(nproc), "--batch-size-per-device", "8",
                             "--steps", "4", "--threads", "1", "--no-progress", "--out", str(out))
        assert result.returncode == 0, result.stdout + result.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["target"] == "host:eager:fp32" and summary["world_size"] == nproc
        assert summary["last_step"] == 4 and summary["samples"] == 4 * 8 * nproc
