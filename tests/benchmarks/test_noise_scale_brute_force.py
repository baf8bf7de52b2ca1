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
           "--noise-scale-micro-batches", "4", "--noise-scale-every", "1", "--log-every", "10", "--threads", "1", "--num-workers", "0",
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
    assert (row["resolved"], row["in_training_resolved"], row["agreement"]) == (True, True, "both resolved")
    assert row["b_simple_lower"] is None and row["in_training_b_simple_lower"] is None


@pytest.mark.e2e
def test_a_missing_checkpoint_step_is_one_line_and_exit_2(least_squares_run, examples_importable, tmp_path, capsys):
    out = tmp_path / "check.jsonl"
    assert noise_scale_brute_force.main([str(least_squares_run), "--step", "7", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no checkpoint of step 7" in error
    assert not out.exists()


def in_training(resolved: bool | None, b_simple: float | None, lower: float | None) -> noise_scale_brute_force.InTraining:
    return noise_scale_brute_force.InTraining(
        method="micro-batches", small_batch=64, big_batch=256, grad_sq=0.01, trace_sigma=50.0, b_simple=b_simple,
        window_grad_sq=0.01, window_trace_sigma=50.0, window_b_simple=None, window_steps=4, resolved=resolved,
        grad_sq_se=0.02, b_simple_lower=lower)


def test_the_check_reads_both_sides_by_one_criterion_and_says_how_they_meet():
    """Brute force and training are each resolved or a lower bound; an unresolved one is no number to
    take a ratio of, and a bound in training is checked against the brute-force value."""
    from trainspeed.gradients.rows import assess

    agreement = noise_scale_brute_force.agreement
    resolved, unresolved = assess(1.0, 33.0, 0.02), assess(-0.02, 33.0, 0.05)
    assert unresolved.value is None and unresolved.lower_bound == pytest.approx(330.0)
    assert agreement(in_training(True, 30.0, None), resolved) == "both resolved"
    assert agreement(in_training(False, None, 265.0), unresolved) == "both unresolved"
    assert agreement(in_training(True, 1951.0, None), unresolved).startswith("resolved in training only")
    assert "lower bound in training holds" in agreement(in_training(False, None, 20.0), resolved)
    assert "lower bound in training fails" in agreement(in_training(False, None, 40.0), resolved)
    assert agreement(in_training(None, 1951.0, None), unresolved).startswith("not assessed in training")
