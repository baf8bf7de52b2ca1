"""The critical-batch study's decision on numbers alone: the tolerance from the factor-1 seeds'
spread, which factors match, the critical batch (a lower bound where the largest factor matched,
unknown where a factor-1 branch diverged), the LR rule, --at and --factors as read, and the samples
of a time-to-target study it compares its own with."""

import argparse
import re
import math
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.rows import append_row
from trainspeed.stats import t_quantile
from trainspeed.studies.critical_batch.config import (
    AT_LIST,
    FACTORS,
    BranchPoint,
    CriticalBatchConfig,
    branch_point,
    judged_metric,
    metric_and_op,
)
from trainspeed.studies.critical_batch.decision import (
    HIGHER_IS_BETTER,
    LOWER_IS_BETTER,
    Spread,
    critical_batch,
    judge,
    lr_rule_factor,
    tolerance_from_seeds,
)
from trainspeed.studies.critical_batch.study import time_to_target_samples
from trainspeed.studies.time_to_target.config import TimeToTargetConfig
from trainspeed.studies.time_to_target.rows import TimeToTargetRunRow, TimeToTargetSettingsRow


def test_the_tolerance_is_the_t_interval_of_a_difference_of_means_with_the_factor_1_spread():
    tolerance = tolerance_from_seeds([1.0, 1.2, 1.1])  # sd 0.1, 3 seeds
    assert tolerance.value == pytest.approx(t_quantile(0.975, 2) * 0.1 * math.sqrt(2 / 3))
    assert tolerance.value == pytest.approx(0.3511, abs=1e-3)
    assert "t(0.975, 2 df)" in tolerance.rule and "sd 0.1 of the 3 factor-1 seeds" in tolerance.rule
    two = tolerance_from_seeds([2.0, 2.2])  # 2 seeds: t(0.975, 1) = 12.71, sd 0.1414, sqrt(2/2) = 1
    assert two.value == pytest.approx(12.706 * 0.14142, rel=1e-3)
    assert tolerance_from_seeds([1.0, 1.0]).value == 0.0


@pytest.mark.parametrize(("seeds", "factors", "expected"), [
    (3, (1.0, 2.0, 4.0, 8.0, 16.0), 2),  # 3 / sqrt(4) = 1.5, rounded up
    (3, (1.0, 2.0, 4.0, 8.0), 2),  # 3 / sqrt(3) = 1.73
    (3, (1.0, 2.0, 4.0), 3),  # 3 / sqrt(2) = 2.12
    (3, (1.0, 2.0), 3),  # one factor compared: as many as the reference
    (6, (1.0, 2.0, 4.0, 8.0, 16.0), 3),
    (2, (1.0, 2.0, 4.0, 8.0, 16.0), 2),  # never fewer than 2
    (1, (1.0, 2.0, 4.0), 1),  # never more than --seeds
    (3, (1.0,), 3),
])
def test_the_other_factors_take_the_reference_s_seeds_over_the_root_of_their_count_by_default(seeds, factors, expected):
    """Dunnett's allocation: k factors compared with one reference each take about 1/sqrt(k) of its
    seeds; the reference keeps --seeds."""
    config = CriticalBatchConfig(base_run="base", out="out", seeds=seeds, factors=factors)
    assert config.default_factor_seeds == expected
    given = CriticalBatchConfig(base_run="base", out="out", seeds=seeds, factors=factors, factor_seeds=expected)
    assert given.seeds_of(1.0) == tuple(range(seeds))
    assert all(given.seeds_of(factor) == tuple(range(expected)) for factor in factors if factor != 1.0)
    old = CriticalBatchConfig(base_run="base", out="out", seeds=seeds, factors=factors)  # rows from before the flag
    assert all(old.seeds_of(factor) == tuple(range(seeds)) for factor in factors)


def test_a_given_tolerance_is_used_as_given_and_one_seed_without_it_is_refused():
    given = tolerance_from_seeds([1.0], given=0.05)
    assert given.value == 0.05 and given.rule == "--tolerance 0.05, given"
    with pytest.raises(ValueError, match="two or more factor-1 seeds"):
        tolerance_from_seeds([1.0])


def spreads(**means: list[float]) -> dict[float, Spread]:
    return {float(name[1:].replace("_", ".")): Spread(tuple(values)) for name, values in means.items()}


def test_the_critical_batch_is_the_largest_factor_that_matches_with_every_smaller_one():
    # loss: lower is better; tolerance 0.05: x2 is 0.03 worse (matches), x4 0.08 worse (does not),
    # x8 happens to match again, which does not count past x4
    losses = spreads(f1=[1.00, 1.00], f2=[1.03, 1.03], f4=[1.08, 1.08], f8=[1.01, 1.01])
    found = critical_batch(64, losses, LOWER_IS_BETTER, 0.05)
    assert (found.factor, found.batch, found.at_least, found.text()) == (2.0, 128, False, "128")


