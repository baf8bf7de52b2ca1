"""The `--size` of a model built from a library: a preset, then `key=value` overrides.

`--size tiny`, `--size base,res=128`, `--size tiny,n_layer=4,seq=256` and `--size res=96` (the
default preset, changed) are all sizes. Every command resolves the size through
`trainspeed.workloads.resolve_size`, which hands it to the workload's `normalize_size`: keys are
checked against what the model takes, values parsed, and the result written back in one canonical
form (the preset, then the overrides sorted by key, each value as parsed), so `tiny,res=64` and
`res=64` are one size in every row, study and plan, and a typo is one line before anything runs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Mapping

from trainspeed.errors import UsageError

SizeValue = int | float | bool | str
SHOWN_CHARACTERS = 80
"""The most of a user's text an error line echoes (a 10 kB key would make a 10 kB line)."""


def shown(text: str) -> str:
    """A user's text as an error line echoes it: quoted, escaped, and cut to SHOWN_CHARACTERS."""
    if len(text) <= SHOWN_CHARACTERS:
        return repr(text)
    return f"{text[:SHOWN_CHARACTERS]!r}... ({len(text):,} characters)"


def clipped(text: str) -> str:
    """`shown` without the quotes (a `--workload NAME` an error line starts with)."""
    cut = text[:SHOWN_CHARACTERS]
    escaped = "".join(char if char.isprintable() else repr(char)[1:-1] for char in cut)
    return escaped if len(text) <= SHOWN_CHARACTERS else f"{escaped}... ({len(text):,} characters)"


@dataclass(frozen=True)
class NamedSize:
    preset: str
    overrides: tuple[tuple[str, SizeValue], ...]
    """Sorted by key; each key at most once."""

    @property
    def text(self) -> str:
        """The canonical `--size` string (what rows record)."""
        return ",".join([self.preset, *(f"{key}={format_value(value)}" for key, value in self.overrides)])

    def settings(self, presets: Mapping[str, Mapping[str, SizeValue]]) -> dict[str, SizeValue]:
        """The preset's settings with the overrides applied."""
        return {**presets[self.preset], **dict(self.overrides)}


def format_value(value: SizeValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_value(text: str) -> SizeValue:
    """An int, a float, true/false, or else the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def closest(name: str, choices: Iterable[str], count: int = 3) -> str:
    """`; closest: a, b, c` for a message, or nothing when no choice is close."""
    matches = difflib.get_close_matches(name, list(choices), n=count, cutoff=0.6)
    return f"; closest: {', '.join(matches)}" if matches else ""


def parse_size(size: str, presets: Iterable[str], default_preset: str, workload: str) -> NamedSize:
    """`preset[,key=value...]` or `key=value[,...]` (the default preset); UsageError otherwise."""
    presets = tuple(presets)
    parts = [part.strip() for part in size.split(",")]
    if any(not part for part in parts):
        raise UsageError(f"--size {shown(size)}: an empty part between commas; write PRESET,key=value,... "
                         f"(presets of {workload}: {', '.join(presets)})")
    preset = default_preset
    if "=" not in parts[0]:
        preset, parts = parts[0], parts[1:]
        if preset not in presets:
            raise UsageError(f"--size {shown(size)}: {shown(preset)} is not a preset of {workload}: choose one of "
                             f"{', '.join(presets)}, optionally followed by ,key=value overrides")
    overrides: dict[str, SizeValue] = {}
    for part in parts:
        key, equals, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key or not value:
            raise UsageError(f"--size {shown(size)}: {shown(part)} is not key=value (after the preset, every part is one)")
        if key in overrides:
            raise UsageError(f"--size {shown(size)}: {shown(key)} is given twice")
        overrides[key] = parse_value(value)
    return NamedSize(preset, tuple(sorted(overrides.items())))


def require_positive_int(size: str, key: str, value: SizeValue, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"--size {shown(size)}: {key} must be an integer of at least {minimum}, "
                         f"not {shown(format_value(value))}")
    return value


def require_choice(size: str, key: str, value: SizeValue, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UsageError(f"--size {shown(size)}: {key} must be one of {', '.join(choices)}, "
                         f"not {shown(format_value(value))}")
    return str(value)
