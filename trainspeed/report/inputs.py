"""What `trainspeed report` reads: any mix of result files and run directories, each row recognised
by its fields.

| kind | recognised by | read as |
|---|---|---|
| bench row | `workload`, `target`, `batch_size`, `status` | `BenchRow` (a `ResultRow` and its extra fields) |
| remote bench row | a bench row whose target starts with `remote:` | `BenchRow`, `is_remote` |
| old StyleGAN3 row | `images_per_s`, `step_s`, no `workload` (bench_stylegan3.py before it wrote bench rows) | `BenchRow` (`legacy.py`) |
| evaluation row | `kind: "mahjong-eval"` | `EvalRow` |
| batch-size study row | `kind: "batch-size-study"` (or the study script's `batch-study-*` kinds) | `StudyRow` (`study.py`) |
| run summary | a run directory's `summary.json`, or a JSON object with `RunSummary`'s fields | `TrainRun` |
| old CPU scaling row | `nproc`, `data`, `steady_samples_per_s` (bench_train_scaling.py) | `TrainRun` (`legacy.py`) |

Extra fields are kept everywhere (`BenchRow.extra`, `EvalRow.fields`, ...), so a field another
part of trainspeed adds later flows through to the tables. A line that is none of these, or not
JSON, is an error naming the file and the line.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed.bench.results import FIELDS as RESULT_FIELDS
from trainspeed.bench.results import STATUSES, ResultRow
from trainspeed.errors import UsageError
from trainspeed.report import legacy
from trainspeed.report.study import STUDY_KINDS, StudyRow, study_row
from trainspeed.train.metrics import METRICS_FILE
from trainspeed.train.summary import SUMMARY_FILE, RunSummary

EVAL_KIND = "mahjong-eval"
EVAL_FIELDS = ("policy", "opponent", "games", "mean_rank", "rank_distribution")
REMOTE_PREFIX = "remote:"
REMOTE_FIELDS = ("transport", "link", "in_flight", "bytes_sent_per_step", "bytes_received_per_step", "server_step_s")
SUMMARY_FIELDS = tuple(f.name for f in dataclasses.fields(RunSummary))
SUMMARY_REQUIRED = ("workload", "size", "target", "world_size", "batch_size_per_device", "end_to_end_samples_per_s")
KNOWN = (
    "bench rows (workload, target, batch_size, status), mahjong-eval rows, batch-size-study rows, "
    "run summaries, or run directories"
)


@dataclass(frozen=True)
class Source:
    """Where a row came from: a file and its line (None for a whole-file JSON document)."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


@dataclass(frozen=True)
class BenchRow:
    """One bench result row: the `ResultRow` fields, and whatever else the row carried."""

    row: ResultRow
    extra: dict[str, Any]
    source: Source

    def get(self, name: str) -> Any:
        """A field by name, whether `ResultRow` has it or the row carried it as an extra."""
        if name in RESULT_FIELDS:
            return getattr(self.row, name)
        return self.extra.get(name)

    @property
    def command(self) -> str | None:
        return self.get("command")

    @property
    def is_remote(self) -> bool:
        return self.row.target.startswith(REMOTE_PREFIX)

    @property
    def local_target(self) -> str:
        """The local counterpart's target: `remote:HOST:PORT/TARGET[/SWITCHES]` less the address and
        the remote switches (in-flight=N, link=LABEL)."""
        if not self.is_remote:
            return self.row.target
        parts = self.row.target[len(REMOTE_PREFIX):].split("/")
        return parts[1] if len(parts) > 1 else parts[0]

    @property
    def variant(self) -> str | None:
        variant = self.extra.get("variant")
        return str(variant) if variant not in (None, "") else None

    @property
    def series(self) -> str:
        """The row's line in figures and tables: the target (plus the feed when host-fed, as in
        `ResultRow.series`), plus a variant the row names (StyleGAN3's memory trade-offs)."""
        return self.row.series + (f" [{self.variant}]" if self.variant else "")

    @property
    def workload_label(self) -> str:
        return f"{self.row.workload} {self.row.size}"


@dataclass(frozen=True)
class EvalRow:
    """One finished self-play evaluation (`kind: mahjong-eval`)."""

    fields: dict[str, Any]
    source: Source

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    @property
    def command(self) -> str | None:
        return self.fields.get("command")

    @property
    def label(self) -> str:
        """`<run name> @<step> vs <opponent>` (run directories, the policy's and a policy
        opponent's, by their last part)."""
        step = self.get("policy_step")
        policy = Path(str(self.get("policy"))).name or str(self.get("policy"))
        opponent = str(self.get("opponent"))
        opponent = Path(opponent).name if "/" in opponent else opponent
        return f"{policy}" + (f" @{step}" if step is not None else "") + f" vs {opponent}"


