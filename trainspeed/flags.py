"""Command-line flags generated from the config dataclasses, so every default lives in one place.

`add_flag(group, "--lr", LRConfig-path...)` reads the default, the type and the help's default
text from the dataclass field; `config_from_flags` builds the (nested) dataclass back from the
parsed namespace by field name. A flag's `dest` is the field's dotted path (`lr.base_lr`).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any, Callable, TypeVar

Config = TypeVar("Config")


def _field(config_type: type, path: str) -> tuple[dataclasses.Field, Any]:
    """The dataclass field at a dotted path, and its resolved type annotation."""
    owner = config_type
    *parents, name = path.split(".")
    for parent in parents:
        owner = typing.get_type_hints(owner)[parent]
    field = {f.name: f for f in dataclasses.fields(owner)}[name]
    return field, typing.get_type_hints(owner)[name]


def field_default(config_type: type, path: str) -> Any:
    field, _ = _field(config_type, path)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    raise TypeError(f"{config_type.__name__}.{path} has no default")


def _scalar_type(annotation: Any) -> Any:
    """`int | None` -> int; other annotations unchanged."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0] if len(members) == 1 else str
    return annotation


def add_flag(
    group: argparse._ActionsContainer,
    flag: str,
    config_type: type,
    path: str,
    help: str,
    *,
    type: Callable[[str], Any] | None = None,
    **kwargs: Any,
) -> None:
    """Add `flag` for the field at `path` of `config_type` (default, type and dest from the field).

    A bool field becomes a switch that flips its default (`--resume` for False, `--no-progress`
    for True)."""
    default = field_default(config_type, path)
    _, annotation = _field(config_type, path)
    scalar = _scalar_type(annotation)
    if scalar is bool:
        group.add_argument(flag, dest=path, default=default, action="store_false" if default else "store_true", help=help, **kwargs)
        return
    shown = "" if default is None else f" (default: {_shown(default)})"
    group.add_argument(flag, dest=path, default=default, type=type or scalar, help=help + shown, **kwargs)


def _shown(default: Any) -> str:
    if isinstance(default, (list, tuple)):
        return ",".join(str(item) for item in default)
    return str(default).replace("%", "%%")


def config_from_flags(config_type: type[Config], args: argparse.Namespace, prefix: str = "") -> Config:
    """Build `config_type` from the namespace: fields with a flag take its value, nested dataclass
    fields are built the same way, other fields keep their defaults."""
    hints = typing.get_type_hints(config_type)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(config_type):
        path = prefix + field.name
        annotation = hints[field.name]
        if dataclasses.is_dataclass(annotation):
            values[field.name] = config_from_flags(annotation, args, prefix=path + ".")
        elif hasattr(args, path):
            values[field.name] = getattr(args, path)
    return config_type(**values)
