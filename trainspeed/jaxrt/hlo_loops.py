"""How many times each loop of a compiled program runs, read from its optimized HLO text.

XLA's cost analysis counts a loop's body once, so a row that keeps a program's FLOPs must know its
loops' trips. A CPU or GPU program carries them as an annotation (`known_trip_count`); a TPU
program does not, and there a loop `lax.scan` wrote is read from its condition: a counter compared
with one 32-bit integer constant (`counter < N`), which a scan starts at 0.
"""

from __future__ import annotations

import re

KNOWN_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
LOOP_PARTS = re.compile(r"\bcondition=%?([\w.\-]+), body=%?([\w.\-]+)")
"""A `while` instruction's condition and body computations, as its attributes name them."""
COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
SCALAR_INT_CONSTANT = re.compile(r"= s32\[\](?:\{[^}]*\})? constant\((\d+)\)")
LESS_THAN = re.compile(r"= pred\[\] compare\(.*direction=LT")


def _computations(text: str) -> dict[str, list[str]]:
    """Each computation's lines, by its name."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = COMPUTATION.match(line)
        if header and "=" not in line.split("{")[0].split("(")[0]:
            current = found.setdefault(header.group(1), [])
        elif line.strip() == "}":
            current = None
        elif current is not None:
            current.append(line)
    return found


def _condition_bound(lines: list[str]) -> int | None:
    """N where the condition is `counter < N` with one integer constant, else None."""
    bounds = [int(found.group(1)) for line in lines if (found := SCALAR_INT_CONSTANT.search(line))]
    compares = [line for line in lines if LESS_THAN.search(line)]
    return bounds[0] if len(bounds) == 1 and len(compares) == 1 else None


def loop_trips(text: str) -> dict[str, int | None]:
    """Each loop's trips by the name of its body, in the order the text holds the loops: XLA's
    annotation where it gives one, else the bound its condition compares a counter with, else None."""
    computations = _computations(text)
    trips: dict[str, int | None] = {}
    for line in text.splitlines():
        loop = LOOP_PARTS.search(line) if " while(" in line else None
        if loop is None:
            continue
        condition, body = loop.groups()
        known = KNOWN_TRIP_COUNT.search(line)
        trips[body] = int(known.group(1)) if known else _condition_bound(computations.get(condition, []))
    return trips
