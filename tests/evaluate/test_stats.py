"""Deal-clustered means and their intervals."""

import math

import pytest

from trainspeed.evaluate.stats import clustered_mean, t_quantile


@pytest.mark.parametrize("nu, expected, tolerance", [(1, 12.7062, 1e-4), (2, 4.3027, 1e-4), (3, 3.1824, 5e-3),
                                                     (5, 2.5706, 5e-4), (10, 2.2281, 1e-4), (30, 2.0423, 1e-4),
                                                     (249, 1.9695, 1e-4)])
def test_t_quantiles_match_the_tables(nu, expected, tolerance):
    assert t_quantile(0.975, nu) == pytest.approx(expected, abs=tolerance)


def test_t_quantile_is_symmetric_and_refuses_nonsense():
    assert t_quantile(0.025, 7) == pytest.approx(-t_quantile(0.975, 7))
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_quantile(0.5, 0)


def test_each_cluster_is_one_observation():
    result = clustered_mean([[1, 2, 3, 4], [1, 1, 2, 2], [3, 3, 4, 4]])
    assert result.mean == pytest.approx(2.5)
    means = [2.5, 1.5, 3.5]
    standard_error = math.sqrt(sum((m - 2.5) ** 2 for m in means) / 2 / 3)
    assert result.standard_error == pytest.approx(standard_error)
    assert result.ci95 == pytest.approx((2.5 - 4.3027 * standard_error, 2.5 + 4.3027 * standard_error), abs=1e-3)
    assert result.clusters == 3


def test_identical_clusters_have_a_zero_width_interval_and_one_cluster_none():
    assert clustered_mean([[1, 2, 3, 4]] * 5).ci95 == (2.5, 2.5)
    single = clustered_mean([[1, 4]])
    assert single.mean == 2.5 and single.ci95 is None and single.half_width is None


def test_bounds_clip_the_interval_but_not_its_half_width():
    result = clustered_mean([[1, 1, 1, 1], [1, 1, 1, 2], [1, 1, 1, 1]], bounds=(1.0, 4.0))
    assert result.ci95[0] == 1.0
    assert result.half_width > result.ci95[1] - result.mean
    with pytest.raises(ValueError):
        clustered_mean([])


def test_within_cluster_correlation_is_one_for_identical_games_and_near_zero_for_independent_ones():
    import random

    from trainspeed.evaluate.stats import within_cluster_correlation

    assert within_cluster_correlation([[1, 1, 1, 1], [4, 4, 4, 4], [2, 2, 2, 2]]) == pytest.approx(1.0)
    # Every deal a permutation of 1..4: no deal is luckier than another, the games of a deal are
    # as unlike as they can be (negative correlation, -1/3 for four games).
    assert within_cluster_correlation([[1, 2, 3, 4], [4, 3, 2, 1], [2, 1, 4, 3]]) == pytest.approx(-1 / 3)
    rng = random.Random(0)
    independent = [[rng.randint(1, 4) for _ in range(4)] for _ in range(4000)]
    assert abs(within_cluster_correlation(independent)) < 0.05
    assert within_cluster_correlation([[1, 2]]) is None and within_cluster_correlation([[1, 2], [1]]) is None
    assert within_cluster_correlation([[2, 2], [2, 2]]) is None


def test_the_power_plan_shrinks_with_seeds_and_deals_and_grows_with_the_seed_spread():
    from trainspeed.evaluate.stats import plan_power

    base = plan_power(5, 250)
    assert plan_power(10, 250).minimum_detectable_difference < base.minimum_detectable_difference
    assert plan_power(5, 1000).minimum_detectable_difference < base.minimum_detectable_difference
    assert plan_power(5, 250, seed_sd=0.1).minimum_detectable_difference > base.minimum_detectable_difference
    # 1,000 games (250 deals) of one policy, independent games: SE of a mean rank 1.12 / sqrt(1000);
    # the difference of two such means, x 2.80 for 80% power at 5%.
    alone = plan_power(1, 250, within_deal_correlation=0.0, seed_sd=0.0)
    assert alone.minimum_detectable_difference == pytest.approx(2.8016 * math.sqrt(2) * 1.12 / math.sqrt(1000), rel=1e-3)


def test_the_power_plan_counts_a_deal_every_seed_plays_once():
    """Crossed design: seeds share the deals, so the deal variance divides by the deals alone."""
    from trainspeed.evaluate.stats import DETECTABLE, plan_power

    # By hand: games_per_deal 4, sd 1, no within-deal correlation: a deal's mean has variance 1/4.
    # An arm of 4 seeds (sd 0.2) on 25 deals: 0.2^2 / 4 + 0.25 / 25 = 0.01 + 0.01 = 0.02; the
    # difference of two arms 0.04, a standard error of 0.2 (not 0.158, which 0.25 / (4 x 25) gives).
    plan = plan_power(4, 25, game_rank_sd=1.0, within_deal_correlation=0.0, seed_sd=0.2)
    assert plan.standard_error == pytest.approx(0.2)
    assert plan.minimum_detectable_difference == pytest.approx(DETECTABLE * 0.2)
    # More seeds on the same deals shrink only the seed term.
    deals_only = [plan_power(seeds, 25, game_rank_sd=1.0, within_deal_correlation=0.0, seed_sd=0.0).standard_error
                  for seeds in (1, 5, 100)]
    assert deals_only == pytest.approx([math.sqrt(2 * 0.25 / 25)] * 3)
    # The batch-size study's settings (5 seeds, 200 games = 50 deals, sd 1.12, correlation 0.2, seed
    # sd 0.03): 1.12^2 x 1.6 / 4 = 0.50176 per deal; 2 x (0.0009 / 5 + 0.50176 / 50) = 0.0204304.
    study = plan_power(5, 50, game_rank_sd=1.12, within_deal_correlation=0.2, seed_sd=0.03)
    assert study.standard_error == pytest.approx(math.sqrt(0.0204304))
    assert study.minimum_detectable_difference == pytest.approx(0.4004, abs=5e-4)


def test_the_crossed_bootstrap_holds_the_seed_spread_and_the_deals():
    import numpy as np

    from trainspeed.evaluate.stats import crossed_bootstrap

    rng = np.random.default_rng(1)
    deal_luck = rng.normal(0, 0.6, 200)
    strong = [2.4 + seed_effect + deal_luck + rng.normal(0, 0.3, 200) for seed_effect in (-0.05, 0.0, 0.05)]
    weak = [2.7 + seed_effect + deal_luck + rng.normal(0, 0.3, 200) for seed_effect in (-0.05, 0.0, 0.05)]
    difference = crossed_bootstrap([strong, weak], (1, -1))
    assert difference.ci95[0] < -0.3 < difference.ci95[1] < 0 and difference.deals == 200
    # The deal luck both arms share cancels in the difference, not in one arm's mean.
    one_arm = crossed_bootstrap([strong], (1,), offset=-2.5)
    assert one_arm.standard_error > difference.standard_error / 2
    assert one_arm.estimate == pytest.approx(np.mean(strong) - 2.5)
    # Two seeds far apart: the interval widens with the spread between seeds.
    spread = crossed_bootstrap([[2.0 + deal_luck, 3.0 + deal_luck], weak], (1, -1))
    assert spread.ci95[1] - spread.ci95[0] > 2 * (difference.ci95[1] - difference.ci95[0])
