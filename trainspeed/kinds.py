"""The registry of row kinds: every producer's report part, so `trainspeed report` and `trainspeed
plot` read each kind of row into its writer's dataclass and hand it to its writer's sections.

| part | rows (kind) | written by |
|---|---|---|
| `bench/report.py` | `bench` | `trainspeed bench`, the throughput and remote studies, the reference peers |
| `bench/remote_report.py` | `bench` rows of a `remote:` target | the same |
| `bench/port_check_report.py` | `xla-port-check` | `trainspeed check --out` |
| `bench/data_feed_report.py` | `data-bench` | `trainspeed data bench` |
| `train/report.py` | `train-summary` (`summary.json`; `train` and `val` rows only in a run's `metrics.jsonl`) | `trainspeed train` |
| `train/tpu_report.py` | `bench` rows and run directories of a TPU device | the bench, the JAX peer, `trainspeed train` |
| `evaluate/report.py` | `mahjong-eval`, `mahjong-agreement`, `mahjong-null-test` | `trainspeed eval ...`, the batch-size study |
| each study's `report.py` | its own kinds (`scaling-run`, `batch-size-*`) | `trainspeed study NAME` |
| `plan/report.py` | `plan`, `plan-check` | `trainspeed plan` |
| `bench/measurement.py` | `measurement` | the other scripts of `benchmarks/` |
| `studies/report.py` | `study` | `trainspeed study` |

A new producer adds its part here; a new study needs none: its face's `report_part()` is read
from the studies' registry. Nothing here, in the parts or in `trainspeed.report` imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trainspeed.bench import data_feed_report, measurement, port_check_report, remote_report
from trainspeed.bench import report as bench_report
from trainspeed.errors import UsageError
from trainspeed.evaluate import report as evaluate_report
from trainspeed.plan import report as plan_report
from trainspeed.report import render as page
from trainspeed.report.inputs import ReportInputs
from trainspeed.report.part import PlotRequest, ReportPart
from trainspeed.report.reading import read_inputs as read_with
from trainspeed.studies import STUDIES
from trainspeed.studies import report as studies_report
from trainspeed.train import report as train_report
from trainspeed.train import tpu_report

PARTS: tuple[ReportPart, ...] = (
    bench_report.PART,
    remote_report.PART,
    port_check_report.PART,
    data_feed_report.PART,
    train_report.PART,
    tpu_report.PART,
    evaluate_report.PART,
    *(part for part in (study.report_part() for study in STUDIES.values()) if part is not None),
    plan_report.PART,
    measurement.PART,
    studies_report.PART,
)
"""Every part, in the order of its sections on the page."""


def read_inputs(paths: Sequence[Path]) -> ReportInputs:
    """Every row of every path, each read by the part of its kind."""
    return read_with(paths, PARTS)


def render(inputs: ReportInputs, title: str = "trainspeed report", baselines: Sequence[str] = ()) -> str:
    return page.render(inputs, PARTS, title, baselines)


def write_report(inputs: ReportInputs, out: Path, title: str = "trainspeed report", baselines: Sequence[str] = ()) -> Path:
    return page.write_report(inputs, PARTS, out, title, baselines)


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    """`trainspeed plot`: the figure of the part with rows here that plots first."""
    kinds = {kind for kind, rows in inputs.rows.items() if rows}
    plotting = [part for part in PARTS if part.plot and kinds & {row_kind.kind for row_kind in part.kinds}]
    if not plotting:
        raise UsageError(f"{request.results}: none of its rows has a figure of its own; "
                         "`trainspeed report` shows every kind")
    part = max(plotting, key=lambda part: part.plot_first)
    return part.plot(inputs, request)  # type: ignore[misc]
