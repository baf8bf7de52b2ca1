"""Run directories the evaluation tests read besides the session's `tiny_run`: an untrained policy, and
a look-alike of a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import run_ok
from shared_builds import built_once

from trainspeed.train.checkpoint import (
    find_checkpoint,
    save_checkpoint,
)


@pytest.fixture(scope="session")
def foreign_run(tiny_run, tmp_path_factory) -> Path:
    """A run directory whose checkpoint says it trained another workload."""
    out = tmp_path_factory.mktemp("runs") / "foreign"
    payload = find_checkpoint(tiny_run).payload
    config = json.loads(payload["config"])
    config["workload"] = "stylegan3"
    payload["config"] = json.dumps(config)
    save_checkpoint(out, int(payload["step"]), payload)
    return out


@pytest.fixture(scope="session")
def untrained_run(tmp_path_factory) -> Path:
    """A tiny Mahjong policy after one step on synthetic data: the policy whose games the worker test's
    counts of forward passes were worked out on."""
    def build(folder: Path) -> None:
        run_ok("train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data", "--steps", "1",
               "--batch-size-per-device", "8", "--threads", "1", "--out", str(folder / "untrained"), "--no-progress")

    return built_once(tmp_path_factory, "untrained_run", build) / "untrained"
