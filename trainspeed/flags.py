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

A flag that takes a list takes it separated by commas, read by one type (`CommaList`, made with
`comma_list`): each item by the item's own reader, an empty list refused, and every such flag's error
in one shape, `--flag 'text': give WHAT separated by commas, e.g. EXAMPLE; WHY`.

A config may declare its flags on its fields (`flag_field`: the help, and where they differ from
the field's, the flag's name and reader), so that its defaults and help are written once, beside the
fields; `add_declared_flags` adds them all, each None unless given (`given_values`), for a command
whose defaults come from elsewhere too (a study's presets).
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

    def holds(self, value: float) -> bool:
        """Whether `value` lies in the range (NaN does not): what a config built from Python, never
        parsed, checks."""
        above_low = self.low < value if self.low_open else self.low <= value
        return above_low and value <= self.top

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
POSITIVE = Range(1, INT_FLAG_MAX, why_high=DEFAULT_INT_RANGE.why_high)
"""A count (games, samples, steps): a whole number from 1 to 2^31-1."""
THREADS = Range(1, machine_cpus, why_high=" threads, more than this machine's CPUs")
PROCESSES = Range(1, machine_cpus, why_high=" processes, more than this machine's CPUs")
WORKERS = Range(0, machine_cpus, why_high=PROCESSES.why_high)
MAX_LOCAL_DEVICES = 4096
DEVICES_OR_PROCESSES = Range(1, MAX_LOCAL_DEVICES, why_high=" devices per node (a host with more has never been built)")
"""`train --nproc`: processes per node (at most the CPUs, checked once the target is known) or, for
a target that drives every local device from one process (xla:*, jax:*), devices."""
"""Loader workers: 0 (load in the training process) up to this machine's CPUs."""
WINDOW_S = Range(0, 3600, low_open=True, why_high=" s")
"""A timed window's least length in seconds (the bench's `--min-window-s`, and the studies' flag for their bench)."""
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
        digits = text.strip().lstrip("+-")
        if digits.isdigit():  # more digits than Python converts (4,300): larger than any flag takes
            raise argparse.ArgumentTypeError(f"{text[:20]!r}... ({len(digits)} digits) is larger than any whole "
                                             "number a flag takes") from None
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """A count flag's value (games, samples per file): a whole number from 1 to 2^31-1."""
    return POSITIVE.parser(int)(text)


def thread_count(text: str) -> int:
    """A `--threads` value: 1 to this machine's CPU count."""
    return THREADS.parser(int)(text)


def process_count(text: str) -> int:
    """A flag that starts processes (`--workers`, `--num-workers`, `--nproc`): 1 to this machine's CPUs."""
    return PROCESSES.parser(int)(text)


def seed_value(text: str) -> int:
    """A `--seed`: a whole number from 0 to 2^31-1 (numpy refuses negative seeds)."""
    return DEFAULT_INT_RANGE.parser(int)(text)


@dataclass(frozen=True)
class CommaList:
    """The type of a flag that takes a list separated by commas (`--batches 256,1024`), read into
    a tuple: every item by `item`, empty items skipped (`64,256,` is 64 and 256), no item at all
    refused. `whole`, where given, is a grammar of the whole text tried first (a range of powers of
    two, `2^6..2^14`), returning None for a text it does not hold.

    Every list flag says what is wrong in one shape, `--flag 'text': give WHAT separated by commas,
    e.g. EXAMPLE`, then `; ` and the item's own complaint where one item is the trouble;
    `add_flag` and `add_declared_flags` read it with `CommaListAction`, which names the flag."""

    item: Callable[[str], Any]
    """Reads one item; raises argparse.ArgumentTypeError saying why it is not one (or ValueError)."""
    what: str
    """The items in words: "positive integers up to 2^31-1"."""
    example: str
    whole: Callable[[str], tuple[Any, ...] | None] | None = None
    distinct: bool = False
    """An item named twice is refused (a feed would run twice)."""
    sort: bool = False
    """The items sorted and each kept once (batch sizes)."""

    def __call__(self, text: str) -> tuple[Any, ...]:
        try:
            return self._items(text)
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(self.advice(str(error))) from None
        except ValueError:
            raise argparse.ArgumentTypeError(self.advice()) from None

    def advice(self, why: str = "") -> str:
        """How to write the list, and why this one is not (the part after `--flag 'text': `)."""
        return f"give {self.what} separated by commas, e.g. {self.example}" + (f"; {why}" if why else "")

    def _items(self, text: str) -> tuple[Any, ...]:
        whole = self.whole(text) if self.whole is not None else None
        if whole is not None:
            return whole
        items = tuple(self.item(part.strip()) for part in text.split(",") if part.strip())
        if not items:
            raise ValueError("no item")
        if self.sort:
            return tuple(sorted(set(items)))
        if self.distinct:
            twice = next((item for index, item in enumerate(items) if item in items[:index]), None)
            if twice is not None:
                raise argparse.ArgumentTypeError(f"{twice!r} is named twice")
        return items


def comma_list(scalar: type = str, value_range: Range | None = None, *, what: str, example: str,
               choices: tuple[str, ...] = (), **options: Any) -> CommaList:
    """A `CommaList` of `scalar` items: whole numbers or finite floats within `value_range` (every
    whole number flag's range where none is given), or texts, one of `choices` where given."""
    if choices:
        def item(text: str) -> str:
            if text not in choices:
                raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(choices)}")
            return text
        return CommaList(item, what, example, **options)
    return CommaList(_converter(scalar, value_range), what, example, **options)


