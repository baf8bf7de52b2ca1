"""Agents: the rule-based agent follows its rules and beats the random agent."""

import numpy as np
import pytest
from riichienv import ActionType, calculate_shanten

from trainspeed.workloads.mahjong.agents import RandomAgent, RuleBasedAgent
from trainspeed.workloads.mahjong.engine import play_game
from trainspeed.workloads.mahjong.tiles import acceptance, tile_type, value_honours, visible_counts

CALLS = (ActionType.CHI, ActionType.PON, ActionType.DAIMINKAN, ActionType.ANKAN, ActionType.KAKAN)


@pytest.fixture(scope="module")
def rule_games():
    return [play_game([RuleBasedAgent() for _ in range(4)], seed=seed) for seed in (31, 32)]


def _types(decision):
    return {a.action_type for a in decision.observation.legal_actions()}


def test_wins_and_riichi_whenever_possible(rule_games):
    decisions = [d for game in rule_games for d in game.decisions]
    wins = [d for d in decisions if _types(d) & {ActionType.TSUMO, ActionType.RON}]
    riichis = [d for d in decisions if ActionType.RIICHI in _types(d) and not _types(d) & {ActionType.TSUMO}]
    assert wins and riichis
    assert all(d.action.action_type in (ActionType.TSUMO, ActionType.RON) for d in wins)
    assert all(d.action.action_type == ActionType.RIICHI for d in riichis)


def test_calls_only_pon_of_value_honours(rule_games):
    calls = [d for game in rule_games for d in game.decisions if d.action.action_type in CALLS]
    for decision in calls:
        assert decision.action.action_type == ActionType.PON
        assert tile_type(decision.action.tile) in value_honours(decision.observation)


def test_discards_keep_the_lowest_shanten_when_nobody_is_in_riichi(rule_games):
    checked = 0
    for game in rule_games:
        for decision in game.decisions:
            obs = decision.observation
            if decision.action.action_type != ActionType.DISCARD or any(obs.riichi_declared):
                continue
            def after(tile):
                rest = list(obs.hand)
                rest.remove(tile)
                return calculate_shanten(rest)
            options = [a.tile for a in obs.legal_actions() if a.action_type == ActionType.DISCARD]
            assert after(decision.action.tile) == min(after(t) for t in options)
            checked += 1
    assert checked > 100


def test_rule_based_agent_beats_random():
    rule_ranks, random_ranks = [], []
    for game in range(4):
        rule_seats = {game % 4, (game + 2) % 4}
        agents = [RuleBasedAgent() if s in rule_seats else RandomAgent(100 * game + s) for s in range(4)]
        ranks = play_game(agents, seed=1000 + game).ranks
        rule_ranks += [ranks[s] for s in rule_seats]
        random_ranks += [ranks[s] for s in range(4) if s not in rule_seats]
    assert np.mean(rule_ranks) < np.mean(random_ranks)


def test_acceptance_over_useful_kinds_equals_trying_all_34(rule_games):
    def every_kind(hand, shanten, seen):
        return sum(4 - seen[k] for k in range(34) if seen[k] < 4 and calculate_shanten(hand + [k * 4]) < shanten)

    checked = 0
    for decision in rule_games[0].decisions[:150]:
        obs = decision.observation
        if len(obs.hand) % 3 != 2:
            continue
        seen = visible_counts(obs)
        for tile in set(obs.hand):
            rest = list(obs.hand)
            rest.remove(tile)
            shanten = calculate_shanten(rest)
            assert acceptance(rest, shanten, seen) == every_kind(rest, shanten, seen)
            checked += 1
    assert checked > 200


def test_folds_with_a_safe_tile_against_riichi_when_far_from_tenpai(rule_games):
    folded = 0
    for game in rule_games:
        for decision in game.decisions:
            obs = decision.observation
            threats = [s for s, declared in enumerate(obs.riichi_declared) if declared and s != obs.player_id]
            if decision.action.action_type != ActionType.DISCARD or not threats or obs.riichi_declared[obs.player_id]:
                continue
            options = [a.tile for a in obs.legal_actions() if a.action_type == ActionType.DISCARD]
            best = min(calculate_shanten([t for i, t in enumerate(obs.hand) if i != obs.hand.index(o)])
                       for o in options)
            safe = [t for t in options
                    if all(tile_type(t) in {tile_type(d) for d in obs.discards[s]} for s in threats)]
            if best >= 2 and safe:
                assert decision.action.tile in safe
                folded += 1
    assert folded > 0
