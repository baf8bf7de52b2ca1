"""Encoding: shapes and dtypes, masks equal the legal actions, float16 storage error is bounded."""

import dataclasses

import numpy as np
import pytest
from riichienv import ActionType

from trainspeed.workloads.mahjong.agents import RuleBasedAgent
from trainspeed.workloads.mahjong.encoding import (FEATURE_SHAPE, NUM_ACTIONS, IllegalAction, action_id,
                                                   encode_decisions, encode_features, encode_mask)
from trainspeed.workloads.mahjong.engine import play_game


@pytest.fixture(scope="module")
def game():
    return play_game([RuleBasedAgent() for _ in range(4)], seed=21)


def test_features_mask_and_action_shapes(game):
    samples = encode_decisions(game.decisions, game_id=9)
    n = len(game.decisions)
    assert samples.features.shape == (n, *FEATURE_SHAPE) and samples.features.dtype == np.float32
    assert samples.mask.shape == (n, NUM_ACTIONS) and samples.mask.dtype == bool
    assert samples.action.dtype == np.int64 and (samples.game_id == 9).all()
    assert samples.mask[np.arange(n), samples.action].all()


def test_mask_marks_exactly_the_legal_actions(game):
    for decision in game.decisions[:200]:
        legal = {action_id(a) for a in decision.observation.legal_actions()}
        assert set(np.flatnonzero(encode_mask(decision.observation))) == legal


def test_float16_keeps_features_within_half_an_ulp(game):
    features = np.stack([encode_features(d.observation) for d in game.decisions])
    assert features.min() >= 0 and np.isfinite(features).all()
    error = np.abs(features.astype(np.float16).astype(np.float32) - features)
    # float16 has 10 mantissa bits: rounding error <= 2^-11 relative (values here are >= 2^-14 or 0)
    assert (error <= np.maximum(features, 2.0**-14) * 2.0**-11).all()
    assert error.max() < 5e-4


def test_an_action_outside_its_mask_is_refused(game):
    own_turn = next(d for d in game.decisions if d.action.action_type == ActionType.DISCARD)
    answer = next(d for d in game.decisions if d.action.action_type == ActionType.PASS)
    forged = dataclasses.replace(own_turn, action=answer.action)
    with pytest.raises(IllegalAction, match="not in its legal mask"):
        encode_decisions([forged], game_id=1)
