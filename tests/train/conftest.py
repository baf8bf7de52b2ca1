"""Fixtures of the trainer's tests (the helpers they share are in train_runs.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from train_runs import REPO_ROOT, train_env


@pytest.fixture(scope="session")
def data_args(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """22 self-play games made by the data command (game 20 is the first in the validation split)."""
    out = tmp_path_factory.mktemp("selfplay")
    result = subprocess.run(
        [sys.executable, "-m", "trainspeed", "data", "mahjong-selfplay", "--games", "22", "--workers", "1",
         "--out", str(out), "--seed", "0"],
        env=train_env(), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return ["--data", str(out)]


@pytest.fixture(scope="session")
def image_data_args(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A StyleGAN3 image dataset of 32x32 images made by `trainspeed data images` from 24 PNGs."""
    source = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for index in range(24):
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(source / f"{index:02d}.png")
    dataset = tmp_path_factory.mktemp("images") / "images.zip"
    result = subprocess.run(
        [sys.executable, "-m", "trainspeed", "data", "images", str(source), "--out", str(dataset), "--resolution", "32"],
        env=train_env(), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return ["--data", str(dataset)]
