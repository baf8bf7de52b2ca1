"""The power plan of a comparison of two arms of policies over seeds and duplicate deals."""

import math

import pytest

from trainspeed.evaluate.power import plan_power
from trainspeed.stats import DETECTABLE


def test_the_power_plan_shrinks_with_seeds_and_deals_and_grows_with_the_seed_spread():
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