@dataclass(frozen=True)
class CurvePoint:
    step: int
    values: dict[str, float]


@dataclass(frozen=True)
class TrainRun:
    """One training run: its summary, and the curves of its metrics.jsonl where there is one."""

    summary: dict[str, Any]
    source: Source
    train_curve: list[CurvePoint] = field(default_factory=list)
    val_curve: list[CurvePoint] = field(default_factory=list)
    command: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        value = self.summary.get(name)
        return default if value is None else value

    @property
    def synthetic(self) -> bool:
        return bool(self.summary.get("synthetic_data"))

    @property
    def config_key(self) -> tuple:
        """Runs with the same key are repeats of one configuration."""
        s = self.summary
        return (s["workload"], s["size"], s["target"], s["world_size"], s["batch_size_per_device"], self.synthetic)

    @property
    def label(self) -> str:
        s = self.summary
        data = " synthetic" if self.synthetic else ""
        return f"{s['target']} x{s['world_size']}, {s['batch_size_per_device']}/device{data}"


@dataclass
class ReportInputs:
    bench: list[BenchRow] = field(default_factory=list)
    evals: list[EvalRow] = field(default_factory=list)
    study: list[StudyRow] = field(default_factory=list)
    runs: list[TrainRun] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.bench) + len(self.evals) + len(self.study) + len(self.runs)


