"""What `trainspeed report` reads: result files and run directories, every row read by the reader of
its kind, into the dataclass its writer defines.

| kind | written by | read as |
|---|---|---|
| `bench` | `trainspeed bench`, the throughput and remote studies, the reference peers, `benchmarks/bench_stylegan3.py` | `ResultRow` (a remote target's row is one too) |
| `mahjong-eval` | `trainspeed eval mahjong`, the batch-size study | `MahjongEvalRow` |
| `mahjong-agreement` | `trainspeed eval mahjong-agreement` | `MahjongAgreementRow` |
| `mahjong-null-test` | `trainspeed eval mahjong-null` | `NullTestRow` |
| `train-summary` | `trainspeed train` (`summary.json`, the last row of `metrics.jsonl`) | `RunSummary` |
| `train`, `val` | `trainspeed train`, in a run directory's `metrics.jsonl` | `WindowRecord`, `EvalRecord` |
| `scaling-run` | the scaling study | `ScalingRunRow` |
| `batch-size-config`, `-run`, `-batch`, `-strength`, `-comparison` | the batch-size study | its five row types |
| `study` | `trainspeed study` | `StudyRecord` |
| `measurement` | the other scripts of `benchmarks/` | `MeasurementRow` |

A directory is a run directory (it holds `summary.json`), or a folder of result files and run
directories (`trainspeed study all --out DIR` writes one), read one level deep. A row of another
kind or schema version, a field of the wrong type, a line that is not JSON: each is one error
naming the file and the line. Fields a row carries beyond its dataclass are kept (`extra`) and
shown in the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from trainspeed.bench.measurement import MeasurementRow
from trainspeed.bench.results import STATUSES, ResultRow
from trainspeed.errors import UsageError
from trainspeed.evaluate.agreement import MahjongAgreementRow
from trainspeed.evaluate.mahjong import MahjongEvalRow
from trainspeed.evaluate.null_test import NullTestRow
from trainspeed.rows import KIND, Source, parse_row, read_records, record_kind
from trainspeed.studies.batch_size import (
    BatchSizeBatchRow,
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeSettingsRow,
    BatchSizeStrengthRow,
)
from trainspeed.studies.common import StudyRecord
from trainspeed.studies.scaling import ScalingRunRow
from trainspeed.train.evaluation import EvalRecord
from trainspeed.train.metrics import METRICS_FILE, WindowRecord
from trainspeed.train.summary import SUMMARY_FILE, RunSummary
from trainspeed.workloads.identity import SHORT_HASH

T = TypeVar("T")
RESULT_SUFFIXES = (".jsonl", ".json")
SWITCH = "+"


@dataclass(frozen=True)
class Read(Generic[T]):
    """One row as read: its dataclass, where it came from, and the fields it carried beyond it."""

    row: T
    source: Source
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        value = getattr(self.row, name, None) if hasattr(self.row, name) else self.extra.get(name)
        return default if value is None else value

    @property
    def command(self) -> str | None:
        return self.get("command")


def workload_label(name: str, sha256: str | None, size: str) -> str:
    """`name@hash12 size`: two workloads of one name but different definitions get two labels (rows
    written before rows carried the hash have the bare name)."""
    return f"{name}@{sha256[:SHORT_HASH]} {size}" if sha256 else f"{name} {size}"


@dataclass(frozen=True)
class BenchRow(Read[ResultRow]):
    @property
    def is_remote(self) -> bool:
        return self.row.is_remote

    @property
    def base_size(self) -> str:
        return self.row.size.split(SWITCH)[0]

    @property
    def switches(self) -> str:
        """The size's switches after `+` (a speed or memory switch runs the same model another way)."""
        return self.row.size.partition(SWITCH)[2]

    @property
    def series(self) -> str:
        """The row's line in figures and tables: the target, plus the feed when host-fed, plus the
        size's switches."""
        return self.row.series + (f" [{self.switches}]" if self.switches else "")

    @property
    def workload_label(self) -> str:
        return workload_label(self.row.workload, self.row.workload_sha256, self.base_size)


