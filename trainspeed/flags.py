"""Command-line flags generated from the config dataclasses, so every default lives in one place.

`add_flag(group, "--lr", LRConfig-path...)` reads the default, the type and the help's default
text from the dataclass field; `config_from_flags` builds the (nested) dataclass back from the
parsed namespace by field name. A flag's `dest` is the field's dotted path (`lr.base_lr`).

Bad flags are refused while parsing, in one line: `OneLineParser` turns argparse's usage block
into a UsageError, and every float flag is read by `finite_float`, so no command sees a nan or an
infinity (they pass every `x <= 0` check and then break the arithmetic that uses them). Range checks
that know what a value means stay with the config that holds it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from typing import Any, Callable, NoReturn, TypeVar

from trainspeed.errors import UsageError

Config = TypeVar("Config")

MAX_THREADS = 4096
"""More torch threads than any machine has hardware threads; torch would try to start them all,
and a number past 2^31 overflows its thread count."""


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors (an unknown flag, a value of the wrong type, a missing
    argument) are one UsageError line, as every other bad input is, instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def finite_float(text: str) -> float:
    """A float flag's value: a number, neither nan nor an infinity (`1e999` reads as infinity)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    """A count flag's value (games, workers, samples per file): a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def thread_count(text: str) -> int:
    """A `--threads` value: 1 to MAX_THREADS."""
    value = positive_int(text)
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"{text!r} is more than {MAX_THREADS} threads, more than any machine "
                                         "runs at once")
    return value


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
    for True); a float field is read by `finite_float` unless `type` says otherwise."""
    default = field_default(config_type, path)
    _, annotation = _field(config_type, path)
    scalar = _scalar_type(annotation)
    if scalar is bool:
        group.add_argument(flag, dest=path, default=default, action="store_false" if default else "store_true", help=help, **kwargs)
        return
    shown = "" if default is None else f" (default: {_shown(default)})"
    converter = type or (finite_float if scalar is float else scalar)
    group.add_argument(flag, dest=path, default=default, type=converter, help=help + shown, **kwargs)


def flag_adder(group: argparse._ActionsContainer, config_type: type) -> Callable[..., None]:
    """`add_flag` bound to one parser and one config: `flag("--games", "games", "help")`."""
    def flag(name: str, path: str, help: str, **kwargs: Any) -> None:
        add_flag(group, name, config_type, path, help, **kwargs)
    return flag


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
