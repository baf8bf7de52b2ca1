"""`trainspeed study batch-size --preset smoke` at one seed on a finished self-play set: settings,
runs, evaluations and a verdict in every framing, and the report's section. The statistics over
several seeds are tested from rows in `test_batch_size.py`."""

from __future__ import annotations

from pathlib import Path

import pytest
from process_starts import watching_starts

from trainspeed.cli import main
from trainspeed.evaluate.rows import MahjongEvalRow
from trainspeed.kinds import read_inputs
from trainspeed.studies.batch_size.report import ROW_TYPES as BATCH_SIZE_ROWS
from trainspeed.studies.batch_size.rows import (
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeSettingsRow,
)
from trainspeed.studies.warm_runs.worker import WORKER_MODULE

pytestmark = [pytest.mark.e2e, pytest.mark.long]


@pytest.fixture(scope="module")
def study(tmp_path_factory, selfplay_data: Path) -> tuple[Path, list[list[str]]]:
    """The study runs in this process (its own process is not what is tested); its bench, its warm
    training process and its evaluations are the child processes it starts, returned beside its folder."""
    out = tmp_path_factory.mktemp("study_batch_size")
    with watching_starts() as started:
        assert main(["study", "batch-size", "--preset", "smoke", "--seeds", "0", "--data", str(selfplay_data),
                     "--out", str(out)]) == 0
    return out, started


def test_the_runs_train_one_after_another_in_one_warm_process(study):
    _, started = study
    assert len([argv for argv in started if WORKER_MODULE in argv]) == 1  # --parallel-runs 1 (the smoke preset's)
    assert not [argv for argv in started if "train" in argv]  # no run is a command of its own
    assert [argv for argv in started if "eval" in argv]  # the evaluations are


def test_batch_size_rows_hold_settings_runs_evaluations_and_a_verdict(study):
    inputs = read_inputs([study[0] / "batch_size.jsonl"])
    kinds = [type(read.row) for read in inputs.of(*BATCH_SIZE_ROWS)]
    assert kinds[0] is BatchSizeSettingsRow and kinds.count(BatchSizeRunRow) == 2  # 2 batches x 1 seed
    comparisons = [read.row for read in inputs.of(*BATCH_SIZE_ROWS) if isinstance(read.row, BatchSizeComparisonRow)]
    assert sorted(row.framing for row in comparisons) == ["equal samples", "equal steps", "equal wall time", "head to head"]
    assert all((row.global_batch, row.versus_batch) == (64, 32) for row in comparisons)
    assert all(row.verdict in ("supported", "contradicted")
               or row.verdict.startswith("inconclusive at a minimum detectable difference of ") for row in comparisons)
    # every final policy against the rule-based agents, batch 32 at batch 64's last step, head to head
    assert len(inputs.of(MahjongEvalRow)) >= 2 + 1 + 1 and {read.row.games for read in inputs.of(MahjongEvalRow)} == {8}


def test_the_report_shows_the_batch_size_section(study, tmp_path):
    page = tmp_path / "report.html"
    assert main(["report", str(study[0]), "--out", str(page)]) == 0
    assert '<section id="batch-size-study">' in page.read_text()
