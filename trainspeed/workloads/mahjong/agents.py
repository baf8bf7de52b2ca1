"""Agents that play through the engine: a random one and a rule-based one.

The rule-based agent is a plain, strong-enough baseline for making training data, not a policy
to beat: win whenever possible, riichi whenever possible, discard toward the lowest shanten
(ties broken by how many unseen tiles would lower it further), fold against a riichi when far from
tenpai (prefer tiles the riichi player discarded, then honours already seen), and pon only value
honours. Every other call (chi, other pons, kans, nine-terminal abort) is passed.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Iterable

from riichienv import Action, ActionType, Observation

from trainspeed.workloads.mahjong.tiles import (acceptance, shanten_after_discards, tile_type, useful_kinds,
                                                value_honours, visible_counts, without_one)

FOLD_SHANTEN = 2
"""Against a riichi, fold when at least this far from tenpai."""


class RandomAgent:
    """Uniform over legal actions; seeded, so games are reproducible."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def act(self, observation: Observation) -> Action:
        return self._rng.choice(observation.legal_actions())


def _first(actions: Iterable[Action], *types: ActionType) -> Action | None:
    return next((a for a in actions if a.action_type in types), None)


class RuleBasedAgent:
    """Deterministic given the observation; see the module docstring for the rules.

    `fold_against_riichi=False` drops the defence rule (the benchmark measures what it is worth).
    """

    def __init__(self, fold_against_riichi: bool = True) -> None:
        self.fold_against_riichi = fold_against_riichi

    def act(self, observation: Observation) -> Action:
        legal = observation.legal_actions()
        win = _first(legal, ActionType.TSUMO, ActionType.RON)
        if win is not None:
            return win
        riichi = _first(legal, ActionType.RIICHI)
        if riichi is not None:
            return riichi
        pon = next((a for a in legal if a.action_type == ActionType.PON
                    and tile_type(a.tile) in value_honours(observation)), None)
        if pon is not None:
            return pon
        discards = [a for a in legal if a.action_type == ActionType.DISCARD]
        if discards:
            return self.choose_discard(observation, discards)
        return _first(legal, ActionType.PASS) or legal[0]

    def choose_discard(self, observation: Observation, discards: list[Action]) -> Action:
        hand = list(observation.hand)
        seen = visible_counts(observation)
        shanten_after = shanten_after_discards(hand)
        best_shanten = min(shanten_after[tile_type(a.tile)] for a in discards)
        threats = [seat for seat, declared in enumerate(observation.riichi_declared)
                   if declared and seat != observation.player_id]
        if threats and best_shanten >= FOLD_SHANTEN and self.fold_against_riichi:
            return min(discards, key=lambda a: (_danger(a.tile, threats, observation, seen), a.tile))
        candidates = [a for a in discards if shanten_after[tile_type(a.tile)] == best_shanten]
        if len(candidates) == 1:
            return candidates[0]
        draws = useful_kinds(hand)
        scored = {kind: acceptance(without_one(hand, kind), best_shanten, seen, draws)
                  for kind in {tile_type(a.tile) for a in candidates}}
        return max(candidates, key=lambda a: (scored[tile_type(a.tile)], _isolation(a.tile), -a.tile))


def _isolation(tile: int) -> int:
    """Tie-break among equal hands: shed honours and terminals before middle tiles."""
    kind = tile_type(tile)
    if kind >= 27:
        return 2
    return 1 if kind % 9 in (0, 8) else 0


def _danger(tile: int, threats: list[int], observation: Observation, seen: Counter) -> int:
    """Lower is safer: a tile every riichi player discarded is safe (genbutsu); then honours by
    how many copies are already visible; then terminals; middle tiles are the most dangerous."""
    kind = tile_type(tile)
    if all(kind in {tile_type(t) for t in observation.discards[seat]} for seat in threats):
        return 0
    if kind >= 27:
        return 1 + (4 - seen[kind])
    return 6 if kind % 9 in (0, 8) else 7 + min(kind % 9, 8 - kind % 9)