class CommaListAction(argparse.Action):
    """Reads a `CommaList` flag into its field's kind of sequence (a tuple, or a list where the
    field is one); a bad list is one line that names the flag and the text it was given."""

    def __init__(self, option_strings: list[str], dest: str, items: CommaList, sequence: type = tuple,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.items = items
        self.sequence = sequence

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        text = str(values)
        try:
            items = self.items(text)
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentError(None, f"{self.option_strings[0]} {text!r}: {error}") from None
        setattr(namespace, self.dest, self.sequence(items))


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
    if isinstance(converter, CommaList):
        sequence = list if typing.get_origin(annotation) is list else tuple
        group.add_argument(flag, dest=path, default=default, action=CommaListAction, items=converter,
                           sequence=sequence, help=help + shown, **kwargs)
        return
    group.add_argument(flag, dest=path, default=default, type=converter, help=help + shown, **kwargs)


def _converter(scalar: Any, value_range: Range | None) -> Callable[[str], Any]:
    """How a field's flag parses its text: numbers within their range (the field's, or every whole
    number flag's default), any other type by its own constructor."""
    if scalar is int:
        return (value_range or DEFAULT_INT_RANGE).parser(int)
    if scalar is float:
        return value_range.parser(float) if value_range is not None else finite_float
    return scalar


POSITIVE_INTS = comma_list(int, POSITIVE, what="positive integers up to 2^31-1", example="256,1024")
NON_NEGATIVE_INTS = comma_list(int, DEFAULT_INT_RANGE, what="integers from 0 to 2^31-1", example="0,1")


def flag_adder(group: argparse._ActionsContainer, config_type: type) -> Callable[..., None]:
    """`add_flag` bound to one parser and one config: `flag("--games", "games", "help")`."""
    def flag(name: str, path: str, help: str, **kwargs: Any) -> None:
        add_flag(group, name, config_type, path, help, **kwargs)
    return flag


def _shown(default: Any) -> str:
    if isinstance(default, (list, tuple)):
        return ",".join(str(item) for item in default)
    return str(default).replace("%", "%%")


def shown_value(value: Any) -> str:
    """A default as a flag's help shows it: a list as its flag takes it (`256,1024`), `%` escaped
    for argparse."""
    return _shown(value)


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


@dataclass(frozen=True)
class DeclaredFlag:
    """A config field's flag, declared on the field (`flag_field`): its help and, where they differ
    from the field's, its name and how its text is read."""

    help: str
    name: str = ""
    """The flag, where it is not --FIELD-NAME (`--feed` for the field `feeds`)."""
    read: Callable[[str], Any] | None = None
    """Reads its text (a `CommaList` for a list); None: by the field's type and range."""
    default_text: str = ""
    """The default in words, where the field's value does not say it (`OUT/scaling_data` for "")."""


def flag_field(default: Any = dataclasses.MISSING, *, help: str, name: str = "", read: Callable[[str], Any] | None = None,
               value_range: Range | None = None, default_text: str = "") -> Any:
    """A dataclass field that is also a flag: its default (none: a field the caller always gives),
    its help, and the range its number takes (`ranged`)."""
    metadata: dict[str, Any] = {"flag": DeclaredFlag(help, name, read, default_text)}
    if value_range is not None:
        metadata["range"] = value_range
    return dataclasses.field(default=default, metadata=metadata)


def declared_flags(config_type: type) -> list[dataclasses.Field]:
    """The fields of `config_type` declared as flags (`flag_field`), in the fields' order."""
    return [field for field in dataclasses.fields(config_type) if "flag" in field.metadata]


def add_declared_flags(group: argparse._ActionsContainer, config_type: type,
                       default_text: Callable[[dataclasses.Field], str]) -> None:
    """A flag for every field of `config_type` declared with `flag_field`. Each is None unless
    given: the caller fills in the rest (a study from its preset), so the help shows the default
    the caller says, `default_text(field)`."""
    hints = typing.get_type_hints(config_type)
    for field in declared_flags(config_type):
        flag: DeclaredFlag = field.metadata["flag"]
        name = flag.name or "--" + field.name.replace("_", "-")
        shown = default_text(field)
        help = flag.help + (f" (default: {shown})" if shown else "")
        scalar = _scalar_type(hints[field.name])
        if flag.read is None and scalar not in (int, float, str):
            raise TypeError(f"{config_type.__name__}.{field.name}: a {scalar} flag needs `read`")
        read = flag.read or _converter(scalar, field.metadata.get("range"))
        shape = dict(dest=field.name, default=None, metavar=name.lstrip("-").replace("-", "_").upper(), help=help)
        if isinstance(read, CommaList):
            group.add_argument(name, action=CommaListAction, items=read, **shape)
        else:
            group.add_argument(name, type=read, **shape)


def given_values(config_type: type, args: argparse.Namespace) -> dict[str, Any]:
    """The values of the declared flags of `config_type` that were given, by field name."""
    return {field.name: getattr(args, field.name) for field in declared_flags(config_type)
            if getattr(args, field.name, None) is not None}
