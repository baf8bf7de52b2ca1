"""The batch-size study's bookkeeping: the flags each run gets, the checkpoint each framing reads,
the best learning rate, the intervals over seeds and deals, the verdicts, and bad settings refused
before anything runs."""

from __future__ import annotations

import dataclasses
import math

import pytest

from tests.report.report_rows import eval_row
from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.evaluate.rows import MahjongEvalRow
from trainspeed.rows import Source, parse_row
from trainspeed.stats import DETECTABLE
from trainspeed.studies.batch_size.comparisons import (
    batch_row,
    comparison_row,
    head_to_head_row,
)
from trainspeed.studies.batch_size.config import BatchSizeConfig
from trainspeed.studies.batch_size.rows import BatchSizeRunRow
from trainspeed.studies.batch_size.study import (
    RunSpec,
    framing_step,
    peak_lr,
    power_plan,
    run_config,
)
from trainspeed.train.flags import train_command


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_every_run_sees_the_same_samples_and_warm_up_and_keeps_evenly_spaced_checkpoints():
    config = BatchSizeConfig(data="d", out="o", nproc=2, batches=(256, 8192), samples=65536, warmup_samples=4096,
                             val_samples=8192, checkpoints=8)
    small, large = (train_command(run_config(config, RunSpec(batch, 2.0, 1))) for batch in (256, 8192))
    assert (_flag(small, "--batch-size-per-device"), _flag(small, "--steps"), _flag(small, "--warmup-steps")) == ("128", "256", "16")
    assert (_flag(large, "--batch-size-per-device"), _flag(large, "--steps"), _flag(large, "--warmup-steps")) == ("4096", "8", "1")
    assert (_flag(small, "--checkpoint-every"), _flag(large, "--checkpoint-every")) == ("32", "1")
    assert _flag(small, "--keep-checkpoints") == "0" and _flag(small, "--seed") == "1"
    assert _flag(small, "--eval-every") == _flag(large, "--eval-every") == "8"  # the largest batch's steps
    assert (_flag(small, "--eval-batches"), _flag(large, "--eval-batches")) == ("32", "1")  # 8192 samples each
    assert _flag(small, "--lr") == "0.002" and _flag(small, "--lr-scaling") == "sqrt"
    assert _flag(small, "--out") == "o/batch_size_runs/b256-lr2-s1"
    assert peak_lr(config, RunSpec(8192, 2.0, 1)) == pytest.approx(1e-3 * 2 * (8192 / 256) ** 0.5)


def test_each_framing_reads_a_kept_checkpoint():
    config = BatchSizeConfig(data="d", out="o", batches=(256, 1024, 8192), samples=524288, checkpoints=32)
    samples_per_s = {256: 1000.0, 1024: 1500.0, 8192: 2000.0}
    assert [framing_step(config, "equal samples", b, samples_per_s) for b in config.batches] == [2048, 512, 64]
    assert [framing_step(config, "equal steps", b, samples_per_s) for b in config.batches] == [64, 64, 64]
    # In the time batch 8192 takes for 524,288 samples, batch 256 sees half of them, 1024 three quarters.
    wall = [framing_step(config, "equal wall time", b, samples_per_s) for b in config.batches]
    assert wall == [1024, 384, 64]
    assert all(step % config.checkpoint_every(b) == 0 for step, b in zip(wall, config.batches))


