"""A policy trained briefly on self-play data already beats random players, with an interval to show it."""

from __future__ import annotations

import json

import pytest

from eval_runs import run_trainspeed


@pytest.mark.slow
def test_a_trained_tiny_policy_beats_random_opponents(tmp_path):
    data, run, out = tmp_path / "selfplay", tmp_path / "run", tmp_path / "eval.jsonl"
    made = run_trainspeed("data", "mahjong-selfplay", "--games", "8", "--workers", "2", "--out", str(data),
                          "--seed", "2", "--no-progress")
    assert made.returncode == 0, made.stderr
    trained = run_trainspeed("train", "--workload", "mahjong", "--size", "tiny", "--data", str(data), "--steps", "30",
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
