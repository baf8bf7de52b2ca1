"""`trainspeed study all`: every study of the study's findings, one after another, at one preset.

This package's face, read by the command line without torch (`trainspeed.studies.face`): one flag
of its own, `--only`, to run some of the studies; each runs at the preset's settings. The study
itself is `study.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from trainspeed.flags import comma_list, flag_field
from trainspeed.studies.face import Study

STUDY_NAMES = ("throughput", "remote", "scaling", "batch-size")
"""The studies it runs, in order (`study.STUDIES`, named here so that the flag reads without torch)."""


@dataclass(frozen=True)
class AllFlags:
    only: tuple[str, ...] | None = flag_field(
        None, read=comma_list(str, what="study names", example="throughput,scaling", choices=STUDY_NAMES),
        help="run only these studies, in the usual order", default_text="all of them")


def _runner() -> ModuleType:
    from trainspeed.studies.everything import study

    return study


STUDY = Study(name="all", doc=__doc__,
              help="every study above at one preset, one after another, with an estimate first and one progress bar",
              runner=_runner, config_type=AllFlags)
