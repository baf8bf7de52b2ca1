"""StyleGAN3 trains through the same data-parallel loop, reading its image dataset on every rank."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from train_runs import latest_payload, run_train

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_stylegan3_trains_on_two_ranks_from_its_image_dataset(tmp_path: Path, image_data_args: list[str]) -> None:
    out = tmp_path / "run"
    result = run_train("--workload", "stylegan3", "--size", "tiny-t", *image_data_args, "--nproc", "2",
                       "--batch-size-per-device", "2", "--steps", "2", "--out", str(out), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workload"] == "stylegan3" and summary["samples"] == 2 * 2 * 2
    assert math.isfinite(summary["final_loss"]) and summary["validation"] is None
    payload = latest_payload(out)
    assert set(payload["trainable"]["networks"]) == {"G", "D", "G_ema"} and payload["trainable"]["step"] == 2
