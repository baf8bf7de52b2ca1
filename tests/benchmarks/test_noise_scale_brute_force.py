"""The brute-force noise scale on the least-squares example, whose |G|^2 and tr(Sigma) are known."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from child_commands import EXAMPLES, run_ok

from benchmarks import noise_scale_brute_force

STEPS = 20
SAMPLES = 32768
"""Enough that the jackknife error of |G|^2 (about 2% here) leaves the 10% check a wide margin."""


@pytest.fixture(scope="module")
def least_squares_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import least_squares_workload as example
    finally:
        sys.path.remove(str(EXAMPLES))
    root = tmp_path_factory.mktemp("least-squares")
    import torch

    columns = example.samples(16, 36000, torch.Generator().manual_seed(0))
    np.savez(root / "lsq.npz", **{name: tensor.numpy().astype(np.float32) for name, tensor in columns.items()})
    run_ok("data", "from-arrays", str(root / "lsq.npz"), "--out", str(root / "data"))
    run_ok("train", "--workload", "least_squares_workload:LeastSquaresWorkload", "--size", "d16",
           "--data", str(root / "data"), "--batch-size-per-device", "256", "--steps", str(STEPS),
           "--noise-scale-micro-batches", "4", "--log-every", "10", "--threads", "1", "--num-workers", "0",
           "--no-progress", "--out", str(root / "run"), path=(EXAMPLES,))
    return root / "run"


@pytest.fixture
def examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))


@pytest.mark.e2e
def test_brute_force_finds_the_closed_form(least_squares_run, examples_importable, tmp_path):
    out = tmp_path / "check.jsonl"
    argv = [str(least_squares_run), "--step", str(STEPS), "--samples", str(SAMPLES), "--chunk", "1024", "--out", str(out)]
    assert noise_scale_brute_force.main(argv) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (record["kind"], record["benchmark"]) == ("measurement", "noise-scale-check")
    row = record["values"]
    assert row["samples_used"] == SAMPLES
    assert row["grad_sq"] == pytest.approx(1.0, rel=0.1)
    assert row["trace_sigma"] == pytest.approx(33.0, rel=0.1)
    assert row["in_training_method"] == "micro-batches" and row["ratio_b_simple"] is not None


@pytest.mark.e2e
def test_a_missing_checkpoint_step_is_one_line_and_exit_2(least_squares_run, examples_importable, tmp_path, capsys):
    out = tmp_path / "check.jsonl"
    assert noise_scale_brute_force.main([str(least_squares_run), "--step", "7", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no checkpoint of step 7" in error
    assert not out.exists()
