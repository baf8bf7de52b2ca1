"""What the workload protocol promises, kept the same everywhere a workload is used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainspeed.cli import main

BENCH = ["bench", "--targets", "cpu:eager:fp32", "--batch-sizes", "4", "--windows", "1", "--warmup-steps", "0",
         "--min-window-s", "0.01", "--no-progress", "--no-plot", "--peak-tflops", "1"]


def test_a_workload_written_before_setup_optimizers_took_fused_benches_and_trains(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results, run = tmp_path / "rows.jsonl", tmp_path / "run"
    workload = "toy_workload:before_fused"
    assert main([*BENCH, "--workload", workload, "--out", str(results)]) == 0, capsys.readouterr().err
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert (row["status"], row["error"]) == ("ok", None)
    assert main(["train", "--workload", workload, "--synthetic-data", "--steps", "2", "--batch-size-per-device", "4",
                 "--num-workers", "0", "--out", str(run), "--no-progress"]) == 0, capsys.readouterr().err
    assert (run / "summary.json").is_file()


def test_a_loader_whose_dtypes_differ_from_the_synthetic_batch_is_refused_before_any_rank(
        tmp_path: Path, cli_error) -> None:
    """Such a loader once trained locally and was refused by a server only after its model was
    built there: the trainer now checks its first batch by the server's own check, up front."""
    from trainspeed.workloads import get_workload
    from trainspeed.workloads.batches import batch_layout, tensor_problem

    run = tmp_path / "run"
    line = cli_error("train", "--workload", "toy_workload:float64_data", "--data", str(tmp_path),
                     "--steps", "2", "--batch-size-per-device", "4", "--num-workers", "0", "--out", str(run),
                     "--no-progress")
    said = "batch tensor 'x': float64 of shape [4, 4], expected float32 of shape (B, 4)"
    assert f"do not have 'wide-data''s batch layout: {said}" in line, line
    assert not run.exists()
    layout = batch_layout(get_workload("toy_workload:float64_data"), "narrow")
    import torch

    assert tensor_problem(layout, "x", torch.float64, (4, 4)) == said  # what a server answers such a header
