"""Finding 1: one device's training throughput against the study's baseline, per batch size.

This package's face, read by the command line without torch (`trainspeed.studies.face`); the study
itself is `study.py`.
"""

from __future__ import annotations

from types import ModuleType

from trainspeed.studies.face import Study
from trainspeed.studies.throughput.config import PRESETS, ThroughputConfig


def _runner() -> ModuleType:
    from trainspeed.studies.throughput import study

    return study


STUDY = Study(name="throughput", doc=__doc__,
              help="finding 1: samples/s of each target over the baseline's per batch size (device- and host-fed)",
              runner=_runner, config_type=ThroughputConfig, presets=PRESETS)
