"""Input planes the engine's encoding lacks, computed from the seat's own view.

The engine's 74 planes hold the hand, the last few discards of each player and the tiles seen, but
not what a Mahjong player computes from them before choosing: how far the hand is from tenpai, what
each discard does to that distance, how many unseen tiles would then improve the hand, every tile
each player has discarded (the engine keeps only the recent ones), and which tile a call would take.
Strong open Mahjong AIs give their networks such features (Suphx's look-ahead features, Mortal's
shanten and waits). They are facts about tiles, computed by the same functions the rule-based
agent uses (`tiles.py`); none of them says which action to take. Nothing here reads anything the
seat cannot see.

  plane    what (per tile type t, or the same value on every t)
  0-4      the hand's shanten is at least 0, 1, 2, 3, 4 (thermometer; every t)
  5        discarding one t raises the shanten (t in the hand; 0 elsewhere)
  6        acceptance after discarding one t: unseen tiles that would lower the new shanten, / 64
  7-10     t lies in the river of the seat itself, the next seat, the one opposite, the previous one
  11       t is the tile a call, ron or pass would answer (decisions about another player's tile)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the shard reader and loader read the layout below on hosts without the engine
    from riichienv import Observation

NUM_TILE_TYPES = 34
SHANTEN_THRESHOLDS = (0, 1, 2, 3, 4)
ACCEPTANCE_SCALE = 64.0
NUM_FACT_PLANES = len(SHANTEN_THRESHOLDS) + 2 + 4 + 1
RAISES_PLANE = len(SHANTEN_THRESHOLDS)
ACCEPTANCE_PLANE = RAISES_PLANE + 1
RIVER_PLANES = ACCEPTANCE_PLANE + 1
OFFERED_PLANE = RIVER_PLANES + 4


def fact_planes(observation: Observation) -> np.ndarray:
    """(NUM_FACT_PLANES, 34) float32 for one observation (see the module docstring)."""
    from riichienv import ActionType, calculate_shanten

    from trainspeed.workloads.mahjong.tiles import (acceptance, shanten_after_discards, tile_type, useful_kinds,
                                                    visible_counts, without_one)

    planes = np.zeros((NUM_FACT_PLANES, NUM_TILE_TYPES), dtype=np.float32)
    hand = list(observation.hand)
    shanten = calculate_shanten(hand)
    for row, threshold in enumerate(SHANTEN_THRESHOLDS):
        planes[row] = shanten >= threshold
    if len(hand) % 3 == 2:  # a hand that must discard: one tile more than its groups need
        seen = visible_counts(observation)
        draws = useful_kinds(hand)
        for kind, after in shanten_after_discards(hand).items():
            planes[RAISES_PLANE, kind] = after > shanten
            planes[ACCEPTANCE_PLANE, kind] = acceptance(without_one(hand, kind), after, seen, draws) / ACCEPTANCE_SCALE
    for offset in range(4):
        seat = (observation.player_id + offset) % 4
        kinds = [tile_type(t) for t in observation.discards[seat]]
        planes[RIVER_PLANES + offset, kinds] = 1.0
    answers_a_tile = any(a.action_type == ActionType.PASS for a in observation.legal_actions())
    if observation.last_discard is not None and answers_a_tile:
        planes[OFFERED_PLANE, tile_type(observation.last_discard)] = 1.0
    return planes
