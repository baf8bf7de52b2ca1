"""The report's fixtures: a user's image classifier trained on two ranks by `trainspeed train` (the
Mahjong run is the session's `tiny_run`), and the browser for the browser test."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from browser import ensure_chromium
from child_commands import run_child

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"


def _trainspeed(*args: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), str(EXAMPLES), env.get("PYTHONPATH")]))
    env.setdefault("PJRT_DEVICE", "CPU")
    result = run_child([sys.executable, "-m", "trainspeed", *args], env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


@pytest.fixture(scope="session")
def classifier_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/image_classifier_workload.py on two ranks: its own metrics, top1_accuracy and mean_loss."""
    folder = tmp_path_factory.mktemp("classifier")
    sys.path.insert(0, str(EXAMPLES))
    from image_classifier_workload import write_dataset

    dataset = write_dataset(folder / "images.npz", samples=300)
    _trainspeed("train", "--workload", "image_classifier_workload:ImageClassifierWorkload", "--size", "tiny",
                "--data", str(dataset), "--nproc", "2", "--batch-size-per-device", "16", "--steps", "12",
                "--eval-every", "4", "--log-every", "2", "--threads", "1", "--no-progress", "--out", str(folder / "run"))
    return folder / "run"


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium (installed with apt-get when missing and we are root), or a skip that says why not."""
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[test]')")
    path, reason = ensure_chromium()
    if path is None:
        pytest.skip(reason)
    return path
