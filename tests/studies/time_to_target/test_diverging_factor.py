"""A time-to-target study whose LR sweep holds a factor that diverges: the diverged runs are rows
("not reached: diverged at step N"), the batches are fitted from the factor that trains, and a
rerun with the same settings reuses every run, the diverged ones too (trained again, they would
diverge again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainspeed.cli import main

pytestmark = pytest.mark.e2e

EASY = "val/accuracy>=0.3"
"""Met at the first validation at either smoke batch by a learning rate that trains."""
SWEEP = ["--preset", "smoke", "--until", EASY, "--base-lr", "1", "--lr-factors", "0.001,1000", "--seeds", "1",
         "--no-progress"]
"""Peak LRs of about 2e-4 (trains) and 200 (its loss is NaN within a few steps) at the smoke batches; one
seed, as the sweep runs on seed 0 alone (the other seeds' runs at the best factor are
test_time_to_target_study.py's)."""


def _rows(path: Path, kind: str) -> list[dict]:
    return [row for row in map(json.loads, path.read_text().splitlines()) if row["kind"] == kind]


def test_a_diverging_factor_is_a_row_not_reached_and_the_study_fits_the_others(tmp_path: Path, selfplay_data: Path,
                                                                               capsys) -> None:
    out = tmp_path / "study"
    assert main(["study", "time-to-target", *SWEEP, "--data", str(selfplay_data), "--out", str(out)]) == 0, \
        capsys.readouterr().err
    rows = out / "time_to_target.jsonl"
    runs = {run["run"]: run for run in _rows(rows, "time-to-target-study-run")}
    assert set(runs) == {"b16-lr0.001-s0", "b16-lr1000-s0", "b32-lr0.001-s0", "b32-lr1000-s0"}
    for name in ("b16-lr1000-s0", "b32-lr1000-s0"):
        run = runs[name]
        assert not run["reached"] and run["steps"] is None and run["diverged_at_step"] >= 1
        assert run["outcome"] == (f"not reached: diverged at step {run['diverged_at_step']} (the training loss was "
                                  "not finite)")
    assert all(run["reached"] and run["diverged_at_step"] is None for name, run in runs.items() if "lr0.001" in name)
    batches = _rows(rows, "time-to-target-study-batch")
    assert [(batch["best_lr_factor"], batch["outcome"]) for batch in batches] == [(0.001, "reached by all 1 seeds")] * 2
    assert all(batch["lr_sweep"]["1000"] is None for batch in batches)
    assert len(_rows(rows, "time-to-target-study-fit")) == 1
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(page)]) == 0 and "diverged at step" in page.read_text()

    capsys.readouterr()
    again = tmp_path / "again"
    assert main(["study", "time-to-target", *SWEEP, "--data", str(selfplay_data), "--out", str(again),
                 "--runs-dir", str(out / "time_to_target_runs")]) == 0
    assert "trainspeed train" not in capsys.readouterr().out
    assert len(_rows(again / "time_to_target.jsonl", "time-to-target-study-run")) == 4
