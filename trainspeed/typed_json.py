"""JSON read into typed dataclasses by one rule: every key known, every value of its field's type.

dacite checks types with `isinstance`, and in Python a bool is an int: `"step": true` would read as
step 1, and `"seed": false` as seed 0. Here a JSON true or false where a number belongs is refused
like any other value of the wrong type, and dacite's error names the field. A whole number where a
float belongs is read as that float (JSON writes 3.0 as 3 in some writers).
"""

from __future__ import annotations

from typing import Any, TypeVar

import dacite

T = TypeVar("T")


class _JSONBool:
    """A JSON true or false found where a number belongs: no int, so dacite's type check refuses it
    and names the field ("of type bool")."""

    def __init__(self, value: bool) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


_JSONBool.__name__ = _JSONBool.__qualname__ = "bool"


def _number(value: Any) -> Any:
    return _JSONBool(value) if isinstance(value, bool) else value


def _float(value: Any) -> Any:
    if isinstance(value, bool):
        return _JSONBool(value)
    return float(value) if isinstance(value, int) else value


STRICT = dacite.Config(strict=True, check_types=True, type_hooks={int: _number, float: _float})


def typed(cls: type[T], raw: Any) -> T:
    """`raw` (parsed JSON) as `cls`; dacite.DaciteError (or TypeError, ValueError from a field's
    own construction) naming the first field that does not fit."""
    if not isinstance(raw, dict):
        raise TypeError(f"a JSON {type(raw).__name__}, not an object of named fields")
    return dacite.from_dict(cls, raw, config=STRICT)


def first_line(error: BaseException) -> str:
    """A typing error's first line, cut short: what an error line quotes of it."""
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:200]
