"""Fixtures of the trainer's tests (the helpers they share are in train_runs.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
