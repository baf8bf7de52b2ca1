"""Run directories the evaluation tests read: a Mahjong policy trained one step, and look-alikes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]


def train_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


def run_trainspeed(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainspeed", *args], env=train_env(), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)


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
    (out / "checkpoints").mkdir(parents=True)
    pointer = policy_run / "checkpoints" / "latest"
    payload = torch.load(pointer.parent / pointer.read_text().strip(), map_location="cpu", weights_only=False)
    config = json.loads(payload["config"])
    config["workload"] = "stylegan3"
    payload["config"] = json.dumps(config)
    torch.save(payload, out / "checkpoints" / "step-000000001.pt")
    (out / "checkpoints" / "latest").write_text("step-000000001.pt\n")
    return out
