"""The tile-fact planes: each one equals the fact it names, computed independently here."""

import numpy as np
import pytest
from riichienv import ActionType, calculate_shanten

from trainspeed.workloads.mahjong.agents import FOLD_SHANTEN, RuleBasedAgent
from trainspeed.workloads.mahjong.encoding import ENGINE_PLANES, FEATURE_SHAPE, encode_features
from trainspeed.workloads.mahjong.engine import play_game
from trainspeed.workloads.mahjong.features import (ACCEPTANCE_PLANE, ACCEPTANCE_SCALE, NUM_FACT_PLANES,
                                                   OFFERED_PLANE, RAISES_PLANE, RIVER_PLANES, SHANTEN_THRESHOLDS,
                                                   fact_planes)
from trainspeed.workloads.mahjong.tiles import tile_type, visible_counts


@pytest.fixture(scope="module")
def decisions():
    return [d for seed in (41, 42) for d in play_game([RuleBasedAgent() for _ in range(4)], seed=seed).decisions]


def _acceptance_over_all_kinds(rest: list[int], shanten: int, seen) -> int:
    return sum(4 - seen[k] for k in range(34) if seen[k] < 4 and calculate_shanten(rest + [k * 4]) < shanten)


def test_the_model_input_is_the_engine_planes_then_the_fact_planes(decisions):
    observation = decisions[0].observation
    features = encode_features(observation)
    assert features.shape == FEATURE_SHAPE == (ENGINE_PLANES + NUM_FACT_PLANES, 34) and features.dtype == np.float32
    engine = np.frombuffer(observation.encode(), dtype=np.float32).reshape(ENGINE_PLANES, 34)
    assert np.array_equal(features[:ENGINE_PLANES], engine)
    assert np.array_equal(features[ENGINE_PLANES:], fact_planes(observation))


def test_shanten_planes_are_a_thermometer_of_the_hands_shanten(decisions):
    for decision in decisions[::5]:
        planes = fact_planes(decision.observation)
        shanten = calculate_shanten(list(decision.observation.hand))
        expected = [shanten >= threshold for threshold in SHANTEN_THRESHOLDS]
        assert [bool(planes[row, 0]) for row in range(len(SHANTEN_THRESHOLDS))] == expected
        assert (planes[: len(SHANTEN_THRESHOLDS)] == planes[: len(SHANTEN_THRESHOLDS), :1]).all()


def test_discard_planes_hold_each_discards_shanten_step_and_acceptance(decisions):
    checked = 0
    for decision in decisions[::3]:
        observation = decision.observation
        hand = list(observation.hand)
        planes = fact_planes(observation)
        if len(hand) % 3 != 2:
            assert not planes[RAISES_PLANE].any() and not planes[ACCEPTANCE_PLANE].any()
            continue
        shanten, seen = calculate_shanten(hand), visible_counts(observation)
        kinds = {tile_type(t) for t in hand}
        for kind in range(34):
            if kind not in kinds:
                assert planes[RAISES_PLANE, kind] == 0 and planes[ACCEPTANCE_PLANE, kind] == 0
                continue
            rest = list(hand)
            rest.remove(next(t for t in hand if tile_type(t) == kind))
            after = calculate_shanten(rest)
            assert planes[RAISES_PLANE, kind] == (after > shanten)
            assert planes[ACCEPTANCE_PLANE, kind] * ACCEPTANCE_SCALE == _acceptance_over_all_kinds(rest, after, seen)
            checked += 1
    assert checked > 300


def test_river_planes_hold_every_discard_of_each_seat_in_relative_order(decisions):
    for decision in decisions[::7]:
        observation = decision.observation
        planes = fact_planes(observation)
        for offset in range(4):
            river = observation.discards[(observation.player_id + offset) % 4]
            assert set(np.flatnonzero(planes[RIVER_PLANES + offset])) == {tile_type(t) for t in river}


