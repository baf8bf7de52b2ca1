"""The batch-size study's bookkeeping: the flags each run gets, the best learning rate, the pairing."""

from __future__ import annotations

import pytest

from benchmarks.batch_size_study import RunSpec, StudyConfig, batch_row, comparison_row, peak_lr, train_command


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_every_run_sees_the_same_samples_and_warm_up_through_ranks_times_batch():
    config = StudyConfig(data="d", nproc=2, batches=(256, 8192), samples=16384, warmup_samples=4096, val_samples=8192)
    small, large = (train_command(config, RunSpec(batch, 2.0, 1)) for batch in (256, 8192))
    assert (_flag(small, "--batch-size-per-device"), _flag(small, "--steps"), _flag(small, "--warmup-steps")) == ("128", "64", "16")
    assert (_flag(large, "--batch-size-per-device"), _flag(large, "--steps"), _flag(large, "--warmup-steps")) == ("4096", "2", "1")
    assert _flag(small, "--nproc") == "2" and _flag(small, "--seed") == "1"
    assert _flag(small, "--eval-every") == _flag(large, "--eval-every") == "2"  # the largest batch's steps
    assert (_flag(small, "--eval-batches"), _flag(large, "--eval-batches")) == ("32", "1")  # 8192 samples each
    assert _flag(small, "--lr") == "0.003" and _flag(small, "--lr-scaling") == "sqrt"
    assert peak_lr(config, RunSpec(8192, 2.0, 1)) == pytest.approx(1.5e-3 * 2 * 4)


def test_batches_that_do_not_fit_the_budget_or_the_ranks_are_refused():
    with pytest.raises(SystemExit, match="batch 768"):
        StudyConfig(data="d", batches=(768,), samples=131072).check()
    with pytest.raises(SystemExit, match="batch 6"):
        StudyConfig(data="d", nproc=4, batches=(6,), samples=12).check()


def _run(factor: float, seed: int, loss: float) -> dict:
    return {"lr_factor": factor, "seed": seed, "val_loss": loss, "val_accuracy": 0.5, "majority_baseline": 0.2,
            "peak_lr": factor, "steps": 4, "equal_steps_val_loss": loss, "equal_steps_val_accuracy": 0.5,
            "train_wall_s": 1.0}


def _eval(deal_ranks: list[list[int]]) -> dict:
    return {"games": 4 * len(deal_ranks), "deals": len(deal_ranks), "deal_ranks": deal_ranks, "mean_rank": 2.5,
            "mean_rank_ci95": [2.0, 3.0], "mean_rank_ci95_half_width": 0.5, "mean_score_delta": 0.0}


def test_the_best_learning_rate_has_the_lowest_loss_averaged_over_seeds():
    runs = [_run(1.0, 0, 1.0), _run(1.0, 1, 1.6), _run(2.0, 0, 1.2), _run(2.0, 1, 1.3)]
    row = batch_row(StudyConfig(data="d"), 256, runs, [_eval([[1, 2, 3, 4], [2, 2, 3, 3]])] * 2)
    assert row["best_lr_factor"] == 2.0 and row["val_loss"] == pytest.approx(1.25)
    assert row["mean_rank"] == 2.5 and row["eval_games"] == 16


def test_the_comparison_pairs_deals_and_is_negative_when_the_large_batch_ranks_better():
    large = [_eval([[1, 1, 2, 2], [2, 2, 2, 2], [1, 2, 1, 2]])]
    small = [_eval([[2, 2, 3, 3], [3, 3, 3, 4], [2, 3, 2, 3]])]
    row = comparison_row(8192, 256, {8192: large, 256: small})
    assert row["mean_rank_difference"] == pytest.approx((-1 - 1.25 - 1) / 3)
    assert row["deals"] == 3 and row["ci95"][1] < 0
