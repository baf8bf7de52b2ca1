"""The committed table of what the critical-batch study costs beside the time-to-target study is the
one its committed rows give, and those rows say what the docs say of them: every critical-batch study
of a workload at the same settings found the same critical batches, and warm processes trained its branches in as many
processes as it trains at once, where the code before started one per branch."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from benchmarks import critical_batch_cost

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
ROWS = RESULTS / "critical_batch_cost.jsonl"


def test_the_committed_table_is_the_one_the_committed_rows_give(tmp_path):
    rows = tmp_path / "critical_batch_cost.jsonl"
    shutil.copy(ROWS, rows)
    assert critical_batch_cost.main(["--table", str(rows)]) == 0
    assert rows.with_suffix(".md").read_text() == ROWS.with_suffix(".md").read_text()


def settings(command: str) -> str:
    """A study's command without the folder it wrote: studies of equal settings are one study."""
    return re.sub(r" --out \S+", "", command)


def test_every_critical_batch_study_found_the_same_critical_batches_in_fewer_processes():
    costs = critical_batch_cost.read_costs(ROWS)
    studies = [cost for cost in costs if cost.critical is not None]
    assert studies
    for study in {(cost.workload, settings(cost.command)) for cost in studies}:
        own = [cost for cost in studies if (cost.workload, settings(cost.command)) == study]
        assert len({tuple(cost.critical) for cost in own}) == 1 and len({tuple(cost.tolerance) for cost in own}) == 1
    for cost in studies:
        if cost.code == "this checkout":
            assert cost.processes == cost.parallel_runs < cost.trainings
        else:
            assert cost.processes == cost.trainings
    assert {cost.round for cost in costs if cost.critical is None} == {cost.round for cost in studies}
