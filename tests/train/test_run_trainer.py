"""A run folder says which trainer wrote it (`trainspeed.train.run_trainer`), and `trainspeed train
--resume` (the torch trainer) refuses one of `train --exported`, whose npz checkpoints it cannot
read, in one line: it never starts such a run over from step 0, drops its rows or rewrites its
settings and summary. A run of `train --exported` written before its settings named the exported
folder is known by its checkpoints, or its summary."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from train_runs import TINY_RUN

from trainspeed.train.config import TrainConfig
from trainspeed.train.run_trainer import EXPORTED, TORCH, recorded_trainer

RUN = ["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "30", "--num-workers", "0",
       "--resume"]


def exported_run(folder: Path, *, settings_name_it: bool = True, checkpoint: bool = True) -> Path:
    """A run folder as `train --exported` leaves it (its checkpoint's bytes need not load: the
    refusal reads none)."""
    folder.mkdir()
    config = TrainConfig(workload="mahjong", size="tiny", target="jax:jit:fp32", data="data", steps=20)
    if settings_name_it:
        config = dataclasses.replace(config, exported="exported/mahjong-tiny")
    (folder / "train_config.json").write_text(config.to_json() + "\n")
    rows = [{"kind": "train", "step": step, "loss": 1.0} for step in (5, 10, 15, 20)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "summary.json").write_text(json.dumps({"kind": "train-summary", "last_step": 20,
                                                     "data": {"exported": "exported/mahjong-tiny"}}))
    if checkpoint:
        (folder / "checkpoints").mkdir()
        for step in (10, 20):
            (folder / "checkpoints" / f"step-{step:09d}.npz").write_bytes(b"PK\x05\x06" + bytes(18))
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name != ".lock"}


@pytest.mark.parametrize("settings_name_it, checkpoint", [(True, True), (False, True), (False, False)],
                         ids=["its-settings-say", "its-checkpoints-say", "its-summary-says"])
def test_the_torch_trainer_refuses_to_resume_a_run_of_exported_steps_in_one_line(
        tmp_path: Path, cli_error, settings_name_it: bool, checkpoint: bool) -> None:
    run = exported_run(tmp_path / "run", settings_name_it=settings_name_it, checkpoint=checkpoint)
    assert recorded_trainer(run) == EXPORTED
    before = contents(run)
    error = cli_error(*RUN, "--out", str(run))
    assert f"{run} holds a run of `trainspeed train --exported`" in error, error
    assert "continue it with `trainspeed train --exported DIR --resume`" in error
    assert contents(run) == before


def test_a_torch_run_is_the_torch_trainers(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text(TrainConfig().to_json())
    assert recorded_trainer(run) == TORCH
    assert recorded_trainer(tmp_path / "nothing") is None
