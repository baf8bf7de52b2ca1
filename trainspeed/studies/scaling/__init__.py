"""Finding 3: N ranks end to end, each reading its own data, against one; and the IO efficiency.

This package's face, read by the command line without torch (`trainspeed.studies.face`); the study
itself is `study.py`, its rows `rows.py` and their part of the report `report.py`.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from trainspeed.studies.face import Study
from trainspeed.studies.scaling.config import PRESETS, ScalingConfig

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart


def _runner() -> ModuleType:
    from trainspeed.studies.scaling import study

    return study


def _report_part() -> "ReportPart":
    from trainspeed.studies.scaling.report import PART

    return PART


STUDY = Study(name="scaling", doc=__doc__,
              help="finding 3: N ranks end to end with their own data loading against one rank; the IO efficiency",
              runner=_runner, config_type=ScalingConfig, presets=PRESETS, report_part=_report_part)
