"""The committed coverage table of the plan's intervals is what the script makes of the committed
rows today: a change to the plan's model that moves a prediction or an interval fails here until
the table (`docs/results/plan_coverage.{csv,md}`) is made again."""

from __future__ import annotations

from pathlib import Path

from benchmarks import plan_coverage

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_committed_coverage_table_is_the_one_the_committed_rows_give(tmp_path):
    csv, md = tmp_path / "coverage.csv", tmp_path / "coverage.md"
    assert plan_coverage.main(["--csv", str(csv), "--md", str(md)]) == 0
    assert csv.read_text() == (RESULTS / "plan_coverage.csv").read_text()
    assert md.read_text() == (RESULTS / "plan_coverage.md").read_text()


def test_every_committed_check_is_in_the_table_once():
    """24 checks in 9 files; those whose plan's inputs were not kept are listed, not predicted."""
    found = plan_coverage.coverage()
    assert len(found) == len({(item.plan, item.config) for item in found}) == 24
    assert sum(1 for item in found if not item.predicted_again) == 3
    assert all(item.note for item in found if not item.predicted_again)
