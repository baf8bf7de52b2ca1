"""Run directories the evaluation tests read: a Mahjong policy trained one step, and look-alikes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_runs import run_trainspeed
from trainspeed.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint


@pytest.fixture(scope="session")
def policy_run(tmp_path_factory) -> Path:
    """A tiny Mahjong policy after one step on synthetic data: untrained, but a real run directory."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    result = run_trainspeed("train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data", "--steps", "1",
                            "--batch-size-per-device", "8", "--threads", "1", "--out", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def foreign_run(policy_run, tmp_path_factory) -> Path:
    """A run directory whose checkpoint says it trained another workload."""
    out = tmp_path_factory.mktemp("runs") / "foreign"
    payload = load_checkpoint(latest_checkpoint(policy_run))
    config = json.loads(payload["config"])
    config["workload"] = "stylegan3"
    payload["config"] = json.dumps(config)
    save_checkpoint(out, 1, payload)
    return out


@pytest.fixture(scope="session")
def selfplay_data(tmp_path_factory) -> Path:
    """Two self-play games of four rule-based agents, as `trainspeed data mahjong-selfplay` writes them."""
    out = tmp_path_factory.mktemp("data") / "selfplay"
    result = run_trainspeed("data", "mahjong-selfplay", "--games", "2", "--workers", "1", "--seed", "5",
                            "--out", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def kept_run(tmp_path_factory) -> Path:
    """A tiny Mahjong policy trained 3 steps on synthetic data, every step's checkpoint kept."""
    out = tmp_path_factory.mktemp("runs") / "kept"
    result = run_trainspeed("train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data", "--steps", "3",
                            "--batch-size-per-device", "8", "--threads", "1", "--checkpoint-every", "1",
                            "--keep-checkpoints", "0", "--out", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    return out
