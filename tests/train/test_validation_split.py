"""A run that needs validation (`--until`) refuses, in one line and before it trains, data whose
validation split holds no sample: an empty val file, or too little data for the held-out share to
hold one window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from in_place_data import write_tokens

from trainspeed.cli import main

TOY = ["--workload", "toy_workload:token_windows", "--num-workers", "0", "--threads", "1", "--no-progress"]
"""The toy reads windows of 8 ids (its features) of a token file."""


def _data(tmp_path: Path, kind: str) -> Path:
    if kind == "empty-val-file":
        folder = tmp_path / "text"
        folder.mkdir()
        write_tokens(folder / "train.bin", 2_000, vocabulary=256)
        (folder / "val.bin").write_bytes(b"")
        return folder
    ids = tmp_path / "one-window.bin"  # 8 ids: one window, which training takes; 5% of one is none
    np.arange(8, dtype=np.uint16).tofile(ids)
    return ids


@pytest.mark.parametrize("kind", ["empty-val-file", "too-few-windows"])
def test_a_goal_on_data_without_a_validation_sample_is_one_line_before_training(tmp_path: Path, cli_error,
                                                                               kind: str) -> None:
    data = _data(tmp_path, kind)
    message = cli_error("train", *TOY, "--data", str(data), "--until", "val/accuracy>=0.5", "--stop-at-target",
                        "--steps", "50", "--batch-size-per-device", "1", "--out", str(tmp_path / "run"))
    assert message == (f"trainspeed: error: train: --until val/accuracy>=0.5 needs validation, and the validation "
                       f"split of --data {data} holds no sample (too little data for one after its split); give more "
                       "data, or a validation split of its own (an image folder's val/ tree, a val.bin, val-*.tar "
                       "shards, a dataset's validation split)")
    assert not (tmp_path / "run").exists()


def test_without_a_goal_the_same_data_trains(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Only what needs validation asks for it: a run without a goal trains and says it cannot validate."""
    data = _data(tmp_path, "empty-val-file")
    assert main(["train", *TOY, "--data", str(data), "--steps", "2", "--batch-size-per-device", "4",
                 "--out", str(tmp_path / "run")]) == 0
    assert "the validation split is empty" in capsys.readouterr().out
