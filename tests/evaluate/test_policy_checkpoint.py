"""What `eval --policy/--opponent` reads from a run directory: data only, and the checkpoint a
resume would continue from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.train.train_runs import plant_payload
from trainspeed.cli import main

pytestmark = pytest.mark.e2e


def _eval(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(["eval", "mahjong", "--games", "4", "--no-progress", "--no-plot", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("flag", ["--policy", "--opponent"])
def test_a_planted_pickle_payload_never_runs_and_is_one_line(
    flag: str, tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    tampered, marker, out = tmp_path / "tampered", tmp_path / "payload-ran", tmp_path / "eval.jsonl"
    shutil.copytree(tiny_run, tampered)
    plant_payload(tampered, marker)
    other = ["--opponent", "rule-based"] if flag == "--policy" else ["--policy", str(tiny_run)]
    code, printed, err = _eval(capsys, flag, str(tampered), *other, "--out", str(out))
    assert not marker.exists(), "the checkpoint ran code"
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"trainspeed: error: {flag} {tampered}: ")
    assert "holds objects other than tensors and plain data" in lines[0]
    assert not out.exists()


def test_a_broken_latest_pointer_evaluates_the_newest_valid_checkpoint_and_says_so(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "checkpoints" / "latest").write_text("../../elsewhere.pt\n")
    code, printed, err = _eval(capsys, "--policy", str(run), "--opponent", "random", "--out", str(tmp_path / "e.jsonl"))
    assert code == 0, err
    assert f"--policy {run}: checkpoints/latest holds '../../elsewhere.pt', not the name of a checkpoint of this " \
           "run; evaluating step-000000006.pt, the newest valid checkpoint" in printed


def test_step_evaluates_that_checkpoint_and_a_step_not_kept_is_one_line(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert sorted(p.name for p in (tiny_run / "checkpoints").glob("step-*.pt")) == [
        f"step-{step:09d}.pt" for step in range(1, 7)]
    out = tmp_path / "e.jsonl"
    code, _, err = _eval(capsys, "--policy", str(tiny_run), "--step", "2", "--opponent", "random", "--out", str(out))
    assert code == 0, err
    row = json.loads(out.read_text().splitlines()[-1])
    assert row["policy_step"] == 2 and row["policy_checkpoint"].endswith("step-000000002.pt")
    code, _, err = _eval(capsys, "--policy", str(tiny_run), "--step", "7", "--out", str(tmp_path / "f.jsonl"))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--step 7: no checkpoint of that step (kept: 1, 2, 3, 4, 5, 6" in lines[0]


@pytest.mark.parametrize(("flag", "kind"), [("--policy", "fifo"), ("--opponent", "symlink-to-dev-zero")])
def test_a_checkpoint_that_is_no_regular_file_is_one_line_never_a_hang(
    flag: str, kind: str, untrained_run: Path, tmp_path: Path
) -> None:
    """The run's only checkpoint replaced by a FIFO or a link to /dev/zero, its sha256 line kept:
    refused without opening it for reading (a subprocess with a deadline, since the danger is a hang).
    Both flags read a run through one function (`read_run_checkpoint`, which names its flag), so each
    kind of file meets one of them and each flag one kind."""
    import os

    from child_commands import run_trainspeed

    run, out = tmp_path / "run", tmp_path / "eval.jsonl"
    shutil.copytree(untrained_run, run)
    checkpoint = run / "checkpoints" / "step-000000001.pt"
    checkpoint.unlink()
    if kind == "fifo":
        os.mkfifo(checkpoint)
    else:
        checkpoint.symlink_to("/dev/zero")
    other = ["--opponent", "rule-based"] if flag == "--policy" else ["--policy", str(untrained_run)]
    result = run_trainspeed("eval", "mahjong", flag, str(run), *other, "--games", "4", "--no-progress", "--no-plot",
                            "--out", str(out), timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert lines[0].startswith(f"trainspeed: error: {flag} {run}: ") and f"is {what}, not a regular file" in lines[0]
    assert not out.exists()
