"""Steps and samples to a quality goal against the global batch: the time-to-target study.

This package's face, read by the command line without torch (`trainspeed.studies.face`); the study
itself is `study.py`, its settings `config.py`, its rows `rows.py` and their part of the report
`report.py`.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from trainspeed.studies.face import Study
from trainspeed.studies.time_to_target.config import PRESETS, TimeToTargetConfig

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart


def _runner() -> ModuleType:
    from trainspeed.studies.time_to_target import study

    return study


def _report_part() -> "ReportPart":
    from trainspeed.studies.time_to_target.report import PART

    return PART


STUDY = Study(name="time-to-target", doc=__doc__,
              help=("steps and samples to a validation goal against the global batch (LR tuned per batch, extended "
                    "past edges), fitted with S(B) = S_min (1 + B_crit / B), beside the noise scale"),
              runner=_runner, config_type=TimeToTargetConfig, presets=PRESETS, report_part=_report_part)
