"""`trainspeed study all`: every study of the study's findings, one after another, at one preset.

This package's face, read by the command line without torch: its name and its flags; `runner()`
is the study itself (`study.py`).
"""

from __future__ import annotations

import argparse
from types import ModuleType

NAME = "all"
HELP = "every study above at one preset, one after another, with an estimate first and one progress bar"


def report_part() -> None:
    """It writes no rows of its own: each study it runs has its part of the report."""
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No flags of its own: each study runs at the preset's settings."""


def runner() -> ModuleType:
    from trainspeed.studies.everything import study

    return study
