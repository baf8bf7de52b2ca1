"""The gradient noise scale a run measures: the closed-form least-squares case on one rank (micro-
batches) and on two ranks, within 10% of the exact |G|^2, tr(Sigma) and B_simple; the rows, the
summary and the refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from child_commands import EXAMPLES, run_child, run_ok
from train_runs import TINY_RUN

from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.gradients.noise_scale import NoiseScaleMeter, split_batch, two_batch_estimates
from trainspeed.workloads.base import Trainable

LEAST_SQUARES = ["--workload", "least_squares_workload:LeastSquaresWorkload", "--size", "d16", "--threads", "1",
                 "--no-progress", "--noise-scale-smoothing", "0.999", "--log-every", "50"]
TOLERANCE = 0.10


def _rows(run_dir: Path, kind: str) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row["kind"] == kind]


@pytest.fixture(scope="module")
def least_squares_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100,000 least-squares samples of dimension 16, written by the example and `data from-arrays`."""
    folder = tmp_path_factory.mktemp("least_squares")
    arrays = folder / "lsq.npz"
    made = run_child([sys.executable, str(EXAMPLES / "least_squares_workload.py"), str(arrays), "--samples", "100000"],
                     timeout=120)
    assert made.returncode == 0, made.stderr
    run_ok("data", "from-arrays", str(arrays), "--out", str(folder / "data"), timeout=120)
    return folder / "data"


def _exact() -> tuple[float, float]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        from least_squares_workload import exact_noise_scale
    finally:
        sys.path.remove(str(EXAMPLES))
    exact = exact_noise_scale("d16")
    return exact.grad_sq, exact.trace_sigma


@pytest.mark.e2e
@pytest.mark.parametrize("ranks", [
    pytest.param(["--batch-size-per-device", "256", "--noise-scale-micro-batches", "4", "--steps", "300"],
                 id="1-rank-micro-batches"),
    pytest.param(["--nproc", "2", "--batch-schedule", "256@0,512@38400", "--max-batch-per-device", "128",
                  "--samples", "76800"], id="2-ranks-batch-schedule-past-the-cap"),
])
def test_the_estimate_of_least_squares_at_fixed_weights_is_within_10_percent_of_the_closed_form(
        least_squares_data: Path, tmp_path: Path, ranks: list[str]) -> None:
    """Two ranks switch halfway from 128 per device to 256 in two micro-batches of 128 (a batch
    schedule past the memory cap): each micro-batch measures as one step of the same batches."""
    out = tmp_path / "run"
    run_ok("train", *LEAST_SQUARES, *ranks, "--data", str(least_squares_data), "--out", str(out),
           path=(EXAMPLES,), timeout=300)
    grad_sq, trace_sigma = _exact()
    last = _rows(out, "noise-scale")[-1]
    assert last["method"] == ("ranks" if "--nproc" in ranks else "micro-batches") and last["biased"] is False
    assert (last["small_batch"], last["big_batch"]) == ((128, 256) if "--nproc" in ranks else (64, 256))
    assert last["grad_sq_avg"] == pytest.approx(grad_sq, rel=TOLERANCE)
    assert last["trace_sigma_avg"] == pytest.approx(trace_sigma, rel=TOLERANCE)
    assert last["b_simple_avg"] == pytest.approx(trace_sigma / grad_sq, rel=TOLERANCE)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["noise_scale"]["model"] == pytest.approx(trace_sigma / grad_sq, rel=TOLERANCE)
    if "--batch-schedule" in ranks:
        (switch,) = _rows(out, "batch-switch")
        assert (switch["samples"], switch["batch_size_per_device"], switch["micro_batches"]) == (38400, 256, 2)


def test_the_two_batch_estimators_invert_the_expected_squared_norms() -> None:
    """E|G_b|^2 = |G|^2 + tr(Sigma)/b: from the expectations at two batches both come back."""
    grad_sq, trace_sigma = 2.0, 300.0
    small, big = grad_sq + trace_sigma / 8, grad_sq + trace_sigma / 64
    assert two_batch_estimates(small, big, 8, 64) == pytest.approx((grad_sq, trace_sigma))


