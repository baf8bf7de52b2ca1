"""Fixtures of the trainer's tests (the helpers they share are in train_runs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from child_commands import run_child
from PIL import Image
from shared_builds import built_once
from train_runs import train_checkpointed, train_env


@pytest.fixture(scope="session")
def data_args(selfplay_data: Path) -> list[str]:
    """The flags of the session's self-play set (tests/conftest.py)."""
    return ["--data", str(selfplay_data)]


@pytest.fixture(scope="session")
def image_data_args(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A StyleGAN3 image dataset of 32x32 images made by `trainspeed data images` from 24 PNGs."""
    def build(folder: Path) -> None:
        source = folder / "photos"
        source.mkdir()
        rng = np.random.default_rng(0)
        for index in range(24):
            Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(source / f"{index:02d}.png")
        result = run_child(
            [sys.executable, "-m", "trainspeed", "data", "images", str(source), "--out", str(folder / "images.zip"),
             "--resolution", "32"], env=train_env(), timeout=60,
        )
        assert result.returncode == 0, result.stderr

    return ["--data", str(built_once(tmp_path_factory, "stylegan3_images", build) / "images.zip")]


@pytest.fixture(scope="session")
def two_rank_run(tmp_path_factory: pytest.TempPathFactory, data_args: list[str]) -> Path:
    """Two ranks on the session's self-play set, a checkpoint every 4 steps (`train_checkpointed`):
    the uninterrupted run that the data-parallel tests compare theirs with."""
    return built_once(tmp_path_factory, "two_rank_run", lambda folder: train_checkpointed(folder / "run", 2, data_args)) / "run"


@pytest.fixture(scope="session")
def stylegan3_two_rank_run(tmp_path_factory: pytest.TempPathFactory, image_data_args: list[str]) -> Path:
    """StyleGAN3 trained on two ranks from the session's image dataset (`stylegan3_args`), built once:
    the run that tests/train/test_stylegan3.py reads and the kill -9 test's uninterrupted reference."""
    from train_runs import STYLEGAN3_TWO_RANKS, run_train, stylegan3_args

    def build(folder: Path) -> None:
        result = run_train(*stylegan3_args(image_data_args), *STYLEGAN3_TWO_RANKS, "--out", str(folder / "run"),
                           timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr

    return built_once(tmp_path_factory, "stylegan3_two_rank_run", build) / "run"
