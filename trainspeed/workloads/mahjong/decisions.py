"""What kind of decision a sample is, and how a policy's choice differs from its teacher's.

Agreement with the teacher as one number hides where a student fails: pass answers are a fifth of
all decisions and nearly free, discards are three quarters and hard. This module splits samples by
the teacher's action (discard, riichi, win, pon, chi, kan, pass, abort) and splits wrong discards
by what they cost in the teacher's own terms:

- `equal`: the student's tile leaves the same shanten and the same acceptance (unseen tiles that
  would lower the shanten) as the teacher's; only the tie-break differs.
- `lower acceptance`: same shanten, fewer tiles that would improve the hand.
- `higher shanten`: the student's discard moves the hand away from tenpai: a real error.
- `not a discard`: the student declared something else (a kan, ...) where the teacher discarded.

Discards the teacher made while folding against a riichi (its hand two or more steps from tenpai)
are counted apart: they follow its danger order, not shanten. An error between two copies of one
tile type cannot occur: the action space has one discard id per tile type (a red five and a plain
five share it), so such choices count as agreement.

Everything is read from the samples themselves: the engine's feature planes hold the hand (planes
0-3, counts at least 1..4), the tiles visible to the seat (plane 63, count / 4) and the opponents'
riichi flags (planes 32-34), so any dataset of the Mahjong shard format can be analysed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from riichienv import calculate_shanten

from trainspeed.workloads.mahjong.agents import FOLD_SHANTEN, acceptance

DECISION_KINDS = ("discard", "riichi", "win", "pon", "chi", "kan", "abort", "pass")
"""Kinds of decision, by the action the teacher took (riichienv's action ids)."""
DISCARD_ERRORS = ("equal", "lower acceptance", "higher shanten", "not a discard")

HAND_PLANES = slice(0, 4)
OPPONENT_RIICHI_PLANES = slice(32, 35)
SEEN_PLANE = 63
NUM_TILE_TYPES = 34


def decision_kind(action_id: int) -> str:
    """riichienv's 82 ids: 0-36 discard, 37 riichi, 38-40 chi, 41 pon, 42-78 kan, 79 win
    (tsumo or ron), 80 nine-terminal abort, 81 pass."""
    if 0 <= action_id <= 36:
        return "discard"
    if action_id == 37:
        return "riichi"
    if 38 <= action_id <= 40:
        return "chi"
    if action_id == 41:
        return "pon"
    if 42 <= action_id <= 78:
        return "kan"
    if action_id == 79:
        return "win"
    if action_id == 80:
        return "abort"
    if action_id == 81:
        return "pass"
    raise ValueError(f"action id {action_id} is outside riichienv's 82 actions")


def hand_tiles(features: np.ndarray) -> list[int]:
    """Tile ids (type x 4 + copy) of the concealed hand in one sample's (C, 34) features; which
    copies does not matter to shanten or acceptance."""
    counts = np.rint(features[HAND_PLANES].astype(np.float32)).sum(axis=0).astype(int)
    return [tile_type * 4 + copy for tile_type in range(NUM_TILE_TYPES) for copy in range(counts[tile_type])]


def seen_counts(features: np.ndarray) -> dict[int, int]:
    """Copies of each tile type the seat can see (its hand, every river and meld, dora indicators)."""
    counts = np.rint(features[SEEN_PLANE].astype(np.float32) * 4).astype(int)
    return {tile_type: int(count) for tile_type, count in enumerate(counts)}


@dataclass(frozen=True)
class DiscardFacts:
    shanten: int
    acceptance: int


def discard_facts(hand: list[int], tile_type: int, seen: dict[int, int]) -> DiscardFacts:
    """Shanten of the hand without one tile of `tile_type`, and the unseen tiles that would lower it."""
    rest = list(hand)
    rest.remove(next(tile for tile in rest if tile // 4 == tile_type))
    shanten = calculate_shanten(rest)
    return DiscardFacts(shanten, acceptance(rest, shanten, seen))


def is_folding(features: np.ndarray, hand: list[int]) -> bool:
    """The teacher's fold rule: an opponent declared riichi and the hand is two or more from tenpai."""
    threatened = bool(np.any(features[OPPONENT_RIICHI_PLANES, 0] > 0.5))
    return threatened and calculate_shanten(hand) >= FOLD_SHANTEN


def discard_error(features: np.ndarray, teacher: int, chosen: int) -> str:
    """Which of DISCARD_ERRORS a wrong answer to a (non-folding) teacher discard is."""
    if decision_kind(chosen) != "discard":
        return "not a discard"
    hand, seen = hand_tiles(features), seen_counts(features)
    taught, picked = discard_facts(hand, teacher, seen), discard_facts(hand, chosen, seen)
    if picked.shanten > taught.shanten:
        return "higher shanten"
    if picked.acceptance < taught.acceptance:
        return "lower acceptance"
    return "equal"


@dataclass
class AgreementTable:
    """Counts of samples and agreements per decision kind, wrong discards by error, and the
    kind the student chose for each kind the teacher chose."""

    samples: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DECISION_KINDS, 0))
    agreed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DECISION_KINDS, 0))
    folding_samples: int = 0
    folding_agreed: int = 0
    discard_errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DISCARD_ERRORS, 0))
    chosen_kinds: dict[str, dict[str, int]] = field(
        default_factory=lambda: {kind: dict.fromkeys(DECISION_KINDS, 0) for kind in DECISION_KINDS})

    def add(self, features: np.ndarray, teacher: np.ndarray, chosen: np.ndarray) -> None:
        """One batch: features (n, C, 34), the teacher's and the student's action ids (n,)."""
        for sample, (taught, picked) in enumerate(zip(teacher.tolist(), chosen.tolist())):
            kind = decision_kind(taught)
            self.samples[kind] += 1
            self.agreed[kind] += taught == picked
            self.chosen_kinds[kind][decision_kind(picked)] += 1
            if kind != "discard":
                continue
            hand = hand_tiles(features[sample])
            if is_folding(features[sample], hand):
                self.folding_samples += 1
                self.folding_agreed += taught == picked
            elif taught != picked:
                self.discard_errors[discard_error(features[sample], taught, picked)] += 1

    @property
    def total(self) -> int:
        return sum(self.samples.values())

    def agreement(self) -> dict[str, float | None]:
        """Share of agreeing samples per kind (None where the split holds none), and overall."""
        shares: dict[str, float | None] = {
            kind: (self.agreed[kind] / count if count else None) for kind, count in self.samples.items()}
        shares["overall"] = sum(self.agreed.values()) / self.total if self.total else None
        building = self.samples["discard"] - self.folding_samples
        shares["discard_building"] = ((self.agreed["discard"] - self.folding_agreed) / building
                                      if building else None)
        shares["discard_folding"] = (self.folding_agreed / self.folding_samples
                                     if self.folding_samples else None)
        return shares
