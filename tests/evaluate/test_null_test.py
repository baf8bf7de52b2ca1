"""`trainspeed eval mahjong-null`: one self-play evaluation per seed, then the interval's coverage."""

from __future__ import annotations

import json

import pytest

from trainspeed.cli import main
from trainspeed.stats import clustered_mean, within_cluster_correlation


@pytest.mark.e2e
def test_each_seed_is_an_evaluation_and_the_summary_counts_the_intervals_that_contain_2_5(
        capsys, tiny_run, tmp_path):
    """Two seeds, the fewest the command takes: the summary's count of intervals works the same over any number."""
    out = tmp_path / "null.jsonl"
    code = main(["eval", "mahjong-null", "--policy", str(tiny_run), "--seeds", "2", "--games", "8",
                 "--temperature", "1.5", "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    evaluations, (summary,) = rows[:-1], rows[-1:]
    assert [row["kind"] for row in evaluations] == ["mahjong-eval"] * 2
    assert [row["eval_seed"] for row in evaluations] == [0, 1] == summary["eval_seeds"]
    assert all(row["opponent"] == str(tiny_run) and row["temperature"] == 1.5 for row in evaluations)
    # Sampling makes the rotations different games: not every deal is the permutation 1..4.
    assert any(sorted(ranks) != [1, 2, 3, 4] for row in evaluations for ranks in row["deal_ranks"])
    inside = [row["mean_rank_ci95"][0] <= 2.5 <= row["mean_rank_ci95"][1] for row in evaluations]
    assert summary["kind"] == "mahjong-null-test" and summary["covered"] == sum(inside)
    assert summary["coverage"] == sum(inside) / 2 and summary["mean_ranks"] == [r["mean_rank"] for r in evaluations]
    assert "intervals contain 2.5" in captured.out


@pytest.mark.e2e
def test_a_greedy_null_test_is_refused_before_any_game(capsys, tiny_run, tmp_path):
    out = tmp_path / "null.jsonl"
    code = main(["eval", "mahjong-null", "--policy", str(tiny_run), "--temperature", "0", "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "must be above 0" in lines[0] and not out.exists()


def test_counting_a_deals_games_as_independent_errs_by_the_sign_of_their_correlation():
    """What the null test can and cannot show: with games of a deal negatively correlated (as in
    self-play) the interval that counts them as independent is wider than the clustered one, so
    it would over-cover; with positive correlation it is narrower and would under-cover."""
    # Self-play-like deals: nearly a permutation of 1..4 (one seat's rank moved by one in some).
    negative = [[1, 2, 3, 4], [2, 1, 4, 3], [1, 3, 3, 4], [4, 3, 2, 2], [3, 4, 1, 2], [2, 2, 3, 4]] * 5
    # Lucky and unlucky deals: the policy ranks alike in all four rotations.
    positive = [[1, 1, 2, 1], [4, 3, 4, 4], [2, 2, 3, 2], [3, 4, 3, 3], [1, 2, 1, 1], [4, 4, 3, 4]] * 5
    for deals, sign in ((negative, -1), (positive, 1)):
        correlation = within_cluster_correlation(deals)
        clustered = clustered_mean(deals).half_width
        independent = clustered_mean([[value] for deal in deals for value in deal]).half_width
        assert correlation * sign > 0.2
        assert (independent - clustered) * sign < 0
