"""`trainspeed study scaling --preset smoke` on a finished self-play set: rows that compare ranks
and data within the study, and the report's section."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainspeed.cli import main
from trainspeed.kinds import read_inputs
from trainspeed.studies.scaling.rows import ScalingRunRow, io_efficiency

pytestmark = [pytest.mark.e2e, pytest.mark.long]  # minutes in all: started first (tests/conftest.py)


@pytest.fixture(scope="module")
def study(tmp_path_factory, selfplay_data: Path) -> Path:
    out = tmp_path_factory.mktemp("study_scaling")
    # In this process: the study's own process is not what is tested; its bench and trainings are children all the same.
    assert main(["study", "scaling", "--preset", "smoke", "--data", str(selfplay_data), "--out", str(out)]) == 0
    return out


def test_scaling_rows_compare_ranks_and_data_within_the_study(study):
    rows = [read.row for read in read_inputs([study / "scaling.jsonl"]).of(ScalingRunRow)]
    assert sorted((row.world_size, row.data) for row in rows) == [(1, "real"), (1, "synthetic"), (2, "real"),
                                                                  (2, "synthetic")]
    assert len({row.study_id for row in rows}) == 1 and all(row.bench_samples_per_s for row in rows)
    assert all(io_efficiency(rows, 32, ranks) > 0 for ranks in (1, 2))
    assert all(row.machine.cores_usable and row.workload_sha256 for row in rows)


def test_the_report_shows_the_scaling_section(study, tmp_path):
    page = tmp_path / "report.html"
    assert main(["report", str(study), "--out", str(page)]) == 0
    assert '<section id="scaling">' in page.read_text()
