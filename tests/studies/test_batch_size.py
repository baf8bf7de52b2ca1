"""The batch-size study's bookkeeping: the flags each run gets, the best learning rate, the
pairing of deals, the verdict, and bad settings refused before anything runs."""

from __future__ import annotations

import dataclasses

import pytest

from tests.report.report_rows import eval_row
from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.evaluate.mahjong import MahjongEvalRow
from trainspeed.rows import Source, parse_row
from trainspeed.studies.batch_size import (
    BatchSizeConfig,
    BatchSizeRunRow,
    RunSpec,
    batch_row,
    comparison_row,
    peak_lr,
    train_args,
    verdict,
)


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_every_run_sees_the_same_samples_and_warm_up_through_ranks_times_batch():
    config = BatchSizeConfig(data="d", out="o", nproc=2, batches=(256, 8192), samples=16384, warmup_samples=4096,
                             val_samples=8192)
    small, large = (train_args(config, RunSpec(batch, 2.0, 1)) for batch in (256, 8192))
    assert (_flag(small, "--batch-size-per-device"), _flag(small, "--steps"), _flag(small, "--warmup-steps")) == ("128", "64", "16")
    assert (_flag(large, "--batch-size-per-device"), _flag(large, "--steps"), _flag(large, "--warmup-steps")) == ("4096", "2", "1")
    assert _flag(small, "--nproc") == "2" and _flag(small, "--seed") == "1"
    assert _flag(small, "--eval-every") == _flag(large, "--eval-every") == "2"  # the largest batch's steps
    assert (_flag(small, "--eval-batches"), _flag(large, "--eval-batches")) == ("32", "1")  # 8192 samples each
    assert _flag(small, "--lr") == "0.003" and _flag(small, "--lr-scaling") == "sqrt"
    assert _flag(small, "--out") == "o/batch_size_runs/b256-lr2-s1"
    assert peak_lr(config, RunSpec(8192, 2.0, 1)) == pytest.approx(1.5e-3 * 2 * 4)


@pytest.mark.parametrize(("flags", "message"), [
    (["--batches", "768"], "global batch 768 must divide --samples 16384"),
    (["--nproc", "0"], "--nproc must be at least 1"),
    (["--eval-games", "6"], "--eval-games 6 must be a positive multiple of 4"),
    (["--lr-factors", "1,nan"], "--lr-factors '1,nan': give positive numbers"),
    (["--seeds", "-1"], "--seeds '-1': give integers >= 0"),
])
def test_bad_settings_are_one_line_and_exit_2_before_anything_runs(flags, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["study", "batch-size", "--samples", "16384", *flags, "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: ") and message in line
    assert not any(out.iterdir()) if out.exists() else True


def _run(factor: float, seed: int, loss: float) -> BatchSizeRunRow:
    return BatchSizeRunRow(
        study_id="s", run=f"r{factor}-{seed}", run_dir="d", global_batch=256, nproc=2, batch_size_per_device=128,
        lr_factor=factor, peak_lr=factor, seed=seed, steps=4, warmup_steps=1, samples=1024, val_loss=loss,
        val_accuracy=0.5, majority_baseline=0.2, val_samples=100.0, equal_steps=1, equal_steps_samples=256,
        equal_steps_val_loss=loss, equal_steps_val_accuracy=0.5, curve=[], train_wall_s=1.0, process_s=None,
        end_to_end_samples_per_s=100.0, command="trainspeed train")


def _eval(deal_ranks: list[list[int]]) -> MahjongEvalRow:
    row, _ = parse_row(MahjongEvalRow, eval_row("p", 1, 2.5), Source("test"))
    return dataclasses.replace(row, games=4 * len(deal_ranks), deals=len(deal_ranks), deal_ranks=deal_ranks)


def test_the_best_learning_rate_has_the_lowest_loss_averaged_over_seeds():
    runs = [_run(1.0, 0, 1.0), _run(1.0, 1, 1.6), _run(2.0, 0, 1.2), _run(2.0, 1, 1.3)]
    row = batch_row("s", BatchSizeConfig(data="d", out="o"), 256, runs, [_eval([[1, 2, 3, 4], [2, 2, 3, 3]])] * 2)
    assert row.best_lr_factor == 2.0 and row.val_loss == pytest.approx(1.25)
    assert row.mean_rank == 2.5 and row.eval_games == 16 and row.lr_sweep == {"1": 1.3, "2": 1.25}


def test_the_comparison_pairs_deals_and_says_supported_when_the_large_batch_ranks_better_everywhere():
    large = [_eval([[1, 1, 2, 2], [2, 2, 2, 2], [1, 2, 1, 2]])]
    small = [_eval([[2, 2, 3, 3], [3, 3, 3, 4], [2, 3, 2, 3]])]
    row = comparison_row("s", 8192, 256, {8192: large, 256: small})
    assert row.mean_rank_difference == pytest.approx((-1 - 1.25 - 1) / 3)
    assert row.deals == 3 and row.ci95[1] < 0 and row.verdict == "supported"


def test_an_interval_that_holds_zero_is_inconclusive_never_a_no():
    assert verdict([-0.08, 0.04]) == "inconclusive" and verdict(None) == "inconclusive"
    assert verdict([0.01, 0.2]) == "contradicted" and verdict([-0.2, -0.01]) == "supported"


def test_settings_and_a_bad_setting_in_the_config_itself():
    with pytest.raises(UsageError, match="global batch 6 must divide"):
        BatchSizeConfig(data="d", out="o", nproc=4, batches=(6,), samples=12).check()