def test_the_offered_tile_is_marked_only_when_the_decision_answers_another_players_tile(decisions):
    answers = 0
    for decision in decisions:
        observation = decision.observation
        marked = np.flatnonzero(fact_planes(observation)[OFFERED_PLANE])
        if any(a.action_type == ActionType.PASS for a in observation.legal_actions()):
            assert list(marked) == [tile_type(observation.last_discard)]
            answers += 1
        else:
            assert len(marked) == 0
    assert answers > 20


def test_the_planes_carry_what_the_teacher_weighs_but_not_its_choice(decisions):
    """Building a hand (no riichi threat), the teacher's discard keeps the shanten and has the largest
    acceptance among those that do: both facts are on the planes. Ties are common, so the planes
    alone do not name the teacher's tile: the network still has to learn its order."""
    ties = checked = 0
    for decision in decisions:
        observation = decision.observation
        if decision.action.action_type != ActionType.DISCARD or any(observation.riichi_declared):
            continue
        planes = fact_planes(observation)
        legal = {tile_type(a.tile) for a in observation.legal_actions() if a.action_type == ActionType.DISCARD}
        keeping = [k for k in legal if planes[RAISES_PLANE, k] == 0] or sorted(legal)
        best = max(planes[ACCEPTANCE_PLANE, k] for k in keeping)
        chosen = tile_type(decision.action.tile)
        if calculate_shanten(list(observation.hand)) < FOLD_SHANTEN or not any(observation.riichi_declared):
            assert chosen in keeping and planes[ACCEPTANCE_PLANE, chosen] == best
            ties += sum(planes[ACCEPTANCE_PLANE, k] == best for k in keeping) > 1
            checked += 1
    assert checked > 200 and ties > 10


def test_one_score_per_tile_token_over_its_own_planes_gives_the_teachers_building_discard(decisions):
    """What mahjong_learning.md says the network has to compute for a building discard: with
    plane 5 (raises the shanten) and plane 6 (acceptance) given, a score per tile type of its own
    planes plus a fixed bias per type (honour, terminal, middle tile, then the lowest type) and the
    largest legal score is the teacher's tile, every time."""
    from trainspeed.workloads.mahjong.agents import _isolation
    from trainspeed.workloads.mahjong.tiles import shanten_after_discards

    def score(planes: np.ndarray, kind: int) -> float:
        order = 0.1 * _isolation(kind * 4) - 0.001 * kind  # spans less than one tile of acceptance
        return -1000.0 * planes[RAISES_PLANE, kind] + ACCEPTANCE_SCALE * planes[ACCEPTANCE_PLANE, kind] + order

    checked = 0
    for decision in decisions:
        observation = decision.observation
        if decision.action.action_type != ActionType.DISCARD:
            continue
        planes = fact_planes(observation)
        legal = {tile_type(a.tile) for a in observation.legal_actions() if a.action_type == ActionType.DISCARD}
        best_shanten = min(shanten_after_discards(list(observation.hand))[kind] for kind in legal)
        threats = [seat for seat, declared in enumerate(observation.riichi_declared)
                   if declared and seat != observation.player_id]
        if threats and best_shanten >= FOLD_SHANTEN:
            continue  # folding: the teacher ranks by danger instead
        assert max(legal, key=lambda kind: score(planes, kind)) == tile_type(decision.action.tile)
        checked += 1
    assert checked > 200


def test_the_engine_planes_mark_the_round_and_seat_winds_a_value_honour_pon_depends_on(decisions):
    """Engine planes 35 and 36 are one-hot at the round wind's and the seat wind's tile type."""
    for decision in decisions[::5]:
        observation = decision.observation
        planes = encode_features(observation)
        seat_wind = 27 + (observation.player_id - observation.oya) % 4
        assert list(np.flatnonzero(planes[35])) == [27 + int(observation.round_wind)]
        assert list(np.flatnonzero(planes[36])) == [seat_wind]
