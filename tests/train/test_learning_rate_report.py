"""No silent change to the learning rate a workload or the user set: a run prints the peak LR it
derived and how before its first step, records it in summary.json and its train_config.json says
the rule; a workload may declare the batch its LR was tuned at, or that it is never scaled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from child_commands import run_child
from train_runs import REPO_ROOT, run_train, train_env

from trainspeed.errors import UsageError
from trainspeed.train.config import LRConfig, resolve_lr

EXAMPLES = REPO_ROOT / "examples"
CHARLM = ["--workload", "char_lm_workload:CharLMWorkload", "--size", "tiny"]


def _trainspeed_train(*args: str) -> subprocess.CompletedProcess:
    """`trainspeed train` without the shared runs' --lr, so the workload's own LR is what is given."""
    return run_child([sys.executable, "-m", "trainspeed", "train", "--no-progress", "--threads", "1", *args],
                          env=train_env(str(EXAMPLES)), timeout=300)


@pytest.mark.e2e
def test_a_scaled_learning_rate_is_printed_and_recorded(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_train("--synthetic-data", "--steps", "2", "--batch-size-per-device", "32", "--out", str(out))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("train: peak learning rate")]
    assert lines == ["train: peak learning rate policy 0.00075 = 0.003 (--lr) x 0.25 (sqrt of global batch 32 / "
                     "reference batch 512; --lr-scaling none keeps it as given); warm-up 1 steps, cosine to 0.1x"]
    recorded = json.loads((out / "summary.json").read_text())["learning_rates"]
    assert recorded["given"] == {"policy": 0.003} and recorded["peak"] == {"policy": pytest.approx(0.00075)}
    assert (recorded["scaling"], recorded["reference_batch"], recorded["global_batch"]) == ("sqrt", 512, 32)
    config = json.loads((out / "train_config.json").read_text())["lr"]
    assert (config["scaling"], config["reference_batch"]) == ("sqrt", 512)


@pytest.mark.e2e
def test_a_workload_that_declares_no_reference_batch_trains_at_its_own_rate(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _trainspeed_train(*CHARLM, "--synthetic-data", "--steps", "2", "--batch-size-per-device", "32",
                               "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert ("train: peak learning rate lm 0.002 = 0.002 (the workload's), not scaled (the workload declares no "
            "reference batch)") in result.stdout
    recorded = json.loads((out / "summary.json").read_text())["learning_rates"]
    assert recorded["peak"] == recorded["given"] == {"lm": 0.002} and recorded["scaling"] == "none"
    assert json.loads((out / "train_config.json").read_text())["lr"]["reference_batch"] is None


@pytest.mark.e2e
def test_a_scaling_rule_without_a_reference_batch_is_one_line(tmp_path: Path) -> None:
    result = _trainspeed_train(*CHARLM, "--synthetic-data", "--steps", "2", "--lr-scaling", "sqrt",
                               "--out", str(tmp_path / "run"))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("trainspeed: error: train: --lr-scaling sqrt needs the batch the LR was tuned at")
    assert not (tmp_path / "run").exists()


def test_the_flags_override_what_the_workload_declares() -> None:
    assert resolve_lr(LRConfig(), 512) == LRConfig(scaling="sqrt", reference_batch=512)
    assert resolve_lr(LRConfig(), None) == LRConfig(scaling="none", reference_batch=None)
    assert resolve_lr(LRConfig(reference_batch=64), None) == LRConfig(scaling="sqrt", reference_batch=64)
    assert resolve_lr(LRConfig(scaling="none"), 512) == LRConfig(scaling="none", reference_batch=512)
    with pytest.raises(UsageError, match="--lr-scaling linear needs"):
        resolve_lr(LRConfig(scaling="linear"), None)
