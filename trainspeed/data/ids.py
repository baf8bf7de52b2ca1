"""Token ids: whole numbers that index a vocabulary, so each must lie in 0..vocabulary-1.

An id outside that range is an IndexError deep in an embedding on the host, a device-side
assertion on CUDA, and, once a wide id is narrowed to the int32 that token batches hold, another
token without a word (2**62 wraps to 0). So ids are checked wherever they enter: when
`write_dataset` (`data from-arrays`) writes the `tokens` column, when `data verify` reads it, and
by the workload on every batch it trains on. The check costs one min and one max over the ids;
only ids found outside are looked up, to name the first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOKEN_COLUMN = "tokens"
"""The column of token ids: the one the language-model workloads read, so the one checked as ids."""
ID_LIMIT = 2**31
"""Token ids are trained as int32 (the synthetic batches' and every token batch's dtype): an id
must be below 2**31 whatever the vocabulary, so narrowing a 64-bit id never wraps."""


@dataclass(frozen=True)
class OutsideId:
    """The first id outside 0..stop-1 of an array: its index (row first) and value."""

    index: tuple[int, ...]
    value: int

    def position(self, first_row: int = 0) -> str:
        """Where it is, in words: its row (counted from `first_row`) and its place in the row."""
        row, rest = self.index[0] + first_row, self.index[1:]
        if not rest:
            return f"row {row}"
        return f"row {row}, position {rest[0] if len(rest) == 1 else list(rest)}"

    def what(self, stop: int, bound: str) -> str:
        """Why the value is refused: negative, past int32, or past `bound` (what `stop` is)."""
        if self.value < 0:
            return "is negative (ids count from 0)"
        if self.value >= ID_LIMIT:
            return f"does not fit int32, which token ids are trained as (ids run up to {ID_LIMIT - 1:,})"
        return f"is past {bound} ({stop:,} ids: 0..{stop - 1})"


def first_outside(values: np.ndarray, stop: int, start: int = 0) -> OutsideId | None:
    """The first value (in row-major order) below `start` or at or past `stop`, or None when every
    value is inside. Values too small are named before values too large. (numpy compares an array
    with a Python int its dtype cannot hold exactly, so no bound is cast.)"""
    if values.size == 0:
        return None
    low, high = int(values.min()), int(values.max())
    if low >= start and high < stop:
        return None
    outside = values < start if low < start else values >= stop
    flat = int(np.flatnonzero(outside.reshape(-1))[0])
    index = tuple(int(i) for i in np.unravel_index(flat, values.shape))
    return OutsideId(index, int(values[index]))


def count_outside(values: np.ndarray, stop: int, start: int = 0) -> int:
    """How many values lie below `start` or at or past `stop` (read again only where one was found)."""
    return int(np.count_nonzero((values < start) | (values >= stop)))


def id_stop(vocabulary: int | None) -> int:
    """The first id refused: the vocabulary when known, else int32's limit."""
    return ID_LIMIT if vocabulary is None else min(vocabulary, ID_LIMIT)
