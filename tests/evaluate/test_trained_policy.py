"""A policy trained briefly on self-play data already beats random players, with an interval to show it."""

from __future__ import annotations

import json

import pytest

from trainspeed.cli import main

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_a_trained_tiny_policy_beats_random_opponents(tmp_path, tiny_run, capsys):
    """The session's tiny run (6 steps of batch 32 on self-play data) is the policy; the evaluation
    runs in this process, its child process is not what is tested."""
    out = tmp_path / "eval.jsonl"
    code = main(["eval", "mahjong", "--policy", str(tiny_run), "--opponent", "random", "--games", "24",
                 "--out", str(out), "--no-progress", "--no-plot"])
    assert code == 0, capsys.readouterr().err
    row = json.loads(out.read_text())
    low, high = row["mean_rank_ci95"]
    assert high < 2.5, row["mean_rank_ci95"]
    assert row["policy_step"] == 6 and row["rank_distribution"][0] > 0.5
