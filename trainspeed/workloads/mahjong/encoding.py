"""Observation -> model inputs: features (86, 34) float32, legal-action mask (82,) bool, action id.

The features are the engine's own 74 planes (`Observation.encode()`, raw float32 bytes, so any
tool that reads the same engine version sees the same ones), followed by 12 planes of facts about
tiles computed from the same observation (`features.py`: shanten, what each discard does to it,
acceptance, full rivers, the tile a call would take).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from trainspeed.workloads.mahjong.features import NUM_FACT_PLANES, fact_planes

if TYPE_CHECKING:  # the shard reader and loader use this module on hosts without the engine
    from riichienv import Action, Observation

    from trainspeed.workloads.mahjong.engine import Decision

ENGINE_PLANES = 74
FEATURE_SHAPE = (ENGINE_PLANES + NUM_FACT_PLANES, 34)
NUM_ACTIONS = 82


def engine_planes(observation: Observation) -> np.ndarray:
    """(74, 34) float32, a read-only view of the engine's bytes."""
    return np.frombuffer(observation.encode(), dtype=np.float32).reshape(ENGINE_PLANES, FEATURE_SHAPE[1])


def encode_features(observation: Observation) -> np.ndarray:
    """(86, 34) float32: the engine's planes, then the tile-fact planes."""
    return np.concatenate([engine_planes(observation), fact_planes(observation)])


def encode_mask(observation: Observation) -> np.ndarray:
    """(82,) bool: which action ids are legal."""
    return np.frombuffer(observation.mask(), dtype=np.uint8).astype(bool)


def action_id(action: Action) -> int:
    return int(action.encode())


@dataclass
class EncodedSamples:
    """Column arrays for n decisions; one row per decision, in game order."""

    features: np.ndarray  # (n, 86, 34) float32
    mask: np.ndarray  # (n, 82) bool
    action: np.ndarray  # (n,) int64
    game_id: np.ndarray  # (n,) int64
    seat: np.ndarray  # (n,) int64
    turn: np.ndarray  # (n,) int64

    def __len__(self) -> int:
        return len(self.action)

    @staticmethod
    def concatenate(parts: Sequence["EncodedSamples"]) -> "EncodedSamples":
        if not parts:
            return empty_samples()
        return EncodedSamples(**{name: np.concatenate([getattr(p, name) for p in parts])
                                 for name in SAMPLE_FIELDS})


SAMPLE_FIELDS = ("features", "mask", "action", "game_id", "seat", "turn")


def empty_samples() -> EncodedSamples:
    return EncodedSamples(
        features=np.zeros((0, *FEATURE_SHAPE), np.float32), mask=np.zeros((0, NUM_ACTIONS), bool),
        action=np.zeros(0, np.int64), game_id=np.zeros(0, np.int64), seat=np.zeros(0, np.int64),
        turn=np.zeros(0, np.int64))


class IllegalAction(ValueError):
    """A recorded action that the mask marks illegal: the data would teach an impossible move."""


def encode_decisions(decisions: Sequence[Decision], game_id: int) -> EncodedSamples:
    """All decisions of one game as column arrays; refuses an action its own mask forbids."""
    if not decisions:
        return empty_samples()
    features = np.stack([encode_features(d.observation) for d in decisions])
    mask = np.stack([encode_mask(d.observation) for d in decisions])
    action = np.array([action_id(d.action) for d in decisions], dtype=np.int64)
    illegal = np.flatnonzero(~mask[np.arange(len(action)), action])
    if len(illegal):
        first = decisions[int(illegal[0])]
        raise IllegalAction(f"game {game_id} turn {first.turn}: action {action[illegal[0]]} "
                            f"of seat {first.seat} is not in its legal mask")
    return EncodedSamples(
        features=features, mask=mask, action=action,
        game_id=np.full(len(action), game_id, dtype=np.int64),
        seat=np.array([d.seat for d in decisions], dtype=np.int64),
        turn=np.array([d.turn for d in decisions], dtype=np.int64))
