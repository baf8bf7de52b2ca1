"""A policy trained briefly on self-play data plays better than the same network untrained, with an
interval to show it: training, not the network's shape or the engine's seats, makes the difference.

Against random players the comparison would say nothing: an untrained network already beats them
(its fixed preferences among the legal actions play better than a uniform draw). So the trained
policy plays against its own network at its initial weights, on the same deals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import run_ok

from trainspeed.cli import main
from trainspeed.train.checkpoint import find_checkpoint, save_checkpoint
from trainspeed.workloads import get_workload

pytestmark = pytest.mark.e2e

STEPS = 60
"""Steps of batch 32 the policy trains (seconds on one core): enough to beat its untrained network
clearly over 24 games, where the session's 6-step `tiny_run` is not."""
EVEN_RANK = 2.5
"""The mean rank of four equal players."""


@pytest.fixture(scope="module")
def trained_run(selfplay_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "trained"
    run_ok("train", "--workload", "mahjong", "--size", "tiny", "--data", str(selfplay_data), "--steps", str(STEPS),
           "--batch-size-per-device", "32", "--threads", "1", "--no-progress", "--out", str(out), timeout=300)
    return out


def untrained_twin(run: Path, out: Path) -> Path:
    """`run` as it was before its first step: its last checkpoint with every network put back to the
    weights its workload builds from the run's seed, which the trainer starts from (same network,
    settings and step; only the training undone)."""
    payload = find_checkpoint(run).payload
    config = json.loads(payload["config"])
    initial = get_workload(config["workload"]).build(config["size"], config["seed"])
    payload["trainable"]["networks"] = initial.state_dict()["networks"]
    save_checkpoint(out, int(payload["step"]), payload)
    return out


@pytest.mark.slow
def test_a_trained_policy_beats_its_own_untrained_network(tmp_path: Path, trained_run: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """One seat of the trained policy against three of its untrained network, 24 duplicate games:
    had training changed nothing, the four players would be equal and the interval of the mean rank
    would cover 2.5."""
    untrained = untrained_twin(trained_run, tmp_path / "untrained")
    out = tmp_path / "eval.jsonl"
    code = main(["eval", "mahjong", "--policy", str(trained_run), "--opponent", str(untrained), "--games", "24",
                 "--out", str(out), "--no-progress", "--no-plot"])
    assert code == 0, capsys.readouterr().err
    row = json.loads(out.read_text())
    low, high = row["mean_rank_ci95"]
    assert high < EVEN_RANK, row["mean_rank_ci95"]
    assert row["policy_step"] == STEPS and row["opponent_seed"] == row["policy_seed"]
