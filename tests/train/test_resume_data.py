"""`--resume` on other data than the run trained on: refused in one line before anything in the run
folder changes, where the path is the same and only the content differs (another path is a
changed setting, refused as such); the same data resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from child_commands import run_ok
from train_runs import TINY_RUN

from trainspeed.cli import main
from trainspeed.train.data_read import DATA_FILE

pytestmark = pytest.mark.e2e

RUN = ["train", *TINY_RUN, "--batch-size-per-device", "8", "--checkpoint-every", "3", "--num-workers", "0",
       "--eval-every", "0"]


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.fixture
def trained(tmp_path: Path, selfplay_data: Path) -> tuple[Path, Path]:
    """A run of 3 steps (a checkpoint at 3) on a copy of the session's self-play set."""
    data, out = tmp_path / "data", tmp_path / "run"
    shutil.copytree(selfplay_data, data)
    assert main([*RUN, "--data", str(data), "--steps", "3", "--out", str(out)]) == 0
    return data, out


def test_a_resume_on_data_written_again_in_the_same_folder_is_refused_and_changes_nothing(
        trained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data, out = trained
    recorded = json.loads((out / DATA_FILE).read_text())
    assert recorded["path"] == str(data) and recorded["fingerprint"]
    shutil.rmtree(data)
    run_ok("data", "mahjong-selfplay", "--games", "3", "--workers", "1", "--out", str(data), "--seed", "1",
           "--no-progress", timeout=120)
    before = _snapshot(out)
    capsys.readouterr()
    assert main([*RUN, "--data", str(data), "--steps", "6", "--out", str(out), "--resume"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"trainspeed: error: train: cannot resume {out}: --data {data} is not the data it trained "
                           f"on (fingerprint ") and recorded["fingerprint"][:12] in line
    assert _snapshot(out) == before


def test_the_same_data_resumes_to_the_end(trained: tuple[Path, Path]) -> None:
    data, out = trained
    assert main([*RUN, "--data", str(data), "--steps", "6", "--out", str(out), "--resume"]) == 0
    assert json.loads((out / "summary.json").read_text())["last_step"] == 6


def test_a_data_record_that_is_no_regular_file_is_refused_in_one_line(
        trained: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    data, out = trained
    (out / DATA_FILE).unlink()
    (out / DATA_FILE).mkdir()
    capsys.readouterr()
    assert main([*RUN, "--data", str(data), "--steps", "6", "--out", str(out), "--resume"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert DATA_FILE in line and "not a regular file" in line
