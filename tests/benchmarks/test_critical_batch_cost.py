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


def test_a_critical_batch_study_is_costed_with_the_base_run_it_starts_from(tmp_path):
    """A study's row records its base run's seconds and CPU seconds from that run's summary, and the
    table adds them to the study's own before dividing by the time-to-target study's."""
    import json

    base = tmp_path / "cb_base"
    base.mkdir()
    (base / "summary.json").write_text(json.dumps(
        {"startup_s": 4.0, "wall_s": 30.0, "paused_s": 6.0, "cpu_s_per_wall_s": 0.5}))
    out = tmp_path / "critical-batch-r1"
    out.mkdir()
    settings = {"kind": "critical-batch-study-config", "workload": "mahjong", "size": "tiny", "total_s": 90.0,
                "branch_runs": 4, "branch_processes": 2, "base_run": "cb_base",
                "settings": {"parallel_runs": 2, "runs_dir": str(out / "runs")}}
    point = {"kind": "critical-batch", "critical_text": "64", "tolerance": 0.01}
    (out / "critical_batch.jsonl").write_text(json.dumps(settings) + "\n" + json.dumps(point) + "\n")
    found = critical_batch_cost.findings(out)
    assert (found["base_run_s"], found["base_run_cpu_s"]) == (40.0, 22.0)

    common = dict(round=1, code="this checkout", command="c", total_s=None, load_start=1.0, load_mean=1.0,
                  load_end=1.0, processes=None, parallel_runs=2, workload="mahjong tiny")
    reference = critical_batch_cost.StudyCost(label="time-to-target", wall_s=400.0, cpu_s=500.0, trainings=9,
                                              critical=None, tolerance=None, **common)
    study = critical_batch_cost.StudyCost(label="critical-batch", wall_s=60.0, cpu_s=78.0, trainings=4,
                                          critical=["64"], tolerance=[0.01], base_run_s=40.0, base_run_cpu_s=22.0,
                                          **common)
    own = critical_batch_cost.table([reference, study], stand_ins={}).splitlines()[-1]
    assert own.endswith("| 0.15 | – | 0.16 | its own | 40 | 22 | 0.25 | 0.20 |"), own
    unrecorded = critical_batch_cost.StudyCost(label="critical-batch", wall_s=60.0, cpu_s=78.0, trainings=4,
                                               critical=["64"], tolerance=[0.01], **common)
    stood_in = critical_batch_cost.table([reference, unrecorded], stand_ins={"mahjong tiny": base}).splitlines()[-1]
    assert stood_in.endswith(f"| `{base}` | 40 | 22 | 0.25 | 0.20 |"), stood_in
    assert critical_batch_cost.table([reference, unrecorded], stand_ins={}).splitlines()[-1].endswith(
        "| – | – | – | – | – |")
