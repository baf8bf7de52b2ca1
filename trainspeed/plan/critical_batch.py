"""A critical-batch study as a plan's input, in place of a time-to-target study: its folder (or its
rows file) holds `critical-batch` rows, one per point of the base run, each with the base run's
`samples` there and the `critical_batch` its branches measured (`critical_at_least` where every
batch tried still matched). The plan reads those points and the settings row's base run; the
study's branch runs are not the plan's runs (they start from checkpoints, not from the start), so
the folder is never read as a folder of runs.

The rows are read as records by their fields, so a plan reads a study's rows whatever else its
rows carry; a point without a number (a factor-1 branch that diverged) measured nothing and is
passed over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from trainspeed.errors import UsageError
from trainspeed.rows import KIND, Source, read_records

ROWS_FILE = "critical_batch.jsonl"
"""Where a critical-batch study writes its rows in its folder."""
POINT_KIND = "critical-batch"
SETTINGS_KIND = "critical-batch-study-config"
PREFIX = "critical-batch"
"""Every row kind of the study starts so (its settings, its branches, its points)."""


@dataclass(frozen=True)
class CriticalBatchPoint:
    """The critical batch measured at one point of the base run: branches from its checkpoint at
    `samples` continued at larger batches, and the largest whose goal metric stayed within the
    tolerance of the unchanged batch's is `critical_batch` (at least it, where every batch tried
    stayed within: `lower_bound`)."""

    samples: float
    critical_batch: float
    lower_bound: bool
    source: str


@dataclass(frozen=True)
class CriticalBatchStudy:
    """What a plan takes of a critical-batch study: its points, its base run and its workload."""

    source: str
    points: tuple[CriticalBatchPoint, ...]
    base_run: str | None
    workload: str | None
    workload_sha256: str | None
    size: str | None


def rows_file(path: Path) -> Path | None:
    """The study's rows file where `path` is a critical-batch study's folder or rows file, else None."""
    if path.is_dir():
        return path / ROWS_FILE if (path / ROWS_FILE).is_file() else None
    if path.is_file() and path.suffix in (".jsonl", ".json"):
        records = read_records(path)
        if records and isinstance(records[0][0], dict) and str(records[0][0].get(KIND, "")).startswith(PREFIX):
            return path
    return None


def _number(record: dict[str, Any], name: str, source: Source, optional: bool = False) -> float | None:
    value = record.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"plan: {source}: a critical-batch row whose {name} is {value!r}, not a number above 0 (the "
                         "file was edited or written by another program)")
    return float(value)


def read_critical_batch_study(path: Path) -> CriticalBatchStudy:
    """The points (samples, critical batch) of a study's rows, in the order of their samples; one
    line where the rows hold none with a number."""
    file = rows_file(path)
    assert file is not None
    points: list[CriticalBatchPoint] = []
    settings: dict[str, Any] = {}
    for record, source in read_records(file):
        kind = record.get(KIND) if isinstance(record, dict) else None
        if kind == SETTINGS_KIND and not settings:
            settings = record
        if kind != POINT_KIND:
            continue
        critical = _number(record, "critical_batch", source, optional=True)
        if critical is None:
            continue
        samples = _number(record, "samples", source)
        assert samples is not None
        points.append(CriticalBatchPoint(samples, critical, record.get("critical_at_least") is True,
                                         f"critical-batch study {source}"))
    if not points:
        raise UsageError(f"plan: {path} holds no {POINT_KIND!r} rows with a critical batch (samples, critical_batch); "
                         "give the folder of a `trainspeed study critical-batch` whose branches measured one")
    base = settings.get("base_run")
    return CriticalBatchStudy(str(file), tuple(sorted(points, key=lambda point: point.samples)),
                              base if isinstance(base, str) else None, _text(settings, "workload"),
                              _text(settings, "workload_sha256"), _text(settings, "size"))


def _text(record: dict[str, Any], name: str) -> str | None:
    value = record.get(name)
    return value if isinstance(value, str) else None


def split_studies(paths: Sequence[Path]) -> tuple[list[Path], list[CriticalBatchStudy]]:
    """The inputs other than critical-batch studies, and those studies read; one study at most, and
    its base run added to the inputs where it is here and not given."""
    others: list[Path] = []
    studies: list[CriticalBatchStudy] = []
    for path in paths:
        if rows_file(path) is not None:
            studies.append(read_critical_batch_study(path))
        else:
            others.append(path)
    if len(studies) > 1:
        raise UsageError(f"plan: the inputs hold {len(studies)} critical-batch studies; give the rows of one (of the "
                         "base run the plan is made from)")
    given = {path.resolve() for path in others}
    for study in studies:
        if study.base_run and Path(study.base_run).is_dir() and Path(study.base_run).resolve() not in given:
            others.append(Path(study.base_run))
    return others, studies
