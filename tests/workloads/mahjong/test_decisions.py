"""Decision kinds and discard errors, read from real samples' planes."""

import numpy as np
import pytest
from riichienv import ActionType

from trainspeed.workloads.mahjong.agents import RuleBasedAgent
from trainspeed.workloads.mahjong.decisions import (DECISION_KINDS, AgreementTable, decision_kind, discard_error,
                                                    hand_tiles, is_folding, seen_counts)
from trainspeed.workloads.mahjong.encoding import action_id, encode_decisions
from trainspeed.workloads.mahjong.engine import play_game
from trainspeed.workloads.mahjong.features import RAISES_PLANE
from trainspeed.workloads.mahjong.encoding import ENGINE_PLANES
from trainspeed.workloads.mahjong.tiles import tile_type, visible_counts

KIND_OF_TYPE = {ActionType.DISCARD: "discard", ActionType.RIICHI: "riichi", ActionType.TSUMO: "win",
                ActionType.RON: "win", ActionType.PON: "pon", ActionType.CHI: "chi", ActionType.PASS: "pass",
                ActionType.ANKAN: "kan", ActionType.KAKAN: "kan", ActionType.DAIMINKAN: "kan",
                ActionType.KYUSHU_KYUHAI: "abort"}


@pytest.fixture(scope="module")
def game():
    return play_game([RuleBasedAgent() for _ in range(4)], seed=51)


@pytest.fixture(scope="module")
def samples(game):
    return encode_decisions(game.decisions, game_id=0)


def test_kinds_follow_the_engines_action_types(game):
    for decision in game.decisions:
        for action in decision.observation.legal_actions():
            assert decision_kind(action_id(action)) == KIND_OF_TYPE[action.action_type]
    with pytest.raises(ValueError, match="outside"):
        decision_kind(82)


def test_the_hand_and_the_seen_tiles_read_back_from_the_planes(game, samples):
    for decision, features in zip(game.decisions, samples.features):
        observation = decision.observation
        assert sorted(tile_type(t) for t in hand_tiles(features)) == sorted(tile_type(t) for t in observation.hand)
        visible = visible_counts(observation)
        assert seen_counts(features) == {kind: visible[kind] for kind in range(34)}


def test_the_teacher_agrees_with_itself_everywhere(samples):
    table = AgreementTable()
    table.add(samples.features, samples.action, samples.action)
    shares = table.agreement()
    assert shares["overall"] == 1.0 and table.total == len(samples)
    assert all(shares[kind] in (1.0, None) for kind in DECISION_KINDS)
    assert sum(table.discard_errors.values()) == 0


def test_a_discard_that_breaks_the_hand_is_a_higher_shanten_error(samples):
    """Where the teacher's discard keeps the shanten, answer with a legal tile that raises it."""
    raising = samples.features[:, ENGINE_PLANES + RAISES_PLANE] > 0
    rows = [i for i, action in enumerate(samples.action)
            if decision_kind(int(action)) == "discard" and not raising[i, action]
            and (samples.mask[i, :34] & raising[i]).any()]
    assert len(rows) > 30
    chosen = samples.action.copy()
    for i in rows:
        chosen[i] = int(np.flatnonzero(samples.mask[i, :34] & raising[i])[0])
        assert discard_error(samples.features[i], int(samples.action[i]), int(chosen[i])) == "higher shanten"
    table = AgreementTable()
    table.add(samples.features, samples.action, chosen)
    building = [i for i in rows if not is_folding(samples.features[i], hand_tiles(samples.features[i]))]
    assert len(building) > 30
    assert table.discard_errors == {"equal": 0, "lower acceptance": 0, "higher shanten": len(building),
                                    "not a discard": 0}
    assert table.agreement()["discard"] < 1.0 and table.agreement()["pass"] in (1.0, None)


def test_a_call_where_the_teacher_discarded_is_not_a_discard(samples):
    i = next(i for i, action in enumerate(samples.action) if decision_kind(int(action)) == "discard")
    assert discard_error(samples.features[i], int(samples.action[i]), 81) == "not a discard"
