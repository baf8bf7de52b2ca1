"""A study's face: what the command line, the report and `study all` read of a study without
importing it (nor torch, nor the commands it runs).

Each study's package declares one `Study` in its `__init__.py` (`STUDY`), and
`trainspeed.studies.STUDIES` lists them. Its flags are the fields of its config dataclass declared
with `flag_field` (`trainspeed.flags`), where each field's default and help are written once. A
flag is None unless given, and the preset the user picks fills in the rest (`settings`), so a
flag's help shows the default preset's value and, where they differ, the other presets'.
`runner()` imports the study itself (its study.py) and `report_part()` its part of the report,
each only when a study runs or its rows are read.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Mapping

from trainspeed.flags import DeclaredFlag, add_declared_flags, given_values, shown_value
from trainspeed.studies.common import DEFAULT_PRESET, PRESETS

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart


def preset_settings(config_type: type | None, presets: Mapping[str, Mapping[str, Any]],
                    args: argparse.Namespace) -> dict[str, Any]:
    """A config's settings at `--preset`, with the flags given over them, by field name. A study's
    runner reads them here from its own config and presets, never from its face, which imports it."""
    given = given_values(config_type, args) if config_type is not None else {}
    return {**presets.get(args.preset, {}), **given}


def no_report_part() -> None:
    """The report part of a study whose rows are another producer's (bench rows), or that writes
    none of its own (`study all`): the producer's part shows them."""
    return None


@dataclass(frozen=True)
class Study:
    """One study as the command line sees it: `trainspeed study NAME`."""

    name: str
    """Its command name."""
    help: str
    """Its line in `trainspeed study --help`."""
    doc: str
    """Its package's docstring; the first paragraph heads `trainspeed study NAME --help`."""
    runner: Callable[[], ModuleType]
    """Imports the study itself (`study.py`): `preset_config`, `config_from_args`, `units`,
    `estimate_s`, `rows_files`, `run`, optionally `plan_lines` (`trainspeed.studies`)."""
    config_type: type | None = None
    """Its settings, whose fields declared with `flag_field` are its flags (None: no flags)."""
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per preset, the settings that differ from the config's defaults."""
    report_part: Callable[[], ReportPart | None] = no_report_part
    """Imports the report's part for its rows (read only when a report or a plot reads them)."""

    @property
    def description(self) -> str:
        return self.doc.split("\n\n")[0]

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        """Its config's flags, each None unless given, with the presets' defaults in their help."""
        if self.config_type is not None:
            add_declared_flags(parser, self.config_type, self.default_text)

    def settings(self, args: argparse.Namespace) -> dict[str, Any]:
        """The config's settings at `--preset`, with the flags given over them, by field name."""
        return preset_settings(self.config_type, self.presets, args)

    def default_text(self, config_field: dataclasses.Field) -> str:
        """A flag's default in its help: the default preset's value, then the other presets' where
        they differ (`3; at --preset smoke 1, full 5`)."""
        flag: DeclaredFlag = config_field.metadata["flag"]
        if flag.default_text:
            base = flag.default_text.replace("%", "%%")
        elif config_field.default is not dataclasses.MISSING and config_field.default is not None:
            base = shown_value(config_field.default)
        else:
            base = ""
        by_preset = {preset: shown_value(self.presets[preset][config_field.name])
                     if config_field.name in self.presets.get(preset, {}) else base for preset in PRESETS}
        default = by_preset[DEFAULT_PRESET]
        others = [f"{preset} {value or '-'}" for preset, value in by_preset.items()
                  if preset != DEFAULT_PRESET and value != default]
        return default + (f"; at --preset {', '.join(others)}" if others else "")
