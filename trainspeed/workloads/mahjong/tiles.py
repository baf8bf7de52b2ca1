"""Facts about tiles from one seat's own view: tile types, what it can see, shanten after each
discard, and acceptance (how many unseen tiles would move a hand closer to tenpai).

The rule-based agent decides with these facts, and the policy network's input planes carry the
same facts (`features.py`), computed by the same functions, so what the teacher knows and what
the student is shown cannot drift apart.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

from riichienv import Observation, calculate_shanten

DRAGONS = frozenset({31, 32, 33})
EAST = 27
NUM_TILE_TYPES = 34
TERMINALS_AND_HONOURS = frozenset({0, 8, 9, 17, 18, 26, *range(27, 34)})


def tile_type(tile: int) -> int:
    """Tile id (0..135, four copies per type) -> type (0..33)."""
    return tile // 4


def value_honours(observation: Observation) -> frozenset[int]:
    """Tile types whose pon gives a yaku for this seat: dragons, own seat wind, round wind."""
    seat_wind = EAST + (observation.player_id - observation.oya) % 4
    return DRAGONS | {seat_wind, EAST + int(observation.round_wind)}


def visible_counts(observation: Observation) -> Counter:
    """Copies of each tile type this seat can see: own hand, all discards and melds, dora markers."""
    seen: Counter = Counter(tile_type(t) for t in observation.hand)
    for river in observation.discards:
        seen.update(tile_type(t) for t in river)
    for melds in observation.melds:
        for meld in melds:
            seen.update(tile_type(t) for t in meld.tiles)
    seen.update(tile_type(t) for t in observation.dora_indicators)
    return seen


def _neighbours(kind: int) -> frozenset[int]:
    if kind >= 27:
        return frozenset({kind})
    suit_start = kind - kind % 9
    return frozenset(k for k in range(kind - 2, kind + 3) if suit_start <= k < suit_start + 9)


NEIGHBOURS = tuple(_neighbours(kind) for kind in range(NUM_TILE_TYPES))
"""Per tile type: the types within 2 in its suit (an honour: itself), the draws that can join it."""


def useful_kinds(hand: list[int]) -> set[int]:
    """Tile types that could lower the shanten: neighbours (within 2, same suit) of a hand tile,
    and terminals/honours (thirteen orphans). No other draw can complete a group or a pair."""
    return set(TERMINALS_AND_HONOURS).union(*(NEIGHBOURS[kind] for kind in {tile_type(t) for t in hand}))


def acceptance(hand: list[int], shanten: int, seen: Mapping[int, int], kinds: set[int] | None = None) -> int:
    """Unseen tiles that would lower the shanten of `hand` (13-tile style) if drawn.

    `kinds`: the draws to try, any superset of `useful_kinds(hand)` (the useful kinds of a hand
    before a discard cover those after it, so one set serves every discard of a turn)."""
    trial = [*hand, 0]  # the hand plus one drawn tile, rewritten in place for each kind tried
    total = 0
    for kind in useful_kinds(hand) if kinds is None else kinds:
        remaining = 4 - seen[kind]
        if remaining > 0:
            trial[-1] = kind * 4
            if calculate_shanten(trial) < shanten:
                total += remaining
    return total


def without_one(hand: list[int], kind: int) -> list[int]:
    """The hand after discarding one tile of type `kind` (which copy does not change any fact here)."""
    rest = list(hand)
    rest.remove(next(tile for tile in rest if tile_type(tile) == kind))
    return rest


def shanten_after_discards(hand: list[int]) -> dict[int, int]:
    """For each tile type in the hand: the shanten after discarding one tile of that type."""
    return {kind: calculate_shanten(without_one(hand, kind)) for kind in sorted({tile_type(t) for t in hand})}