def test_better_always_matches_and_the_direction_follows_the_goal():
    accuracy = spreads(f1=[0.50, 0.52], f2=[0.60, 0.60], f4=[0.45, 0.45])  # higher is better
    assert critical_batch(32, accuracy, HIGHER_IS_BETTER, 0.02).factor == 2.0
    assert critical_batch(32, accuracy, LOWER_IS_BETTER, 0.02).factor == 1.0  # read as a loss, x2 is worse


def test_when_even_the_largest_factor_matches_the_critical_batch_is_a_lower_bound():
    found = critical_batch(100, spreads(f1=[2.0, 2.1], f2=[2.05, 2.05], f4=[2.02, 2.1]), LOWER_IS_BETTER, 0.1)
    assert (found.batch, found.at_least, found.text()) == (400, True, "at least 400")


def test_factors_below_one_are_shown_but_never_the_critical_batch():
    found = critical_batch(64, spreads(f0_5=[0.9], f1=[1.0], f2=[1.5]), LOWER_IS_BETTER, 0.1)
    assert (found.factor, found.batch) == (1.0, 64)


def test_a_diverged_branch_never_matches_and_a_diverged_reference_leaves_the_point_unknown():
    judged = judge(64, spreads(f1=[1.0, 1.1], f2=[math.nan, 1.0]), LOWER_IS_BETTER)
    assert judged.critical is not None and judged.critical.batch == 64
    assert math.isnan(Spread((math.nan, 1.0)).min_max[0])
    unknown = judge(64, spreads(f1=[math.nan, 1.0], f2=[1.0, 1.0]), LOWER_IS_BETTER)
    assert unknown.tolerance is None and unknown.critical is None
    assert unknown.text() == "unknown: a factor-1 branch diverged"


def test_judge_takes_the_tolerance_from_the_factor_1_seeds():
    judged = judge(32, spreads(f1=[1.0, 1.2, 1.1], f2=[1.3, 1.4, 1.5], f4=[2.0, 2.0, 2.0]), LOWER_IS_BETTER)
    assert judged.tolerance is not None and judged.tolerance.value == pytest.approx(0.3511, abs=1e-3)
    assert judged.critical is not None and judged.critical.batch == 64  # x2 is 0.3 worse, within 0.351


def test_the_lr_rule_scales_a_branch_s_rate_by_its_factor():
    assert [lr_rule_factor(rule, 4.0) for rule in ("none", "linear", "sqrt")] == [1.0, 4.0, 2.0]
    with pytest.raises(ValueError):
        lr_rule_factor("cube", 2.0)


def test_branch_points_are_fractions_in_0_1_or_steps():
    assert AT_LIST("0.25, 0.5,1,40steps,1step") == ("0.25", "0.5", "1", "40steps", "1steps")
    assert branch_point("40steps") == BranchPoint(step=40) and branch_point("0.5") == BranchPoint(fraction=0.5)
    for bad, why in (("0", "lies outside (0, 1]"), ("1.5", "lies outside (0, 1]"), ("0steps", "a step from 1"),
                     ("forty", "neither a fraction nor a step"), ("0.5,0.5", "'0.5' is named twice")):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(why)):
            AT_LIST(bad)


def test_factors_are_positive_sorted_and_each_once():
    assert FACTORS("4,1,2,2") == (1.0, 2.0, 4.0)
    for bad in ("0,1", "-2", "1,2000"):
        with pytest.raises(argparse.ArgumentTypeError, match="give positive numbers up to 1000"):
            FACTORS(bad)


def test_a_metric_is_judged_in_the_direction_it_is_given():
    assert [metric_and_op(judged_metric(text)) for text in ("loss<=", "val/accuracy>=", " mean_loss <=")] == \
        [("loss", "<="), ("accuracy", ">="), ("mean_loss", "<=")]
    for bad in ("accuracy", "val/accuracy>=0.9", "<="):
        with pytest.raises(argparse.ArgumentTypeError, match="write NAME<= .lower is better. or NAME>="):
            judged_metric(bad)


