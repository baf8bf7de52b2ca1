"""Fixtures of the trainer's tests (the helpers they share are in train_runs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from child_commands import run_child
from PIL import Image
from train_runs import train_env


@pytest.fixture(scope="session")
def data_args(selfplay_data: Path) -> list[str]:
    """The flags of the session's self-play set (tests/conftest.py)."""
    return ["--data", str(selfplay_data)]


@pytest.fixture(scope="session")
def image_data_args(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A StyleGAN3 image dataset of 32x32 images made by `trainspeed data images` from 24 PNGs."""
    source = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for index in range(24):
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(source / f"{index:02d}.png")
    dataset = tmp_path_factory.mktemp("images") / "images.zip"
    result = run_child(
        [sys.executable, "-m", "trainspeed", "data", "images", str(source), "--out", str(dataset), "--resolution", "32"],
        env=train_env(), timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return ["--data", str(dataset)]
