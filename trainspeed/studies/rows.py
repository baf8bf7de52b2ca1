"""The record of every `trainspeed study` run (OUT/studies.jsonl): what it was asked, its estimate
and its wall time, where it ran, and the files its rows went to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from trainspeed.machine import Machine
from trainspeed.rows import append_row


@dataclass(frozen=True)
class StudyRecord:
    """One study as `trainspeed study` ran it: what it was asked, how long it was expected to take
    and took, where it ran; the rows it measured are in the files it lists."""

    KIND: ClassVar[str] = "study"
    SCHEMA_VERSION: ClassVar[int] = 1

    study: str
    preset: str
    started: str
    wall_s: float
    estimate_s: float
    files: list[str]
    command: str
    machine: Machine


STUDIES_FILE = "studies.jsonl"


def record_study(out: Path, study: str, preset: str, started: str, wall_s: float, estimate_s: float,
                 files: list[Path], command: str, machine: Machine) -> StudyRecord:
    """Append the study's record to OUT/studies.jsonl."""
    record = StudyRecord(study=study, preset=preset, started=started, wall_s=wall_s, estimate_s=estimate_s,
                         files=[str(path) for path in files], command=command, machine=machine.at_end())
    append_row(out / STUDIES_FILE, record)
    return record
