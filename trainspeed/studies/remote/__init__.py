"""Finding 2: the same training step run in this process and behind `trainspeed serve` over a link.

This package's face, read by the command line without torch (`trainspeed.studies.face`); the study
itself is `study.py`.
"""

from __future__ import annotations

from types import ModuleType

from trainspeed.studies.face import Study
from trainspeed.studies.remote.config import PRESETS, RemoteConfig


def _runner() -> ModuleType:
    from trainspeed.studies.remote import study

    return study


STUDY = Study(name="remote", doc=__doc__,
              help="finding 2: local vs remote (trainspeed serve) over loopback and emulated links, per batch size",
              runner=_runner, config_type=RemoteConfig, presets=PRESETS)
