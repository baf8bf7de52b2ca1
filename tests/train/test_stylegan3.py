"""StyleGAN3 trains through the same data-parallel loop, reading its image dataset on every rank."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from train_runs import STYLEGAN3_STEPS, latest_payload

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_stylegan3_trains_on_two_ranks_from_its_image_dataset(stylegan3_two_rank_run: Path) -> None:
    """The run of `stylegan3_args` (two ranks, 2 images each per step), which the kill -9 test resumes against."""
    summary = json.loads((stylegan3_two_rank_run / "summary.json").read_text())
    assert summary["workload"] == "stylegan3" and summary["samples"] == STYLEGAN3_STEPS * 2 * 2
    assert math.isfinite(summary["final_loss"]) and summary["validation"] is None
    payload = latest_payload(stylegan3_two_rank_run)
    assert set(payload["trainable"]["networks"]) == {"G", "D", "G_ema"}
    assert payload["trainable"]["step"] == STYLEGAN3_STEPS