@dataclass(frozen=True)
class TrainRun:
    """One run directory: its summary, and the curves of its metrics.jsonl."""

    summary: RunSummary
    source: Source
    train_curve: list[WindowRecord] = field(default_factory=list)
    val_curve: list[EvalRecord] = field(default_factory=list)

    @property
    def command(self) -> str | None:
        return None

    @property
    def label(self) -> str:
        s = self.summary
        data = " synthetic" if s.synthetic_data else ""
        return (f"{workload_label(s.workload, s.workload_sha256, s.size)}: {s.target} x{s.world_size}, "
                f"{s.batch_size_per_device}/device{data}")


@dataclass
class ReportInputs:
    bench: list[BenchRow] = field(default_factory=list)
    evals: list[Read[MahjongEvalRow]] = field(default_factory=list)
    agreements: list[Read[MahjongAgreementRow]] = field(default_factory=list)
    null_tests: list[Read[NullTestRow]] = field(default_factory=list)
    runs: list[TrainRun] = field(default_factory=list)
    scaling: list[Read[ScalingRunRow]] = field(default_factory=list)
    batch_size: list[Read[Any]] = field(default_factory=list)
    """The batch-size study's rows of its four kinds."""
    measurements: list[Read[MeasurementRow]] = field(default_factory=list)
    studies: list[Read[StudyRecord]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """The inputs as given."""
    read: set[Path] = field(default_factory=set)
    """Every file read, resolved (an output may be none of them)."""

    @property
    def count(self) -> int:
        return sum(len(rows) for rows in (self.bench, self.evals, self.agreements, self.null_tests, self.runs, self.scaling, self.batch_size,
                                          self.measurements, self.studies))


def _bench(inputs: ReportInputs, record: dict[str, Any], source: Source) -> None:
    row, extra = parse_row(ResultRow, record, source)
    if row.status not in STATUSES:
        raise UsageError(f"{source}: unknown status {row.status!r} (one of {', '.join(STATUSES)})")
    if row.batch_size <= 0:
        raise UsageError(f"{source}: batch_size must be a positive integer, got {row.batch_size}")
    if row.status in ("ok", "invalid") and row.samples_per_s is None:
        raise UsageError(f"{source}: a row with status {row.status} needs a number in samples_per_s")
    inputs.bench.append(BenchRow(row, source, extra))


def _reader(row_type: type, into: Callable[[ReportInputs], list]) -> Callable[[ReportInputs, dict, Source], None]:
    def read(inputs: ReportInputs, record: dict[str, Any], source: Source) -> None:
        row, extra = parse_row(row_type, record, source)
        into(inputs).append(Read(row, source, extra))
    return read


def _summary(inputs: ReportInputs, record: dict[str, Any], source: Source) -> None:
    summary, _ = parse_row(RunSummary, record, source)
    inputs.runs.append(TrainRun(summary, source))


def _metrics_row(inputs: ReportInputs, record: dict[str, Any], source: Source) -> None:
    raise UsageError(f"{source}: a {record[KIND]!r} row belongs in a run directory's {METRICS_FILE}; "
                     "give the report the run directory")


READERS: dict[str, Callable[[ReportInputs, dict, Source], None]] = {
    ResultRow.KIND: _bench,
    MahjongEvalRow.KIND: _reader(MahjongEvalRow, lambda inputs: inputs.evals),
    MahjongAgreementRow.KIND: _reader(MahjongAgreementRow, lambda inputs: inputs.agreements),
    NullTestRow.KIND: _reader(NullTestRow, lambda inputs: inputs.null_tests),
    RunSummary.KIND: _summary,
    ScalingRunRow.KIND: _reader(ScalingRunRow, lambda inputs: inputs.scaling),
    **{row_type.KIND: _reader(row_type, lambda inputs: inputs.batch_size)
       for row_type in (BatchSizeSettingsRow, BatchSizeRunRow, BatchSizeBatchRow, BatchSizeStrengthRow,
                        BatchSizeComparisonRow)},
    MeasurementRow.KIND: _reader(MeasurementRow, lambda inputs: inputs.measurements),
    StudyRecord.KIND: _reader(StudyRecord, lambda inputs: inputs.studies),
    WindowRecord.KIND: _metrics_row,
    EvalRecord.KIND: _metrics_row,
}


def add_record(inputs: ReportInputs, record: Any, source: Source) -> None:
    kind, _ = record_kind(record, source)
    reader = READERS.get(kind)
    if reader is None:
        raise UsageError(f"{source}: a row of kind {kind!r}, which the report does not read "
                         f"(it reads {', '.join(sorted(READERS))})")
    reader(inputs, record, source)


def _curves(path: Path) -> tuple[list[WindowRecord], list[EvalRecord]]:
    train: list[WindowRecord] = []
    val: list[EvalRecord] = []
    for record, source in read_records(path):
        kind, _ = record_kind(record, source)
        if kind == WindowRecord.KIND:
            train.append(parse_row(WindowRecord, record, source)[0])
        elif kind == EvalRecord.KIND:
            val.append(EvalRecord.from_row(record, source))
        elif kind == RunSummary.KIND:
            parse_row(RunSummary, record, source)  # the summary.json beside it is the one shown
        else:
            raise UsageError(f"{source}: a {kind!r} row is no metrics row (train, val, train-summary)")
    return train, val


def read_run_directory(inputs: ReportInputs, directory: Path) -> None:
    summary_path = directory / SUMMARY_FILE
    records = read_records(summary_path)
    if len(records) != 1:
        raise UsageError(f"{summary_path}: not a run summary (one JSON object)")
    summary, _ = parse_row(RunSummary, *records[0])
    inputs.read.add(summary_path.resolve())
    metrics = directory / METRICS_FILE
    train, val = _curves(metrics) if metrics.is_file() else ([], [])
    if metrics.is_file():
        inputs.read.add(metrics.resolve())
    inputs.runs.append(TrainRun(summary, Source(str(summary_path)), train, val))


def read_file(inputs: ReportInputs, path: Path) -> None:
    for record, source in read_records(path):
        add_record(inputs, record, source)
    inputs.read.add(path.resolve())


def read_folder(inputs: ReportInputs, folder: Path) -> None:
    """A folder of result files and run directories, one level deep; other entries are skipped."""
    entries = sorted(folder.iterdir())
    files = [p for p in entries if p.is_file() and p.suffix in RESULT_SUFFIXES and not p.name.startswith(".")]
    runs = [p for p in entries if p.is_dir() and (p / SUMMARY_FILE).is_file()]
    if not files and not runs:
        raise UsageError(f"{folder}: a directory without {SUMMARY_FILE}, result files (*.jsonl, *.json) "
                         "or run directories in it")
    for path in files:
        read_file(inputs, path)
    for run in runs:
        read_run_directory(inputs, run)


def read_inputs(paths: list[Path]) -> ReportInputs:
    """Every row of every path; a missing path, an unknown row or a bad line is one UsageError."""
    if not paths:
        raise UsageError(
            "report: no results given; pass result files, run directories or a study's folder, "
            "e.g. trainspeed report results/*.jsonl runs/* --out report.html")
    inputs = ReportInputs()
    for path in paths:
        if path.is_dir() and (path / SUMMARY_FILE).is_file():
            read_run_directory(inputs, path)
        elif path.is_dir():
            read_folder(inputs, path)
        elif path.is_file():
            read_file(inputs, path)
        else:
            raise UsageError(f"{path}: no such file or directory")
        inputs.files.append(str(path))
    if inputs.count == 0:
        raise UsageError(f"no rows in {', '.join(str(p) for p in paths)}")
    return inputs
