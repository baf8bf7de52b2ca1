"""StyleGAN3 trains through the same data-parallel loop, reading its image dataset on every rank."""

from __future__ import annotations

import pytest

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from train_runs import REPO_ROOT, latest_payload, run_train, train_env


def _image_dataset(tmp_path: Path) -> Path:
    source = tmp_path / "photos"
    source.mkdir()
    rng = np.random.default_rng(0)
    for index in range(12):
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(source / f"{index:02d}.png")
    dataset = tmp_path / "images.zip"
    subprocess.run(
        [sys.executable, "-m", "trainspeed", "data", "images", str(source), "--out", str(dataset), "--resolution", "32"],
        env=train_env(), cwd=REPO_ROOT, check=True, capture_output=True, timeout=60,
    )
    return dataset


@pytest.mark.slow
def test_stylegan3_trains_on_two_ranks_from_its_image_dataset(tmp_path: Path) -> None:
    dataset = _image_dataset(tmp_path)
    out = tmp_path / "run"
    result = run_train("--workload", "stylegan3", "--size", "tiny-t", "--data", str(dataset), "--nproc", "2",
                       "--batch-size-per-device", "2", "--steps", "2", "--out", str(out), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workload"] == "stylegan3" and summary["samples"] == 2 * 2 * 2
    assert math.isfinite(summary["final_loss"]) and summary["validation"] is None
    payload = latest_payload(out)
    assert set(payload["trainable"]["networks"]) == {"G", "D", "G_ema"} and payload["trainable"]["step"] == 2
