"""A workload that is not Mahjong trains on its own real data, with its own validation metric,
through `trainspeed train`: the trainer names no workload key."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from train_runs import REPO_ROOT, TINY_RUN

from trainspeed.cli import main

pytestmark = pytest.mark.e2e

EXAMPLES = REPO_ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))
from image_classifier_workload import write_dataset  # noqa: E402

WORKLOAD = ["--workload", "image_classifier_workload:ImageClassifierWorkload", "--size", "tiny"]


@pytest.mark.parametrize("nproc", [1, 2])
def test_an_image_classifier_reports_its_own_metric_in_the_summary_and_tensorboard(
        nproc: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture) -> None:
    """The command in this process (one rank trains in it; two are its children, which import the
    workload from PYTHONPATH): what is tested is the workload's metric, not the command's process.
    capfd: the output of every process of the run."""
    dataset = write_dataset(tmp_path / "images.npz")
    out = tmp_path / "run"
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")])))
    code = main(["train", *TINY_RUN, *WORKLOAD, "--data", str(dataset), "--nproc", str(nproc), "--batch-size-per-device",
                 str(32 // nproc), "--epochs", "3", "--eval-every", "20", "--out", str(out)])
    printed = capfd.readouterr()
    assert code == 0, printed.out + printed.err
    validation = json.loads((out / "summary.json").read_text())["validation"]
    assert set(validation) == {"top1_accuracy", "mean_loss"}
    assert validation["top1_accuracy"] > 0.9  # chance is 1/3; the classes are easy to tell apart
    assert "top1_accuracy" in printed.out

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    accuracy = events.Scalars("val/top1_accuracy")
    assert len(accuracy) >= 2 and accuracy[-1].value == pytest.approx(validation["top1_accuracy"])
