"""Fixtures of the exported path's tests (the helpers they share are in exported_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from exported_runs import EXPORT, train_args
from shared_builds import built_once

from trainspeed.cli import main


@pytest.fixture(scope="session")
def small_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Mahjong tiny's step exported for this CPU at batch sizes 8 and 16. Tests read it; one that
    changes it changes a copy."""
    def build(folder: Path) -> None:
        assert main([*EXPORT, "--out", str(folder / "export")]) == 0

    return built_once(tmp_path_factory, "small_export", build) / "export"


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory: pytest.TempPathFactory, small_export: Path, selfplay_data: Path) -> Path:
    """A finished run of `train --exported` (20 steps of batch 8) with checkpoints at steps 10 and
    20, each carrying the watch of a goal it did not meet. Tests read it; one that changes it
    changes a copy."""
    def build(folder: Path) -> None:
        assert main(train_args(small_export, selfplay_data, folder / "run")) == 0

    return built_once(tmp_path_factory, "finished_exported_run", build) / "run"
