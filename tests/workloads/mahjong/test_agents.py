"""Agents: the rule-based agent follows its rules and beats the random agent."""

import numpy as np
import pytest
from riichienv import ActionType, calculate_shanten

from trainspeed.workloads.mahjong.agents import RandomAgent, RuleBasedAgent, tile_type, value_honours
from trainspeed.workloads.mahjong.engine import play_game

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