def tt_rows(path: Path, workload: str = "mahjong", size: str = "tiny") -> Path:
    """A time-to-target study's settings row and three runs: two met the goal at their validation
    of step 10 and 20 (batch 32 and 64), one ran out of its 4,096 samples."""
    settings = TimeToTargetConfig(workload=workload, data="d", until="val/accuracy>=0.5", out="o")
    append_row(path, TimeToTargetSettingsRow(
        study_id="t", settings=settings, workload=workload, size=size, until=settings.until, metric="accuracy",
        base_lr=1e-3, base_lr_from="workload", reference_batch=32, command="trainspeed study", total_s=1.0))
    for batch, step in ((32, 10), (64, 20), (128, None)):
        append_row(path, TimeToTargetRunRow(
            study_id="t", run=f"b{batch}", run_dir="r", purpose="seed", target="cpu:eager:fp32", nproc=1,
            global_batch=batch, lr_factor=1.0, peak_lr=1e-3, seed=0, max_samples=4096, reached=step is not None,
            outcome="", steps=None if step is None else step - 0.5, samples=None if step is None else (step - 0.5) * batch,
            validated_step=step, value=None, best_value=None, train_s=1.0, wall_s=1.0, validations=1, command_s=2.0,
            b_simple=None, noise_scale_method=None, end_to_end_samples_per_s=1.0, command="trainspeed train"))
    return path


def test_the_samples_a_time_to_target_study_spent_count_each_run_to_its_stop(tmp_path):
    rows = tt_rows(tmp_path / "time_to_target.jsonl")
    assert time_to_target_samples(str(rows), "mahjong", "tiny") == 10 * 32 + 20 * 64 + 4096
    assert time_to_target_samples(str(tmp_path), "mahjong", "tiny") == 10 * 32 + 20 * 64 + 4096  # the study's folder
    with pytest.raises(UsageError, match="holds a time-to-target study of mahjong tiny, not of mahjong base"):
        time_to_target_samples(str(rows), "mahjong", "base")


def test_the_study_climbs_the_factors_and_trains_none_past_the_first_that_does_not_match():
    """Factor 1 and the first above it are wanted from the start; each next factor once the one
    below it matched; none past a factor that did not (it cannot change the critical batch)."""
    from trainspeed.studies.critical_batch.decision import factors_wanted

    factors = (0.5, 1.0, 2.0, 4.0, 8.0)
    reference = Spread((1.0, 1.2, 1.1))  # tolerance t(0.975, 2) x 0.1 x sqrt(2/3) = 0.351
    assert factors_wanted(factors, {}, LOWER_IS_BETTER) == [0.5, 1.0, 2.0]
    assert factors_wanted(factors, {2.0: Spread((1.0, 1.0, 1.0))}, LOWER_IS_BETTER) == [0.5, 1.0, 2.0]
    matching, failing = Spread((1.3, 1.4, 1.35)), Spread((1.6, 1.5, 1.55))
    assert factors_wanted(factors, {1.0: reference, 2.0: matching}, LOWER_IS_BETTER) == [0.5, 1.0, 2.0, 4.0]
    assert factors_wanted(factors, {1.0: reference, 2.0: failing}, LOWER_IS_BETTER) == [0.5, 1.0, 2.0]
    assert factors_wanted(factors, {1.0: reference, 2.0: matching, 4.0: matching}, LOWER_IS_BETTER) == list(factors)
    assert factors_wanted(factors, {1.0: reference, 2.0: failing, 4.0: matching}, LOWER_IS_BETTER) == [0.5, 1.0, 2.0]
    assert factors_wanted(factors, {1.0: reference, 2.0: Spread((1.0, math.nan, 1.0))}, LOWER_IS_BETTER) == \
        [0.5, 1.0, 2.0]  # a diverged branch never matches
    assert factors_wanted(factors, {1.0: reference, 2.0: failing}, HIGHER_IS_BETTER) == [0.5, 1.0, 2.0, 4.0]
    assert factors_wanted(factors, {1.0: reference, 2.0: failing}, LOWER_IS_BETTER, given=1.0) == [0.5, 1.0, 2.0, 4.0]


@pytest.mark.parametrize("values", [
    (1.0, 1.2, 1.1, 1.3, 1.4, 1.35, 1.6, 1.5, 1.55, 0.9, 0.9, 0.9),
    (1.0, 1.2, 1.1, 1.3, 1.4, 1.35, 1.2, 1.2, 1.2, 1.3, 1.3, 1.3),
    (1.0, 1.2, 1.1, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
])
def test_the_factors_trained_give_the_critical_batch_of_every_factor_trained(values):
    """Whatever the branches' values, the critical batch from the factors the climb trains is the
    one from every factor."""
    from trainspeed.studies.critical_batch.decision import factors_wanted

    factors = (1.0, 2.0, 4.0, 8.0)
    every = {factor: Spread(values[3 * index:3 * index + 3]) for index, factor in enumerate(factors)}
    trained: dict[float, Spread] = {}
    while (wanted := [f for f in factors_wanted(factors, trained, LOWER_IS_BETTER) if f not in trained]):
        trained.update({factor: every[factor] for factor in wanted})
    tolerance = tolerance_from_seeds(every[1.0].values).value
    assert critical_batch(32, trained, LOWER_IS_BETTER, tolerance) == critical_batch(32, every, LOWER_IS_BETTER, tolerance)