def test_a_batch_is_split_into_equal_slices_of_every_tensor_and_a_ragged_one_is_refused() -> None:
    batch = {"x": torch.arange(12).reshape(6, 2), "y": torch.arange(6)}
    parts = split_batch(batch, 3)
    assert [part["y"].tolist() for part in parts] == [[0, 1], [2, 3], [4, 5]]
    assert torch.equal(torch.cat([part["x"] for part in parts]), batch["x"])
    with pytest.raises(Exception, match="divisible by 4"):
        split_batch(batch, 4)
    permuted = split_batch(batch, 2, torch.tensor([5, 0, 3, 1, 4, 2]))
    assert [part["y"].tolist() for part in permuted] == [[5, 0, 3], [1, 4, 2]]
    assert permuted[0]["x"].tolist() == [[10, 11], [0, 1], [6, 7]]


def test_a_one_rank_run_writes_noise_scale_rows_of_the_previous_step_marked_biased(tmp_path) -> None:
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "8",
                 "--num-workers", "0", "--out", str(out)]) == 0
    rows = _rows(out, "noise-scale")
    assert [row["step"] for row in rows] == [2, 4, 6, 8]
    assert {(row["method"], row["biased"], row["small_batch"], row["big_batch"]) for row in rows} == \
        {("previous-step", True, 8, 16)}
    assert rows[0]["window_steps"] == 1  # the first step has no previous gradient
    assert [row["window_steps"] for row in rows[1:]] == [2, 2, 2]
    for row in rows:  # the window's ratio is its two estimates' (None where |G|^2 came out <= 0)
        assert row["b_simple"] == (row["trace_sigma"] / row["grad_sq"] if row["grad_sq"] > 0 else None)


def test_noise_scale_off_writes_no_rows_and_no_summary_value(tmp_path) -> None:
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "4",
                 "--num-workers", "0", "--noise-scale", "off", "--out", str(out)]) == 0
    assert _rows(out, "noise-scale") == []
    assert json.loads((out / "summary.json").read_text())["noise_scale"] is None


@pytest.mark.parametrize(("flags", "said"), [
    (["--noise-scale-micro-batches", "3"], "--noise-scale-micro-batches 3 must divide --batch-size-per-device 8"),
    (["--noise-scale-micro-batches", "2", "--nproc", "2"], "is for one rank"),
    (["--noise-scale-micro-batches", "2", "--noise-scale", "off"], "--noise-scale off does not measure"),
    (["--noise-scale-smoothing", "1"], "--noise-scale-smoothing must be in [0, 1)"),
    (["--noise-scale", "maybe"], "invalid choice"),
])
def test_impossible_noise_scale_settings_are_one_line_before_training(tmp_path, cli_error, flags, said) -> None:
    message = cli_error("train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "4",
                        "--out", str(tmp_path / "run"), *flags)
    assert said in message
    assert not (tmp_path / "run").exists()


def test_micro_batches_are_refused_for_a_workload_that_trains_two_networks_in_phases(tmp_path, cli_error) -> None:
    message = cli_error("train", "--workload", "stylegan3", "--size", "tiny-t", "--synthetic-data", "--steps", "2",
                        "--batch-size-per-device", "4", "--noise-scale-micro-batches", "2", "--out", str(tmp_path / "r"))
    assert "trains 2" in message and "drop it" in message


@pytest.mark.e2e
def test_plot_of_a_run_directory_draws_its_loss_and_noise_scale_against_samples(tiny_run, tmp_path) -> None:
    stem = tmp_path / "figure"
    assert main(["plot", str(tiny_run), "--out", str(stem)]) == 0
    assert stem.with_suffix(".png").stat().st_size > 0
    assert "Gradient noise scale" in stem.with_suffix(".svg").read_text()


class HandWrittenUpdate(Trainable):
    """A step that updates its weights itself, as a compiled optimizer step may: no step hooks run."""

    def __init__(self) -> None:
        super().__init__({"model": torch.nn.Linear(2, 1)})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"model": torch.optim.SGD(self.networks["model"].parameters(), lr=0.1)}

    def train_step(self, batch):
        loss = self.networks["model"](batch["x"]).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            for parameter in self.networks["model"].parameters():
                parameter -= 0.1 * parameter.grad
                parameter.grad = None
        return loss.detach()


def test_micro_batches_refuse_a_step_that_runs_no_optimizer_step_hooks() -> None:
    trainable = HandWrittenUpdate()
    trainable.setup_optimizers()
    meter = NoiseScaleMeter(trainable, world_size=1, samples_per_rank=8, micro_batches=2, smoothing=0.9)
    meter.attach("single", {})
    with pytest.raises(UsageError, match="without its step hooks"):
        meter.run_step(trainable.train_step, {"x": torch.randn(8, 2)})
