"""The small CNN example as a user runs it: the script writes its images, `train` reaches the
example's goal on them; the shapes are told apart by their form, wherever they lie."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
from child_commands import EXAMPLES

from trainspeed.cli import main

pytestmark = pytest.mark.e2e


def test_the_script_writes_shapes_at_random_places_of_every_class(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "shapes.npz"
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / "small_cnn_workload.py"), str(path), "--samples", "400"])
    monkeypatch.syspath_prepend(str(EXAMPLES))
    runpy.run_path(str(EXAMPLES / "small_cnn_workload.py"), run_name="__main__")
    data = np.load(path)
    assert data["images"].shape == (400, 1, 16, 16) and data["images"].dtype == np.float32
    assert sorted(set(data["labels"].tolist())) == [0, 1, 2, 3]
    brightest = data["images"].reshape(400, -1).argmax(axis=1)
    assert len(set(brightest.tolist())) > 50  # the shape is not at one place


@pytest.mark.slow
def test_the_small_cnn_reaches_its_goal_in_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The training runs in this process: what is tested is the example, not the command's process."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from small_cnn_workload import write_dataset

    dataset = write_dataset(tmp_path / "shapes.npz", samples=6000)
    out = tmp_path / "run"
    assert main(["train", "--workload", "small_cnn_workload:SmallCNNWorkload", "--size", "tiny", "--data",
                 str(dataset), "--batch-size-per-device", "64", "--samples", "60000", "--until",
                 "val/top1_accuracy>=0.9", "--stop-at-target", "--eval-every-samples", "2048", "--warmup-steps", "16",
                 "--min-lr-ratio", "1", "--threads", "1", "--num-workers", "0", "--no-progress",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    goal = summary["time_to_target"]
    assert goal["reached"] and goal["samples"] < 60000, goal  # chance is 1/4
    assert summary["validation"]["top1_accuracy"] >= 0.9
