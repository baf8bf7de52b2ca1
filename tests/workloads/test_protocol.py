"""What the workload protocol promises, kept the same everywhere a workload is used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainspeed.cli import main

HERE = Path(__file__).resolve().parent
BENCH = ["bench", "--targets", "cpu:eager:fp32", "--batch-sizes", "4", "--windows", "1", "--warmup-steps", "0",
         "--min-window-s", "0.01", "--no-progress", "--no-plot", "--peak-tflops", "1"]


@pytest.fixture
def user_workloads_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


def test_a_workload_written_before_setup_optimizers_took_fused_benches_and_trains(
        user_workloads_on_path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results, run = tmp_path / "rows.jsonl", tmp_path / "run"
    workload = "user_workloads:BeforeFusedWorkload"
    assert main([*BENCH, "--workload", workload, "--out", str(results)]) == 0, capsys.readouterr().err
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert (row["status"], row["error"]) == ("ok", None)
    assert main(["train", "--workload", workload, "--synthetic-data", "--steps", "2", "--batch-size-per-device", "4",
                 "--num-workers", "0", "--out", str(run), "--no-progress"]) == 0, capsys.readouterr().err
    assert (run / "summary.json").is_file()
