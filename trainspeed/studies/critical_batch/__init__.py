"""The critical batch along one run, measured by branching it from the run's own checkpoints.

This package's face, read by the command line without torch (`trainspeed.studies.face`); the study
itself is `study.py`, its settings `config.py`, the rule that decides a point's critical batch
`decision.py`, its rows `rows.py` and their part of the report `report.py`.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from trainspeed.studies.critical_batch.config import PRESETS, CriticalBatchConfig
from trainspeed.studies.face import Study

if TYPE_CHECKING:
    from trainspeed.report.part import ReportPart


def _runner() -> ModuleType:
    from trainspeed.studies.critical_batch import study

    return study


def _report_part() -> "ReportPart":
    from trainspeed.studies.critical_batch.report import PART

    return PART


STUDY = Study(name="critical-batch", doc=__doc__,
              help=("the critical batch along one run (--from RUN_DIR): branches from its checkpoints at larger "
                    "batches, the LR by its rule, the largest batch that still matches the base batch, beside B_simple"),
              runner=_runner, config_type=CriticalBatchConfig, presets=PRESETS, report_part=_report_part)
