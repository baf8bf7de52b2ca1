"""`trainspeed study remote --preset smoke`: its rows pair with their run's local row over
loopback and a labelled slow link, it leaves no network namespace behind, and the report shows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from child_commands import run_child

from trainspeed.bench.ratios import remote_pairs
from trainspeed.bench.results import ResultRow
from trainspeed.cli import main
from trainspeed.kinds import read_inputs
from trainspeed.studies.remote.links import namespaces_possible

pytestmark = pytest.mark.e2e


def _namespaces() -> set[str]:
    result = run_child(["ip", "netns", "list"], timeout=60)
    return set(result.stdout.split()) if result.returncode == 0 else set()


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, set[str]]:
    """The study's folder and the network namespaces before it ran."""
    out = tmp_path_factory.mktemp("study_remote")
    before = _namespaces()
    # In this process: the study's own process is not what is tested; its server and clients are children all the same.
    assert main(["study", "remote", "--preset", "smoke", "--out", str(out)]) == 0
    return out, before


def test_remote_rows_pair_with_their_runs_local_row_over_loopback_and_a_labelled_link(study):
    out, before = study
    rows = [read.row for read in read_inputs([out / "remote.jsonl"]).of(ResultRow)]
    pairs = remote_pairs(rows)
    kind = "netns" if namespaces_possible() is None else "client-side"
    assert sorted((p.remote.link.split("-")[0], p.remote.in_flight) for p in pairs) == sorted(
        [("loopback", 1), ("loopback", 2), (kind.split("-")[0], 1), (kind.split("-")[0], 2)])
    assert all(p.local is not None and p.local.run_id == p.remote.run_id and p.ratio > 0 for p in pairs)
    assert all(p.remote.bytes_sent_per_step >= p.local.bytes_per_step > 0 for p in pairs)
    # The server's time is summed over the steps of each of the client's windows: the same steps,
    # so a wire time (client step - server step) below zero is ruled out, not left to the load.
    assert all(len(p.remote.server_window_s) == p.remote.windows and p.remote.wire_time_suspect is False
               for p in pairs)
    assert _namespaces() == before, "the study left network namespaces behind"


def test_the_report_shows_the_remote_section(study, tmp_path):
    out, _ = study
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    assert '<section id="remote">' in page.read_text()
