"""The statistics every producer shares: percentile intervals over draws, t quantiles, Wilson
intervals, clustered means, the bootstraps and the fit of steps against the batch, each against
values known without it (tables, textbook examples, exact data)."""

import math

import numpy as np
import pytest

from trainspeed.stats import (
    StepsFit,
    bootstrap_fit,
    clustered_mean,
    crossed_bootstrap,
    fit_steps,
    percentile_band,
    percentile_interval,
    resample,
    t_quantile,
    wilson_interval,
    within_cluster_correlation,
)


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

    assert within_cluster_correlation([[1, 1, 1, 1], [4, 4, 4, 4], [2, 2, 2, 2]]) == pytest.approx(1.0)
    # Every deal a permutation of 1..4: no deal is luckier than another, the games of a deal are
    # as unlike as they can be (negative correlation, -1/3 for four games).
    assert within_cluster_correlation([[1, 2, 3, 4], [4, 3, 2, 1], [2, 1, 4, 3]]) == pytest.approx(-1 / 3)
    rng = random.Random(0)
    independent = [[rng.randint(1, 4) for _ in range(4)] for _ in range(4000)]
    assert abs(within_cluster_correlation(independent)) < 0.05
    assert within_cluster_correlation([[1, 2]]) is None and within_cluster_correlation([[1, 2], [1]]) is None
    assert within_cluster_correlation([[2, 2], [2, 2]]) is None


def test_the_crossed_bootstrap_holds_the_seed_spread_and_the_deals():
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


# --- percentile intervals ------------------------------------------------------------------------

def test_a_percentile_interval_interpolates_linearly_between_the_ordered_draws():
    # 0..100: the 2.5% and 97.5% points lie a quarter and three quarters of the way between draws.
    assert percentile_interval(np.arange(101.0)[::-1]) == (2.5, 97.5)
    # Four draws at level 0.5: positions 0.75 and 2.25 of the ordered draws 1, 2, 4, 8.
    assert percentile_interval([8.0, 1.0, 4.0, 2.0], level=0.5) == (1.75, 5.0)
    assert percentile_interval([3.0]) == (3.0, 3.0)
    draws = np.random.default_rng(3).lognormal(size=999)
    assert percentile_interval(draws) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])), rel=1e-12)


def test_a_percentile_interval_of_unbounded_draws_is_unbounded_not_nan():
    """A critical batch is infinite in a draw whose steps halved at every batch."""
    assert percentile_interval([1.0, 2.0, math.inf, math.inf], level=0.5) == (1.75, math.inf)
    assert percentile_interval([math.inf] * 3) == (math.inf, math.inf)
    with pytest.raises(ValueError):
        percentile_interval([])
    with pytest.raises(ValueError):
        percentile_interval([1.0, math.nan])


def test_a_band_is_the_percentile_interval_at_every_point():
    curves = np.random.default_rng(4).normal(size=(400, 5))
    low, high = percentile_band(curves)
    for point in range(5):
        assert (low[point], high[point]) == percentile_interval(curves[:, point])


# --- Wilson intervals ----------------------------------------------------------------------------

@pytest.mark.parametrize("successes, trials, expected", [
    (81, 263, (0.2553, 0.3662)), (15, 148, (0.0624, 0.1605)), (0, 20, (0.0, 0.1611)), (1, 29, (0.0061, 0.1718)),
    (29, 29, (0.8830, 1.0)), (19, 20, (0.7639, 0.9911))])
def test_wilson_intervals_match_newcombes_table(successes, trials, expected):
    """Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (the score interval)."""
    assert wilson_interval(successes, trials) == pytest.approx(expected, abs=1e-4)


def test_a_wilson_interval_refuses_a_share_that_is_none():
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(0, 0)


# --- the resampling ------------------------------------------------------------------------------

def test_a_resample_draws_indices_with_replacement_and_a_seed_repeats_it():
    picks = resample(np.random.default_rng(5), 3, 2000)
    assert picks.shape == (2000, 3) and picks.min() == 0 and picks.max() == 2
    # All three picks alike: 3 of the 27 equally likely resamples of three items.
    assert np.mean(picks.min(axis=1) == picks.max(axis=1)) == pytest.approx(3 / 27, abs=0.02)
    assert np.array_equal(picks, resample(np.random.default_rng(5), 3, 2000))


def test_a_bootstrap_with_the_same_seed_is_the_same_and_another_seed_differs():
    steps = {32: [900.0, 1000.0, 1100.0], 128: [280.0, 300.0, 330.0], 512: [100.0, 110.0, 115.0]}
    first, again = bootstrap_fit(steps, draws=200), bootstrap_fit(steps, draws=200)
    assert first.draws == again.draws and first.interval("b_crit") == again.interval("b_crit")
    assert bootstrap_fit(steps, draws=200, seed=1).draws != first.draws


# --- the fit of S(B) -----------------------------------------------------------------------------

BATCHES = [32, 128, 512, 2048]


def curve(s_min: float, b_noise: float) -> list[float]:
    """S = S_min (1 + B_noise / B) at every batch, exactly."""
    return [s_min * (1 + b_noise / batch) for batch in BATCHES]


def test_the_fit_recovers_s_min_and_the_noise_scale_of_exact_data():
    fit = fit_steps(BATCHES, curve(60.0, 300.0))
    assert fit.s_min == pytest.approx(60.0, rel=1e-6)
    assert fit.b_crit == pytest.approx(300.0, rel=1e-6)
    assert fit.e_min == pytest.approx(18000.0, rel=1e-6)
    assert fit.steps(300.0) == pytest.approx(120.0)  # twice S_min at B_crit
    assert fit.statistical_efficiency(300.0) == pytest.approx(0.5)


def test_steps_that_halve_with_every_doubling_are_perfect_scaling_without_a_critical_batch():
    fit = fit_steps(BATCHES, [8192 / batch for batch in BATCHES])
    assert fit.s_min == 0 and fit.b_crit == math.inf
    assert fit.e_min == pytest.approx(8192)


def test_steps_that_do_not_fall_have_a_critical_batch_of_zero():
    fit = fit_steps(BATCHES, [48.0, 49.0, 51.0, 52.0])
    assert fit.e_min == 0 and fit.b_crit == 0
    assert fit.s_min == pytest.approx(50.0, rel=0.02)


def test_a_fit_refuses_what_has_no_curve():
    with pytest.raises(ValueError):
        fit_steps([64], [10.0])
    with pytest.raises(ValueError):
        fit_steps([64, 128], [10.0, 0.0])


def test_the_bootstrap_interval_covers_the_curve_its_noisy_seeds_scatter_around():
    truth = curve(40.0, 500.0)
    factors = (0.9, 1.0, 1.1)
    result = bootstrap_fit({batch: [steps * f for f in factors] for batch, steps in zip(BATCHES, truth)}, draws=300)
    low, high = result.interval("b_crit")
    assert low < 500.0 < high
    low, high = result.interval("s_min")
    assert low < 40.0 < high
    assert result.steps_interval(128)[0] < StepsFit(40.0, 20000.0).steps(128) < result.steps_interval(128)[1]
    # Every interval of the fit is the module's one percentile interval over its draws.
    assert result.interval("e_min") == percentile_interval([draw.e_min for draw in result.draws])
