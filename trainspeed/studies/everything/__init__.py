"""`trainspeed study all`: every study of the study's findings, one after another, at one preset.

This package's face, read by the command line without torch (`trainspeed.studies.face`): one flag
of its own, `--only`, to run some of the studies (`config.py`); each runs at the preset's settings.
The study itself is `study.py`.
"""

from __future__ import annotations

from types import ModuleType

from trainspeed.studies.everything.config import AllFlags
from trainspeed.studies.face import Study


def _runner() -> ModuleType:
    from trainspeed.studies.everything import study

    return study


STUDY = Study(name="all", doc=__doc__,
              help="every study above at one preset, one after another, with an estimate first and one progress bar",
              runner=_runner, config_type=AllFlags)
