"""No silent change to the learning rate a workload or the user set: a run prints the peak LR it
derived and how before its first step, records it in summary.json and its train_config.json says
the rule; a workload may declare the batch its LR was tuned at, or that it is never scaled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_runs import REPO_ROOT, TINY_RUN

from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.train.config import LRConfig, resolve_lr

EXAMPLES = REPO_ROOT / "examples"
CHARLM = ["--workload", "char_lm_workload:CharLMWorkload", "--size", "tiny"]


def _trainspeed_train(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """`trainspeed train ARGS...` in this process (what is tested is what it prints and records,
    not its process), the examples' workloads importable: its exit code, stdout and stderr."""
    code = main(["train", "--no-progress", "--threads", "1", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_a_scaled_learning_rate_is_printed_and_recorded(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    code, stdout, stderr = _trainspeed_train(capsys, *TINY_RUN, "--synthetic-data", "--steps", "2",
                                             "--batch-size-per-device", "32", "--out", str(out))
    assert code == 0, stderr
    lines = [line for line in stdout.splitlines() if line.startswith("train: peak learning rate")]
    assert lines == ["train: peak learning rate policy 0.00075 = 0.003 (--lr) x 0.25 (sqrt of global batch 32 / "
                     "reference batch 512; --lr-scaling none keeps it as given); warm-up 1 steps, cosine to 0.1x"]
    recorded = json.loads((out / "summary.json").read_text())["learning_rates"]
    assert recorded["given"] == {"policy": 0.003} and recorded["peak"] == {"policy": pytest.approx(0.00075)}
    assert (recorded["scaling"], recorded["reference_batch"], recorded["global_batch"]) == ("sqrt", 512, 32)
    config = json.loads((out / "train_config.json").read_text())["lr"]
    assert (config["scaling"], config["reference_batch"]) == ("sqrt", 512)


def test_a_workload_that_declares_no_reference_batch_trains_at_its_own_rate(
        tmp_path: Path, capsys: pytest.CaptureFixture, examples_importable: None) -> None:
    out = tmp_path / "run"
    code, stdout, stderr = _trainspeed_train(capsys, *CHARLM, "--synthetic-data", "--steps", "2",
                                             "--batch-size-per-device", "32", "--out", str(out))
    assert code == 0, stderr
    assert ("train: peak learning rate lm 0.002 = 0.002 (the workload's), not scaled (the workload declares no "
            "reference batch)") in stdout
    recorded = json.loads((out / "summary.json").read_text())["learning_rates"]
    assert recorded["peak"] == recorded["given"] == {"lm": 0.002} and recorded["scaling"] == "none"
    assert json.loads((out / "train_config.json").read_text())["lr"]["reference_batch"] is None


def test_a_scaling_rule_without_a_reference_batch_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture, examples_importable: None) -> None:
    code, _, stderr = _trainspeed_train(capsys, *CHARLM, "--synthetic-data", "--steps", "2", "--lr-scaling", "sqrt",
                                        "--out", str(tmp_path / "run"))
    assert code == 2
    (line,) = stderr.strip().splitlines()
    assert line.startswith("trainspeed: error: train: --lr-scaling sqrt needs the batch the LR was tuned at")
    assert not (tmp_path / "run").exists()


def test_the_flags_override_what_the_workload_declares() -> None:
    assert resolve_lr(LRConfig(), 512) == LRConfig(scaling="sqrt", reference_batch=512)
    assert resolve_lr(LRConfig(), None) == LRConfig(scaling="none", reference_batch=None)
    assert resolve_lr(LRConfig(reference_batch=64), None) == LRConfig(scaling="sqrt", reference_batch=64)
    assert resolve_lr(LRConfig(scaling="none"), 512) == LRConfig(scaling="none", reference_batch=512)
    with pytest.raises(UsageError, match="--lr-scaling linear needs"):
        resolve_lr(LRConfig(scaling="linear"), None)
