"""A policy trained briefly on self-play data already beats random players, with an interval to show it."""

from __future__ import annotations

import json

import pytest
from child_commands import run_trainspeed

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_a_trained_tiny_policy_beats_random_opponents(tmp_path, selfplay_data):
    run, out = tmp_path / "run", tmp_path / "eval.jsonl"
    trained = run_trainspeed("train", "--workload", "mahjong", "--size", "tiny", "--data", str(selfplay_data), "--steps", "30",
                             "--batch-size-per-device", "256", "--lr", "3e-3", "--lr-scaling", "none", "--threads", "2",
                             "--out", str(run), "--no-progress")
    assert trained.returncode == 0, trained.stderr
    played = run_trainspeed("eval", "mahjong", "--policy", str(run), "--opponent", "random", "--games", "24",
                            "--out", str(out), "--no-progress", "--no-plot")
    assert played.returncode == 0, played.stderr
    row = json.loads(out.read_text())
    low, high = row["mean_rank_ci95"]
    assert high < 2.5, row["mean_rank_ci95"]
    assert row["policy_step"] == 30 and row["rank_distribution"][0] > 0.5
