"""The report's fixtures: a user's image classifier trained on two ranks by `trainspeed train` (the
Mahjong run is the session's `tiny_run`), and the browser for the browser test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from browser import ensure_chromium
from child_commands import EXAMPLES, run_ok
from shared_builds import built_once


@pytest.fixture(scope="session")
def classifier_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/image_classifier_workload.py on two ranks: its own metrics, top1_accuracy and mean_loss."""
    def build(folder: Path) -> None:
        sys.path.insert(0, str(EXAMPLES))
        from image_classifier_workload import write_dataset

        dataset = write_dataset(folder / "images.npz", samples=300)
        run_ok("train", "--workload", "image_classifier_workload:ImageClassifierWorkload", "--size", "tiny",
               "--data", str(dataset), "--nproc", "2", "--batch-size-per-device", "16", "--steps", "12",
               "--eval-every", "4", "--log-every", "2", "--threads", "1", "--no-progress", "--out", str(folder / "run"),
               path=(EXAMPLES,), timeout=600)

    return built_once(tmp_path_factory, "classifier_run", build) / "run"


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium (installed with apt-get when missing and we are root), or a skip that says why not."""
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[test]')")
    path, reason = ensure_chromium()
    if path is None:
        pytest.skip(reason)
    return path