def _finite(value: Any) -> Any:
    """NaN and infinities (which `json` accepts) as None: they are no measurement."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def bench_row(record: dict[str, Any], source: Source) -> BenchRow:
    known = {k: _finite(v) for k, v in record.items() if k in RESULT_FIELDS}
    extra = {k: v for k, v in record.items() if k not in RESULT_FIELDS}
    known.setdefault("run_id", "")
    known.setdefault("timestamp", "")
    try:
        row = ResultRow(**known)
    except TypeError as error:
        raise UsageError(f"{source}: not a trainspeed result row ({error})") from None
    if row.status not in STATUSES:
        raise UsageError(f"{source}: unknown status {row.status!r} (one of {', '.join(STATUSES)})")
    if not isinstance(row.batch_size, int) or isinstance(row.batch_size, bool) or row.batch_size <= 0:
        raise UsageError(f"{source}: batch_size must be a positive integer, got {row.batch_size!r}")
    if row.status in ("ok", "invalid") and not isinstance(row.samples_per_s, (int, float)):
        raise UsageError(f"{source}: a row with status {row.status} needs a number in samples_per_s")
    if row.target.startswith(REMOTE_PREFIX):
        missing = [name for name in REMOTE_FIELDS if name not in record]
        if missing:
            raise UsageError(f"{source}: remote row without {', '.join(missing)}")
    return BenchRow(row=row, extra=extra, source=source)


def eval_row(record: dict[str, Any], source: Source) -> EvalRow:
    missing = [name for name in EVAL_FIELDS if name not in record]
    if missing:
        raise UsageError(f"{source}: mahjong-eval row without {', '.join(missing)}")
    distribution = record["rank_distribution"]
    if not isinstance(distribution, list) or len(distribution) != 4:
        raise UsageError(f"{source}: rank_distribution must list 4 fractions, got {distribution!r}")
    return EvalRow(fields=dict(record), source=source)


def is_summary(record: dict[str, Any]) -> bool:
    return all(name in record for name in SUMMARY_REQUIRED)


def summary_run(record: dict[str, Any], source: Source, command: str | None = None,
                val_curve: list[CurvePoint] | None = None) -> TrainRun:
    summary = {k: v for k, v in record.items() if k != "kind"}
    summary.setdefault("global_batch", summary["world_size"] * summary["batch_size_per_device"])
    return TrainRun(summary=summary, source=source, val_curve=val_curve or [],
                    command=command or record.get("command"))


def record_kind(record: Any, source: Source) -> str:
    """Which reader a JSON object goes to (see the module's table)."""
    if not isinstance(record, dict):
        raise UsageError(f"{source}: not a JSON object; the report reads {KNOWN}")
    kind = record.get("kind")
    if kind == EVAL_KIND:
        return "eval"
    if kind in STUDY_KINDS:
        return "study"
    if all(name in record for name in ("workload", "target", "batch_size", "status")):
        return "bench"
    if legacy.is_old_stylegan3(record):
        return "old-stylegan3"
    if kind == "summary" or is_summary(record):
        return "summary"
    if isinstance(record.get("summary"), dict) and is_summary(record["summary"]):
        return "quality"
    if legacy.is_old_scaling(record):
        return "old-scaling"
    what = f"a row of kind {kind!r}" if kind else "a row with fields " + ", ".join(list(record)[:6])
    raise UsageError(f"{source}: {what} is none of what the report reads ({KNOWN})")


def add_record(inputs: ReportInputs, record: Any, source: Source) -> None:
    kind = record_kind(record, source)
    if kind == "bench":
        inputs.bench.append(bench_row(record, source))
    elif kind == "old-stylegan3":
        inputs.bench.append(bench_row(legacy.stylegan3_record(record, source), source))
    elif kind == "eval":
        inputs.evals.append(eval_row(record, source))
    elif kind == "study":
        row = study_row(record, source)
        if row is not None:
            inputs.study.append(row)
    elif kind == "summary":
        inputs.runs.append(summary_run(record, source))
    elif kind == "quality":
        curve = [CurvePoint(int(v["step"]), {k: x for k, x in v.items() if isinstance(x, (int, float))})
                 for v in record.get("validation", []) if isinstance(v, dict) and "step" in v]
        inputs.runs.append(summary_run(record["summary"], source, record.get("command"), curve))
    elif kind == "old-scaling":
        inputs.runs.append(summary_run(legacy.scaling_summary(record), source, record.get("command")))


def _records(path: Path) -> list[tuple[Any, Source]]:
    """JSON Lines, or one JSON document spread over several lines (a `.json` file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: cannot read it ({getattr(error, 'strerror', None) or error})") from None
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append((json.loads(line), Source(str(path), number)))
        except json.JSONDecodeError as error:
            if not records:
                try:  # a pretty-printed JSON document (summary.json, train_quality.json)
                    return [(json.loads(text), Source(str(path)))]
                except json.JSONDecodeError:
                    pass
            raise UsageError(f"{path}:{number}: not JSON ({error.msg} at column {error.colno})") from None
    return records


def _curve(path: Path, kind: str) -> list[CurvePoint]:
    points = []
    for record, source in _records(path):
        if not isinstance(record, dict) or "step" not in record:
            raise UsageError(f"{source}: not a metrics row (no step)")
        if record.get("kind", "train") == kind:
            values = {k: v for k, v in record.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
            points.append(CurvePoint(int(record["step"]), values))
    return points


def read_run_directory(directory: Path) -> TrainRun:
    summary_path = directory / SUMMARY_FILE
    records = _records(summary_path)
    if len(records) != 1 or not isinstance(records[0][0], dict) or not is_summary(records[0][0]):
        raise UsageError(f"{summary_path}: not a run summary (needs {', '.join(SUMMARY_REQUIRED)})")
    metrics = directory / METRICS_FILE
    train_curve = _curve(metrics, "train") if metrics.is_file() else []
    val_curve = _curve(metrics, "val") if metrics.is_file() else []
    run = summary_run(records[0][0], Source(str(summary_path)))
    return dataclasses.replace(run, train_curve=train_curve, val_curve=val_curve)


def read_inputs(paths: list[Path]) -> ReportInputs:
    """Every row of every path; a missing path, an unknown row or a bad line is one UsageError."""
    if not paths:
        raise UsageError(
            "report: no results given; pass bench JSONL files, evaluation rows or run directories, "
            "e.g. trainspeed report results/*.jsonl runs/* --out report.html")
    inputs = ReportInputs()
    for path in paths:
        if path.is_dir():
            if (path / SUMMARY_FILE).is_file():
                inputs.runs.append(read_run_directory(path))
            else:
                runs = sorted(p for p in path.iterdir() if (p / SUMMARY_FILE).is_file())
                if not runs:
                    raise UsageError(f"{path}: a directory without {SUMMARY_FILE} (nor run directories in it)")
                inputs.runs.extend(read_run_directory(run) for run in runs)
        elif path.is_file():
            for record, source in _records(path):
                add_record(inputs, record, source)
        else:
            raise UsageError(f"{path}: no such file or directory")
        inputs.files.append(str(path))
    if inputs.count == 0:
        raise UsageError(f"no rows in {', '.join(str(p) for p in paths)}")
    return inputs
