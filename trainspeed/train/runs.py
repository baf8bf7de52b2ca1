"""A run directory as read, in one place: its summary (`summary.json`) and every row of its
`metrics.jsonl`, each read by the dataclass of its kind.

Everything that reads a run reads it here: the report and its figures, the plan and its checks,
the studies, and a resume (the seconds a killed invocation logged, the steps of its rows). A row of
a kind no dataclass here describes, a field of the wrong type, a line that is not JSON: each is one
UsageError naming the file and the line. The kinds a metrics file holds are one table
(`METRICS_ROWS`): a new kind of row is one more class there, and `TrainRun.rows_of` hands its rows
to whoever reads them.

A resume reads the metrics file of a run that may have been killed mid-line, so its reading
(`metrics_lines`, `logged_seconds`) passes over a line that is not a whole row instead of refusing
the run: that line is the kill's, and the resume drops it.

The report, the plan and the studies import no torch, so this module imports none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from trainspeed.errors import UsageError
from trainspeed.gradients.rows import NoiseScaleRecord
from trainspeed.report.inputs import Read
from trainspeed.report.page import workload_label
from trainspeed.rows import Source, parse_row, read_records, record_kind
from trainspeed.train.rows import (
    CONFIG_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    BatchSwitchRecord,
    EvalRecord,
    RunSummary,
    TimeToTargetRecord,
    WindowRecord,
)
from trainspeed.user_files import read_regular
from trainspeed.user_json import JSONRefused, loads

RowT = TypeVar("RowT")

METRICS_ROWS: tuple[type, ...] = (WindowRecord, EvalRecord, NoiseScaleRecord, TimeToTargetRecord, BatchSwitchRecord,
                                  RunSummary)
"""Every kind of row a run's `metrics.jsonl` holds. A class reads its rows with its own `from_row`
where it has one (a validation's metrics are named by the workload), else with `parse_row`."""

METRICS_KINDS: dict[str, type] = {row_type.KIND: row_type for row_type in METRICS_ROWS}  # type: ignore[attr-defined]


def parse_metrics_row(record: Any, source: Source) -> Any:
    """One row of a metrics file as its kind's dataclass; UsageError naming `source` for a row of
    another kind or one that does not fit its dataclass."""
    kind, _ = record_kind(record, source)
    row_type = METRICS_KINDS.get(kind)
    if row_type is None:
        raise UsageError(f"{source}: a {kind!r} row is no metrics row ({', '.join(METRICS_KINDS)})")
    from_row: Callable[[Any, Source], Any] | None = getattr(row_type, "from_row", None)
    return from_row(record, source) if from_row is not None else parse_row(row_type, record, source)[0]


@dataclass(frozen=True)
class TrainRun(Read[RunSummary]):
    """One run as read: its summary, with the rows of its metrics.jsonl in the order logged (none
    for a summary file given on its own)."""

    metrics: tuple[Any, ...] = ()
    """Every row of its metrics file, each its kind's dataclass (`METRICS_ROWS`)."""
    files: tuple[Path, ...] = ()
    """The files read (the report lists them, so that its output is none of them)."""

    @property
    def summary(self) -> RunSummary:
        return self.row

    @property
    def command(self) -> str | None:
        return None

    @property
    def label(self) -> str:
        s = self.row
        data = " synthetic" if s.synthetic_data else ""
        return (f"{workload_label(s.workload, s.workload_sha256, s.size)}: {s.target} x{s.world_size}, "
                f"{s.batch_size_per_device}/device{data}")

    def rows_of(self, row_type: type[RowT]) -> list[RowT]:
        """The metrics rows of one kind, in the order logged."""
        return [row for row in self.metrics if type(row) is row_type]

    @property
    def train_curve(self) -> list[WindowRecord]:
        """A row per logged training window."""
        return self.rows_of(WindowRecord)

    @property
    def val_curve(self) -> list[EvalRecord]:
        """A row per validation."""
        return self.rows_of(EvalRecord)

    @property
    def noise_curve(self) -> list[NoiseScaleRecord]:
        """A row per logged window and network where the run measured its gradient noise scale."""
        return self.rows_of(NoiseScaleRecord)

    @property
    def batch_switches(self) -> list[BatchSwitchRecord]:
        """A row per switch of the run's batch schedule (none for a fixed batch)."""
        return self.rows_of(BatchSwitchRecord)

    def batch_curve(self) -> list[tuple[int, int]]:
        """(samples, global batch) from the run's first step through each switch to its last: the
        global batch against samples (one point at either end for a fixed batch)."""
        summary = self.row
        schedule = summary.batch_schedule
        start = schedule.start_global_batch if schedule is not None else summary.global_batch
        points = [(0, start)]
        for switch in self.batch_switches:
            points += [(switch.samples, switch.from_global_batch), (switch.samples, switch.to_global_batch)]
        end = max([points[-1][0]] + [row.samples for row in self.train_curve if row.samples is not None])
        return points + [(end, points[-1][1])]

    @property
    def time_to_target(self) -> TimeToTargetRecord | None:
        """The run's `--until` goal as its latest invocation recorded it (None: it had none)."""
        return self.row.time_to_target

    def validations(self, until_step: int | None = None) -> dict[int, EvalRecord]:
        """Each validation by its step (those at or before `until_step` where given); a step
        validated twice (by a resumed run) is its last row."""
        return {record.step: record for record in self.val_curve if until_step is None or record.step <= until_step}

    def noise_scale_at(self, step: int) -> NoiseScaleRecord | None:
        """The noise scale measured last at or before `step`, of the network first by name (a run
        may measure several); None where it measured none by then."""
        measured = [record for record in self.noise_curve if record.step <= step]
        if not measured:
            return None
        network = min(record.network for record in measured)
        return [record for record in measured if record.network == network][-1]


def has_summary(directory: Path) -> bool:
    """Whether a run wrote its summary in `directory` (it finished a step)."""
    return (directory / SUMMARY_FILE).is_file()


def is_run_directory(directory: Path) -> bool:
    """Whether `directory` holds a run, finished a step or not (its settings are written first)."""
    return has_summary(directory) or (directory / CONFIG_FILE).is_file()


def read_summary_file(path: Path) -> RunSummary:
    """A run's summary file (`summary.json`, or one given on its own); UsageError naming the file
    when it holds no run summary."""
    records = read_records(path)
    if len(records) != 1:
        raise UsageError(f"{path}: not a run summary (one JSON object)")
    summary, _ = parse_row(RunSummary, *records[0])
    return summary


def read_run_summary(directory: Path) -> RunSummary:
    """The summary of the run in `directory`, without its metrics rows; UsageError as `read_run`."""
    _check_started(directory)
    return read_summary_file(directory / SUMMARY_FILE)


def read_run(directory: Path) -> TrainRun:
    """The run in `directory`: its summary and every row of its metrics file (none where it logged
    none). UsageError in one line for a run that never finished a step, a missing or bad summary,
    and a bad metrics row (naming the file and the line)."""
    summary_path = directory / SUMMARY_FILE
    summary = read_run_summary(directory)
    metrics_path = directory / METRICS_FILE
    if not metrics_path.is_file():
        return TrainRun(summary, Source(str(summary_path)), files=(summary_path,))
    records = read_records(metrics_path)
    rows = tuple(parse_metrics_row(record, source) for record, source in records)
    _check_steps_logged_once(rows, [source for _, source in records])
    return TrainRun(summary, Source(str(summary_path)), metrics=rows, files=(summary_path, metrics_path))


def _check_steps_logged_once(rows: tuple[Any, ...], sources: list[Source]) -> None:
    """Each training window's row comes after the one before it: a step logged twice (a run
    started over on its own rows) would count its windows' seconds and samples twice."""
    last: tuple[int, Source] | None = None
    for row, source in zip(rows, sources):
        if not isinstance(row, WindowRecord):
            continue
        if last is not None and row.step <= last[0]:
            raise UsageError(f"{source}: a training window of step {row.step} after one of step {last[0]} ({last[1]}): "
                             "the run logged its steps twice (started over on its own rows); remove the rows of "
                             "the invocation it started over from, or train the run again")
        last = (row.step, source)


def _check_started(directory: Path) -> None:
    if not (directory / SUMMARY_FILE).exists() and (directory / CONFIG_FILE).is_file():
        raise UsageError(f"{directory}: a run directory without rows yet (its training wrote no {SUMMARY_FILE}: "
                         "it failed or was stopped before it finished a step); see its logs, or train it first")


# --- a resume's reading: a killed run's metrics ------------------------------------------------------

@dataclass(frozen=True)
class MetricsLine:
    """One line of a metrics file as written, and the JSON object it holds (None: a line a kill tore)."""

    text: bytes
    row: dict[str, Any] | None

    @property
    def step(self) -> float:
        """The last step the row describes (its `last_step`, as a summary and a batch switch write
        it, else its `step`); minus infinity for a row with neither, infinity for a line that is not
        a whole row."""
        if self.row is None:
            return math.inf
        for key in ("last_step", "step"):
            if self.row.get(key) is not None:
                try:
                    return int(self.row[key])
                except (TypeError, ValueError):
                    return math.inf
        return -math.inf


def metrics_lines(directory: Path) -> list[MetricsLine]:
    """Every line of the run's metrics file, a torn or empty one included (none where it has no file)."""
    path = directory / METRICS_FILE
    if not path.exists():
        return []
    lines = []
    for text in read_regular(path).splitlines():
        try:
            row = loads(text.decode("utf-8"))
        except (UnicodeDecodeError, JSONRefused):
            row = None
        lines.append(MetricsLine(text, row if isinstance(row, dict) else None))
    return lines


@dataclass(frozen=True)
class LoggedSeconds:
    """The run's seconds its latest training window recorded, every invocation before included
    (None: no window recorded them)."""

    train_s: float | None = None
    wall_s: float | None = None


def logged_seconds(directory: Path) -> LoggedSeconds:
    """The run's seconds the latest train rows recorded: what a killed invocation had spent, the
    steps it did after its checkpoint included (read before a resume drops their rows)."""
    latest: dict[str, float | None] = {"run_train_s": None, "run_wall_s": None}
    for line in metrics_lines(directory):
        if line.row is None or line.row.get("kind") != WindowRecord.KIND:
            continue
        for name in latest:
            value = line.row.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                latest[name] = max(float(value), latest[name] or 0.0)
    return LoggedSeconds(train_s=latest["run_train_s"], wall_s=latest["run_wall_s"])
