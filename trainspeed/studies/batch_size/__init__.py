"""Finding 4: does a larger global batch train a stronger Mahjong policy? The batch-size study.

This package's face, read by the command line without torch (`trainspeed.studies.face`); the study
itself is `study.py`, its settings `config.py`, its rows `rows.py` and their part of the report
`report.py`.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from trainspeed.studies.batch_size.config import PRESETS, BatchSizeConfig
from trainspeed.studies.face import Study

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart


def _runner() -> ModuleType:
    from trainspeed.studies.batch_size import study

    return study


def _report_part() -> "ReportPart":
    from trainspeed.studies.batch_size.report import PART

    return PART


STUDY = Study(name="batch-size", doc=__doc__,
              help=("finding 4: does a larger global batch train a stronger policy (power first, LR tuned per batch, "
                    "equal samples, steps and wall time, head to head)"),
              runner=_runner, config_type=BatchSizeConfig, presets=PRESETS, report_part=_report_part)
