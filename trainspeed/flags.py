"""Command-line flags generated from the config dataclasses, so every default lives in one place.

`add_flag(group, "--lr", LRConfig-path...)` reads the default, the type and the help's default
text from the dataclass field; `config_from_flags` builds the (nested) dataclass back from the
parsed namespace by field name. A flag's `dest` is the field's dotted path (`lr.base_lr`).

Bad flags are refused while parsing, in one line: `OneLineParser` turns argparse's usage block
into a UsageError, and every number flag has a range checked there (`Range`): a float is finite
(nan and the infinities pass every `x <= 0` check and then break the arithmetic that uses them),
a whole number fits the C int it is handed down as, and a count of threads or processes is at most
this machine's CPUs. A config field declares its range beside its default (`ranged`); checks that
relate several values stay with the config that holds them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, TypeVar

from trainspeed.errors import UsageError

Config = TypeVar("Config")

INT_FLAG_MAX = 2**31 - 1
"""The largest whole number any flag takes unless its field says otherwise: what torch, numpy
and the OS take as a C int (a larger one overflows on its way down)."""
MAX_BATCH_POWER = 40
MAX_BATCH_SIZE = 2**MAX_BATCH_POWER
"""The largest batch a sweep or a run accepts. Even at one byte per sample, 2^40 samples are a TiB
of input before the first activation, more than any device holds; a larger number is a typo, and
one past 2^63 does not even fit the integers torch sizes tensors with."""
WORKLOAD_HELP = ("mahjong, stylegan3, a library model (timm:NAME, torchvision:NAME, hf:MODEL_TYPE), "
                 "or package.module:factory")
"""What every command's --workload takes: one text, so no command forgets a kind of workload."""
MAX_TIMEOUT_S = (2**31 - 1) // 1000
"""The longest timeout a flag takes, about 24.8 days: gRPC counts its timeouts in milliseconds as
a C int, and one rule for every timeout is easier to know than one per library."""


def machine_cpus() -> int:
    """The CPUs (hardware threads) of this machine: the most threads or processes a flag may ask
    for; more only make the kernel switch between them (and 100,000 threads stall the machine)."""
    return os.cpu_count() or 1


def machine_memory_gib() -> float:
    """This machine's physical memory in GiB: the most memory a flag may budget."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30


@dataclass(frozen=True)
class Range:
    """The values a numeric flag takes, checked where it is parsed (`add_flag` reads it from a
    config field's metadata, `ranged`). `high` may be a function of the machine (its CPU count);
    `why_high` says in the error line where the bound comes from."""

    low: float
    high: float | Callable[[], float]
    low_open: bool = False
    """True: `low` itself is refused (a timeout above 0 s)."""
    why_high: str = ""

    @property
    def top(self) -> float:
        return self.high() if callable(self.high) else self.high

    def check(self, text: str, value: float) -> None:
        if value < self.low or (self.low_open and value == self.low):
            low = _plain(self.low)
            raise argparse.ArgumentTypeError(f"{text!r} must be above {low}" if self.low_open
                                             else f"{text!r} must be at least {low}")
        if value > self.top:
            raise argparse.ArgumentTypeError(f"{text!r} is more than {_plain(self.top)}{self.why_high}")

    def parser(self, scalar: type) -> Callable[[str], Any]:
        """The argparse type of a flag of this range: whole numbers for int, finite floats for float."""
        def parse(text: str) -> Any:
            value = _whole_number(text) if scalar is int else finite_float(text)
            self.check(text, value)
            return value
        parse.__name__ = "int" if scalar is int else "float"
        return parse


def _plain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


DEFAULT_INT_RANGE = Range(0, INT_FLAG_MAX, why_high=" (flags take whole numbers up to 2^31-1)")
THREADS = Range(1, machine_cpus, why_high=" threads, more than this machine's CPUs")
PROCESSES = Range(1, machine_cpus, why_high=" processes, more than this machine's CPUs")
TIMEOUT = Range(0, MAX_TIMEOUT_S, low_open=True, why_high=" s (about 24.8 days, the longest timeout a flag takes: "
                "gRPC counts its timeouts in milliseconds in a C int)")


def ranged(default: Any, low: float, high: float | Callable[[], float], *, low_open: bool = False,
           why_high: str = "") -> Any:
    """A dataclass field with its default and the range its flag accepts."""
    return dataclasses.field(default=default, metadata={"range": Range(low, high, low_open, why_high)})


def ranged_as(default: Any, value_range: Range) -> Any:
    """A dataclass field of a named range (`THREADS`, `TIMEOUT` ...)."""
    return dataclasses.field(default=default, metadata={"range": value_range})


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


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """A count flag's value (games, samples per file): a whole number from 1 to 2^31-1."""
    value = _whole_number(text)
    Range(1, INT_FLAG_MAX, why_high=DEFAULT_INT_RANGE.why_high).check(text, value)
    return value


def thread_count(text: str) -> int:
    """A `--threads` value: 1 to this machine's CPU count."""
    return THREADS.parser(int)(text)


def process_count(text: str) -> int:
    """A flag that starts processes (`--workers`, `--num-workers`, `--nproc`): 1 to this machine's CPUs."""
    return PROCESSES.parser(int)(text)


def seed_value(text: str) -> int:
    """A `--seed`: a whole number from 0 to 2^31-1 (numpy refuses negative seeds)."""
    return DEFAULT_INT_RANGE.parser(int)(text)


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
    for True); a number field is read within the range in its metadata (`ranged`), an int field
    without one as a whole number from 0 to 2^31-1, unless `type` says otherwise."""
    default = field_default(config_type, path)
    field, annotation = _field(config_type, path)
    scalar = _scalar_type(annotation)
    if scalar is bool:
        group.add_argument(flag, dest=path, default=default, action="store_false" if default else "store_true", help=help, **kwargs)
        return
    shown = "" if default is None else f" (default: {_shown(default)})"
    converter = type or _converter(scalar, field.metadata.get("range"))
    group.add_argument(flag, dest=path, default=default, type=converter, help=help + shown, **kwargs)


def _converter(scalar: Any, value_range: Range | None) -> Callable[[str], Any]:
    """How a field's flag parses its text: numbers within their range (the field's, or every whole
    number flag's default), any other type by its own constructor."""
    if scalar is int:
        return (value_range or DEFAULT_INT_RANGE).parser(int)
    if scalar is float:
        return value_range.parser(float) if value_range is not None else finite_float
    return scalar


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