@pytest.mark.parametrize(("flags", "message"), [
    (["--batches", "256,768"], "global batch 768 must divide --samples 16384"),
    (["--batches", "256"], "at least two global batches"),
    (["--nproc", "0"], "argument --nproc: '0' must be at least 1"),
    (["--eval-games", "6"], "--eval-games 6 must be a multiple of 4"),
    (["--lr-factors", "1,nan"], "--lr-factors '1,nan': give positive numbers"),
    (["--seeds", "-1"], "--seeds '-1': give integers from 0 to 2^31-1"),
    (["--seeds", "1,2"], "the tuning seed 0 must be one of --seeds"),
    (["--checkpoints", "3"], "misses the equal-steps step"),
])
def test_bad_settings_are_one_line_and_exit_2_before_anything_runs(flags, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["study", "batch-size", "--samples", "16384", "--batches", "256,2048", *flags, "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: ") and message in line
    assert not any(out.iterdir()) if out.exists() else True


def _run(factor: float, seed: int, loss: float) -> BatchSizeRunRow:
    return BatchSizeRunRow(
        study_id="s", run=f"r{factor}-{seed}", run_dir="d", global_batch=256, nproc=1, batch_size_per_device=256,
        lr_factor=factor, peak_lr=factor, train_seed=seed, steps=4, warmup_steps=1, samples=1024, checkpoint_every=1,
        val_loss=loss, val_accuracy=0.5, majority_baseline=0.2, val_samples=100.0, equal_steps=1,
        equal_steps_samples=256, equal_steps_val_loss=loss, equal_steps_val_accuracy=0.5, curve=[], train_wall_s=1.0,
        end_to_end_samples_per_s=100.0, command="trainspeed train")


def test_the_best_learning_rate_is_the_tuning_seeds_and_every_seed_trains_at_it():
    runs = [_run(1.0, 0, 1.2), _run(2.0, 0, 1.1), _run(2.0, 1, 1.5), _run(2.0, 2, 1.3)]
    row = batch_row("s", BatchSizeConfig(data="d", out="o", seeds=(0, 1, 2)), 256, runs)
    assert row.best_lr_factor == 2.0 and row.seeds == [0, 1, 2] and row.lr_sweep == {"1": 1.2, "2": 1.1}
    assert row.val_loss == pytest.approx((1.1 + 1.5 + 1.3) / 3)


def _eval(seed: int, deal_ranks: list[list[int]]) -> MahjongEvalRow:
    row, _ = parse_row(MahjongEvalRow, eval_row("p", 1, 2.5), Source("test"))
    means = [sum(r) / 4 for r in deal_ranks]
    return dataclasses.replace(row, games=4 * len(deal_ranks), deals=len(deal_ranks), deal_ranks=deal_ranks,
                               policy_seed=seed, mean_rank=sum(means) / len(means))


def test_a_larger_batch_better_on_every_deal_and_seed_is_supported():
    large = [_eval(s, [[1, 1, 2, 2], [2, 2, 2, 2], [1, 2, 1, 2], [1, 1, 1, 2]]) for s in range(3)]
    small = [_eval(s, [[2, 2, 3, 3], [3, 3, 3, 4], [2, 3, 2, 3], [3, 3, 3, 3]]) for s in range(3)]
    row = comparison_row("s", "equal samples", 8192, 256, large, small)
    assert row.mean_rank_difference == pytest.approx((-1 - 1.25 - 1 - 1.75) / 4)
    assert row.deals == 4 and row.seeds == 3 and row.ci95[1] < 0 and row.verdict == "supported"


def test_an_interval_that_holds_zero_is_inconclusive_at_the_difference_it_could_detect():
    even = [_eval(s, [[1, 2, 3, 4], [4, 3, 2, 1], [2, 2, 3, 3], [3, 3, 2, 2]]) for s in range(3)]
    shifted = [_eval(s, [[2, 2, 3, 4], [3, 3, 2, 1], [2, 3, 3, 3], [3, 2, 2, 2]]) for s in range(3)]
    row = comparison_row("s", "equal steps", 8192, 256, even, shifted)
    assert row.ci95[0] <= 0 <= row.ci95[1]
    assert row.verdict == f"inconclusive at a minimum detectable difference of {row.minimum_detectable_difference:.3f} ranks"
    assert row.minimum_detectable_difference > 0


def test_head_to_head_compares_the_larger_batchs_mean_rank_with_an_even_2_5():
    weaker = [_eval(s, [[3, 3, 3, 3], [4, 3, 3, 4], [3, 2, 3, 3]]) for s in range(2)]
    row = head_to_head_row("s", 8192, 256, weaker)
    assert row.framing == "head to head" and row.mean_rank_difference == pytest.approx(3.0 + 1 / 12 - 2.5)
    assert row.verdict == "contradicted"


def test_the_power_plan_uses_the_planned_seeds_and_games():
    plan = power_plan(BatchSizeConfig(data="d", out="o", seeds=(0, 1, 2, 3, 4), eval_games=600))
    assert (plan.seeds, plan.deals) == (5, 150)
    # every seed plays the same 150 deals: the deals' variance divides by the deals alone
    deal_variance = 1.12**2 * (1 + 3 * 0.2) / 4
    expected = DETECTABLE * math.sqrt(2 * (0.03**2 / 5 + deal_variance / 150))
    assert plan.minimum_detectable_difference == pytest.approx(expected) and 0.2 < expected < 0.25


def test_settings_and_a_bad_setting_in_the_config_itself():
    with pytest.raises(UsageError, match="global batch 6 must divide"):
        BatchSizeConfig(data="d", out="o", nproc=4, batches=(6, 12), samples=12).check()


@pytest.mark.parametrize("seconds", [0.0, -1.0, 3600.5, float("nan"), float("inf")])
def test_a_bench_window_outside_its_range_is_refused_in_a_config_built_from_python(seconds):
    """A config made in Python never passes the flag's parser: its check holds the same range."""
    from trainspeed.studies.scaling.config import ScalingConfig

    BatchSizeConfig(data="d", out="o", bench_min_window_s=3600.0).check()
    ScalingConfig(data="d", out="o", bench_min_window_s=0.05).check()
    with pytest.raises(UsageError, match="batch-size study: --bench-min-window-s must be a positive number"):
        BatchSizeConfig(data="d", out="o", bench_min_window_s=seconds).check()
    with pytest.raises(UsageError, match="scaling study: --bench-min-window-s must be a positive number"):
        ScalingConfig(data="d", out="o", bench_min_window_s=seconds).check()
