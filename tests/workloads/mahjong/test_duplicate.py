"""Duplicate 1-vs-3 games: fixed deals, exact bookkeeping, batched network calls, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from trainspeed.workloads.mahjong.data.selfplay import game_seed
from trainspeed.workloads.mahjong.duplicate import (
    BUILTIN_OPPONENTS,
    DuplicatePool,
    NetworkPlayer,
    choose_action_id,
    deal_seed,
)
from trainspeed.workloads.mahjong.encoding import FEATURE_SHAPE

RULE_BASED = BUILTIN_OPPONENTS["rule-based"]
RANDOM = BUILTIN_OPPONENTS["random"]


def test_deal_seeds_are_fixed_distinct_and_not_the_selfplay_walls():
    seeds = [deal_seed(0, deal) for deal in range(1000)]
    assert len(set(seeds)) == 1000 and all(0 <= seed < 2**63 for seed in seeds)
    assert seeds[:2] == [deal_seed(0, 0), deal_seed(0, 1)]  # a pure function of (seed, deal)
    assert deal_seed(1, 0) not in seeds
    assert not set(seeds) & {game_seed(0, game) for game in range(1000)}


def test_greedy_takes_the_best_legal_action_and_sampling_only_legal_ones():
    logits = np.array([5.0, 1.0, 2.0, 9.0], dtype=np.float32)
    mask = np.array([False, True, True, False])
    rng = np.random.default_rng(0)
    assert choose_action_id(logits, mask, 0.0, rng) == 2
    draws = [choose_action_id(logits, mask, 1.0, rng) for _ in range(400)]
    assert set(draws) == {1, 2}
    assert 0.6 < draws.count(2) / len(draws) < 0.85  # softmax([1, 2]) gives action 2 a share of 0.73
    again = np.random.default_rng(0)
    choose_action_id(logits, mask, 0.0, again)  # greedy draws nothing from the generator
    assert [choose_action_id(logits, mask, 1.0, again) for _ in range(400)] == draws


def test_an_agent_against_three_copies_of_itself_ranks_exactly_2_5():
    """The four rotations of a deal are the same game (same walls, same deterministic players), so
    the evaluated seat takes each rank once: the bookkeeping of seats and rotations is exact."""
    results = list(DuplicatePool(RULE_BASED, RULE_BASED, seed=3, pool_size=8).play(range(3)))
    assert sorted(result.deal for result in results) == [0, 1, 2]
    for result in results:
        assert sorted(result.ranks) == [1, 2, 3, 4]
        assert sum(result.score_deltas) == 0
        assert result.seed == deal_seed(3, result.deal)
    assert np.mean([result.ranks for result in results]) == 2.5


def _numpy_policy(calls: list[int]) -> NetworkPlayer:
    """A deterministic stand-in network: a fixed linear map of the features, one call per batch."""
    weights = np.random.default_rng(0).standard_normal((FEATURE_SHAPE[0] * FEATURE_SHAPE[1], 82)).astype(np.float32)

    def logits(features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        calls.append(len(features))
        # einsum multiplies on this thread: a BLAS matmul of a few rows wakes its thread pool at every
        # call, which costs more CPU time than the games themselves on a busy machine
        return np.where(mask, np.einsum("nf,fa->na", features.reshape(len(features), -1), weights), -1e9)

    return NetworkPlayer("numpy", logits)


def test_a_network_against_itself_shares_each_step_forward_pass_and_ranks_2_5():
    calls: list[int] = []
    policy = _numpy_policy(calls)
    pool = DuplicatePool(policy, policy, seed=0, pool_size=4)
    results = list(pool.play([0]))
    assert np.mean([result.ranks for result in results]) == 2.5
    assert all(sorted(result.ranks) == [1, 2, 3, 4] for result in results)
    assert pool.times.forward_calls == len(calls) and pool.times.decisions == sum(calls)
    assert max(calls) > 1, "decisions of concurrent games go through one call"
    assert sum(result.decisions for result in results) == pool.times.decisions
    assert pool.times.games == 4


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_results_do_not_depend_on_how_many_games_run_at_once(temperature):
    """Random opponents and sampling draw from per-game generators, so the pool's size and order
    change nothing (a resumed evaluation plays a deal as an uninterrupted one would)."""
    one_at_a_time = list(DuplicatePool(_numpy_policy([]), RANDOM, seed=5, temperature=temperature,
                                       pool_size=1).play([0]))
    together = list(DuplicatePool(_numpy_policy([]), RANDOM, seed=5, temperature=temperature,
                                  pool_size=8).play([0]))
    assert sorted(one_at_a_time, key=lambda r: r.deal) == sorted(together, key=lambda r: r.deal)


def test_each_finished_game_is_reported():
    games = []
    list(DuplicatePool(RULE_BASED, RANDOM, seed=1, pool_size=3, on_game=lambda: games.append(1)).play([4]))
    assert len(games) == 4


def test_bad_pool_settings_are_refused():
    with pytest.raises(ValueError, match="temperature"):
        DuplicatePool(RULE_BASED, RULE_BASED, seed=0, temperature=-1.0)
    with pytest.raises(ValueError, match="pool_size"):
        DuplicatePool(RULE_BASED, RULE_BASED, seed=0, pool_size=0)


def test_the_rotations_of_a_deal_share_the_first_hands_walls_only():
    """Seat 0 is a random player in one game and a rule-based one in the other: the first hand starts
    from the same tiles, later hands do not (play moved the game elsewhere)."""
    from trainspeed.workloads.mahjong.agents import RandomAgent, RuleBasedAgent
    from trainspeed.workloads.mahjong.engine import play_game

    def starting_hands(agents) -> list[list[list[str]]]:
        log = play_game(agents, seed=deal_seed(0, 3)).mjai_log
        return [event["tehais"] for event in log if event["type"] == "start_kyoku"]

    rule_based = starting_hands([RuleBasedAgent() for _ in range(4)])
    one_random = starting_hands([RandomAgent(1), RuleBasedAgent(), RuleBasedAgent(), RuleBasedAgent()])
    assert rule_based[0] == one_random[0]
    assert rule_based[1:] != one_random[1:]