@dataclass(frozen=True)
class Flag:
    """One row of a config's flag table: the flag, the field it sets (a dotted path), its help and
    argparse's extras (`choices`, a `type` of its own). One table is both what a command's parser
    adds (`add_flags`) and what a config is written back into (`config_argv`), so the two never differ."""

    name: str
    path: str
    help: str
    always: bool = False
    """`config_argv` writes it even at its default: a command that leaves it out would not say what
    it runs, or where (the workload, the target)."""
    extras: tuple[tuple[str, Any], ...] = ()


def flag(name: str, path: str, help: str, *, always: bool = False, **extras: Any) -> Flag:
    """A `Flag` row: `flag("--rdzv-backend", "launch.rdzv_backend", "how nodes meet", choices=...)`."""
    return Flag(name, path, help, always, tuple(extras.items()))


@dataclass(frozen=True)
class FlagGroup:
    """Flags shown together under a title in `--help`."""

    title: str
    flags: tuple[Flag, ...]


def add_flags(parser: argparse.ArgumentParser, config_type: type, groups: tuple[FlagGroup, ...]) -> None:
    """Add every flag of the table to `parser`, group by group (`add_flag` for each)."""
    for group in groups:
        container = parser.add_argument_group(group.title)
        for row in group.flags:
            add_flag(container, row.name, config_type, row.path, row.help, **dict(row.extras))


def config_argv(config: Any, groups: tuple[FlagGroup, ...]) -> list[str]:
    """The flags that give back `config` when parsed by a parser `add_flags` built from the same
    table: each field that differs from its default (and each `always` one), in table order.

    Only values other than the defaults are written: a switch can only state the value that is not
    its default, a field whose default is None has no flag for None, and a command of a few flags
    shows what a run changed. A value no flag can state (None where the default is not) is a
    ValueError: no command line makes such a config, and neither does one where a field that has
    no flag in the table differs from its default (the command would silently drop it)."""
    rows = [row for group in groups for row in group.flags]
    flagged = {row.path for row in rows}
    for path in _leaf_paths(type(config)):
        if path not in flagged and _value_at(config, path) != field_default(type(config), path):
            raise ValueError(f"{type(config).__name__}.{path} has no flag, and only its default goes without one")
    return [text for row in rows for text in _flag_argv(row, config)]


def _leaf_paths(config_type: type, prefix: str = "") -> list[str]:
    """The dotted path of every field that is not itself a dataclass (those of nested ones included)."""
    hints = typing.get_type_hints(config_type)
    paths: list[str] = []
    for field in dataclasses.fields(config_type):
        annotation = hints[field.name]
        if dataclasses.is_dataclass(annotation):
            paths += _leaf_paths(annotation, prefix + field.name + ".")
        else:
            paths.append(prefix + field.name)
    return paths


def _value_at(config: Any, path: str) -> Any:
    value = config
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _flag_argv(row: Flag, config: Any) -> list[str]:
    value = _value_at(config, row.path)
    default = field_default(type(config), row.path)
    if _scalar_type(_field(type(config), row.path)[1]) is bool:
        return [row.name] if value != default else []  # a switch flips its default
    if value == default and not (row.always and value is not None):
        return []
    if value is None:
        raise ValueError(f"{type(config).__name__}.{row.path} is None, which {row.name} cannot say "
                         f"(its default is {default!r})")
    text = flag_text(value)
    return [f"{row.name}={text}"] if text.startswith("-") else [row.name, text]  # `--x -1` reads -1 as a flag


def flag_text(value: Any) -> str:
    """A value as its flag takes it: a float as `:g` writes it where that reads back as the same
    float (`0.001`, `1`, `1e-05`), else in the fewest digits that do; a list comma-separated;
    anything else as str() writes it."""
    if isinstance(value, (list, tuple)):
        return ",".join(flag_text(item) for item in value)
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)
