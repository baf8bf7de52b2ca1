"""The gradient noise scale a run measures: the closed-form least-squares case on one rank (micro-
batches) and on two ranks, within 10% of the exact |G|^2, tr(Sigma) and B_simple; whether |G|^2 is
resolved beside its noise, on synthetic gradients whose |G|^2 is known; the rows, the summary and
the refusals."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from child_commands import EXAMPLES
from train_runs import TINY_RUN

from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.gradients.noise_scale import NoiseScaleMeter, split_batch, two_batch_estimates
from trainspeed.gradients.rows import (
    RESOLVED_Z,
    NoiseScaleRecord,
    assess,
    ema_weight_sq_sum,
    noise_scale_allows,
    noise_scale_at,
    standard_error,
    summary_fields,
)
from trainspeed.train.rows import RunSummary
from trainspeed.workloads.base import Trainable

LEAST_SQUARES = ["--workload", "least_squares_workload:LeastSquaresWorkload", "--size", "d16", "--threads", "1",
                 "--no-progress", "--noise-scale-smoothing", "0.999", "--log-every", "50"]
TOLERANCE = 0.10


def _rows(run_dir: Path, kind: str) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row["kind"] == kind]


@pytest.fixture(scope="module")
def least_squares_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100,000 least-squares samples of dimension 16, as the example writes them (its `samples`,
    seed 0), made into shards by `data from-arrays`, both in this process: what is tested is the
    estimate of the runs that read them."""
    folder = tmp_path_factory.mktemp("least_squares")
    arrays = folder / "lsq.npz"
    sys.path.insert(0, str(EXAMPLES))
    try:
        from least_squares_workload import samples
    finally:
        sys.path.remove(str(EXAMPLES))
    columns = samples(16, 100_000, torch.Generator().manual_seed(0))
    np.savez(arrays, **{name: tensor.numpy().astype(np.float32) for name, tensor in columns.items()})
    assert main(["data", "from-arrays", str(arrays), "--out", str(folder / "data")]) == 0
    return folder / "data"


def _exact() -> tuple[float, float]:
    sys.path.insert(0, str(EXAMPLES))
    try:
        from least_squares_workload import exact_noise_scale
    finally:
        sys.path.remove(str(EXAMPLES))
    exact = exact_noise_scale("d16")
    return exact.grad_sq, exact.trace_sigma


@pytest.mark.parametrize("ranks", [
    pytest.param(["--batch-size-per-device", "256", "--noise-scale-micro-batches", "4", "--steps", "300",
                  "--noise-scale-every", "1"], id="1-rank-micro-batches"),
    pytest.param(["--batch-size-per-device", "256", "--noise-scale-micro-batches", "4", "--steps", "2400",
                  "--noise-scale-every", "8"], id="1-rank-micro-batches-one-step-in-8"),
    pytest.param(["--nproc", "2", "--batch-schedule", "256@0,512@38400", "--max-batch-per-device", "128",
                  "--samples", "76800"], id="2-ranks-batch-schedule-past-the-cap", marks=pytest.mark.e2e),
])
def test_the_estimate_of_least_squares_at_fixed_weights_is_within_10_percent_of_the_closed_form(
        least_squares_data: Path, tmp_path: Path, ranks: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ranks switch halfway from 128 per device to 256 in two micro-batches of 128 (a batch
    schedule past the memory cap): each micro-batch measures as one step of the same batches. One
    rank measuring one step in 8 over 8 times the steps holds as many measurements, and is as close:
    which steps it measures does not bias it."""
    out = tmp_path / "run"
    # The command in this process (one rank trains in it; two are its children, which import the
    # workload from PYTHONPATH): what is tested is the estimate, not the command's own process.
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")])))
    assert main(["train", *LEAST_SQUARES, *ranks, "--data", str(least_squares_data), "--num-workers", "0",
                 "--out", str(out)]) == 0
    grad_sq, trace_sigma = _exact()
    last = _rows(out, "noise-scale")[-1]
    assert last["method"] == ("ranks" if "--nproc" in ranks else "micro-batches") and last["biased"] is False
    assert (last["small_batch"], last["big_batch"]) == ((128, 256) if "--nproc" in ranks else (64, 256))
    assert last["grad_sq_avg"] == pytest.approx(grad_sq, rel=TOLERANCE)
    assert last["trace_sigma_avg"] == pytest.approx(trace_sigma, rel=TOLERANCE)
    assert last["b_simple_avg"] == pytest.approx(trace_sigma / grad_sq, rel=TOLERANCE)
    assert last["resolved"] is True and last["grad_sq_avg"] > RESOLVED_Z * last["grad_sq_avg_se"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["noise_scale"]["model"] == pytest.approx(trace_sigma / grad_sq, rel=TOLERANCE)
    every = int(ranks[ranks.index("--noise-scale-every") + 1]) if "--noise-scale-every" in ranks else 1
    assert last["measure_every"] == every and last["measured_fraction"] == pytest.approx(1 / every, abs=0.01)
    assert last["measured_steps"] == pytest.approx(last["step"] / every, abs=1)
    (reading,) = summary["noise_scale_readings"].values()
    assert reading["measured_fraction"] == last["measured_fraction"]
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
    assert rows[0]["grad_sq_se"] is None and rows[0]["grad_sq_avg_se"] is None  # one step: its noise unknown
    assert rows[0]["resolved"] is False and rows[0]["b_simple_avg"] is None and rows[0]["b_simple_lower"] is None
    for row in rows:  # a ratio only where |G|^2 is above 2 standard errors; a lower bound otherwise
        assert row["schema_version"] == 2
        window_resolved = row["grad_sq_se"] is not None and row["grad_sq"] > RESOLVED_Z * row["grad_sq_se"]
        assert row["b_simple"] == (row["trace_sigma"] / row["grad_sq"] if window_resolved else None)
        resolved = row["grad_sq_avg_se"] is not None and row["grad_sq_avg"] > RESOLVED_Z * row["grad_sq_avg_se"]
        assert row["resolved"] is resolved
        assert row["b_simple_avg"] == (row["trace_sigma_avg"] / row["grad_sq_avg"] if resolved else None)
        if not resolved and row["grad_sq_avg_se"] is not None:
            assert row["b_simple_lower"] == pytest.approx(
                row["trace_sigma_avg"] / (max(row["grad_sq_avg"], 0.0) + RESOLVED_Z * row["grad_sq_avg_se"]))
    summary = json.loads((out / "summary.json").read_text())
    (reading,) = summary["noise_scale_readings"].values()
    assert set(reading) >= {"value", "lower_bound", "resolved", "grad_sq_se"}
    if not reading["resolved"]:  # batch 8 is far below B_simple: the last quarter says "at least"
        assert summary["noise_scale"] is None and reading["value"] is None


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


# --- resolved or a lower bound: synthetic gradients of a known |G|^2 ------------------------------

class OneNetwork(Trainable):
    """A trainable whose optimizer only names the network the meter measures: the tests below hand
    the meter each step's squared norms themselves (`ranks_step`), as the averaging hook does."""

    def __init__(self) -> None:
        super().__init__({"model": torch.nn.Linear(1, 1)})
        self.setup_optimizers()

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"model": torch.optim.SGD(self.networks["model"].parameters(), lr=0.1)}

    def train_step(self, batch):
        raise NotImplementedError("the tests hand the meter its squared norms")


def _two_ranks(smoothing: float = 0.99) -> NoiseScaleMeter:
    """Two ranks of 32 samples each (b 32, B 64); each test's two ranks see the same numbers."""
    return NoiseScaleMeter(OneNetwork(), world_size=2, samples_per_rank=32, micro_batches=1, smoothing=smoothing)


def _both_ranks(values: list[float]) -> list[float]:
    return [2 * value for value in values]


def _steps(meter: NoiseScaleMeter, grad_sq: float, trace_sigma: float, steps: int, seed: int,
           dimension: int = 32) -> None:
    """`steps` steps of a gradient with |G|^2 = grad_sq and per-sample covariance trace_sigma/d I:
    rank 0's mean over its b samples, and the mean over both ranks' 2b."""
    generator = torch.Generator().manual_seed(seed)
    true = torch.zeros(dimension)
    true[0] = grad_sq ** 0.5
    spread = (trace_sigma / dimension / meter.small_batch) ** 0.5
    for _ in range(steps):
        halves = torch.randn(2, dimension, generator=generator) * spread
        meter.ranks_step("model", (true + halves[0]).pow(2).sum(), (true + halves.mean(0)).pow(2).sum())


def test_a_true_grad_sq_of_0_is_unresolved_and_read_as_a_lower_bound_above_every_batch() -> None:
    meter = _two_ranks()
    _steps(meter, grad_sq=0.0, trace_sigma=33.0, steps=400, seed=1)
    (record,) = meter.read_window(400, 400 * 64, _both_ranks)
    assert record.resolved is False and record.b_simple_avg is None
    assert record.grad_sq_avg_se is not None and record.grad_sq_avg <= RESOLVED_Z * record.grad_sq_avg_se
    assert record.b_simple_lower == pytest.approx(
        record.trace_sigma_avg / (max(record.grad_sq_avg, 0.0) + RESOLVED_Z * record.grad_sq_avg_se))
    reading = noise_scale_at([record], 400 * 64)
    assert reading is not None and reading.value is None and reading.lower_bound == record.b_simple_lower
    assert reading.larger_than(64) and reading.larger_than(10**9)  # unresolved: larger than any batch tried
    assert noise_scale_allows(10**9, record)
    quarter = meter.last_quarter(0, 400)
    assert quarter is not None and quarter["model"].resolved is False and quarter["model"].lower_bound > 64
    fields = summary_fields(quarter)
    assert fields["noise_scale"] is None and fields["noise_scale_readings"] == quarter


def test_a_clearly_positive_grad_sq_is_resolved_and_its_noise_scale_is_the_value() -> None:
    meter = _two_ranks()
    _steps(meter, grad_sq=1.0, trace_sigma=33.0, steps=400, seed=2)
    (record,) = meter.read_window(400, 400 * 64, _both_ranks)
    assert record.resolved is True and record.b_simple_lower is None
    assert record.grad_sq_avg > 5 * RESOLVED_Z * record.grad_sq_avg_se
    assert record.b_simple_avg == pytest.approx(33.0, rel=0.15)
    reading = noise_scale_at([record], 400 * 64)
    assert reading is not None and reading.value == record.b_simple_avg and not reading.larger_than(64)
    assert noise_scale_allows(16, record) and not noise_scale_allows(64, record)
    quarter = meter.last_quarter(0, 400)
    assert quarter is not None and quarter["model"].value == pytest.approx(33.0, rel=0.15)
    assert summary_fields(quarter)["noise_scale"] == {"model": quarter["model"].value}


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_window_of_non_finite_gradients_gives_no_row_nor_a_summary_reading(bad: float) -> None:
    """A diverged step's squared norms are no numbers, and the moving averages hold them from
    then on: the windows give no row (its |G|^2 would be NaN, which every reader refuses), and
    the last quarter reads the windows before them."""
    meter = _two_ranks()
    _steps(meter, grad_sq=1.0, trace_sigma=33.0, steps=100, seed=2)
    assert len(meter.read_window(100, 100 * 64, _both_ranks)) == 1
    meter.ranks_step("model", torch.tensor(bad), torch.tensor(bad))
    assert meter.read_window(101, 101 * 64, _both_ranks) == []
    _steps(meter, grad_sq=1.0, trace_sigma=33.0, steps=10, seed=3)
    assert meter.read_window(111, 111 * 64, _both_ranks) == []
    quarter = meter.last_quarter(0, 111)
    assert quarter is None or all(value is None or math.isfinite(value) for reading in quarter.values()
                                  for value in (reading.value, reading.grad_sq, reading.trace_sigma))


def test_a_noise_scale_that_overflows_is_no_value() -> None:
    """tr(Sigma) / |G|^2 of a |G|^2 of 1e-310 overflows: no value, and no bound past a float."""
    assert assess(1e-310, 1.0, 1e-320).value is None
    assert assess(-1.0, 1e300, 1e-310).lower_bound is None


def test_the_standard_error_of_the_moving_average_matches_its_spread_and_2_of_them_rarely_resolve_0() -> None:
    """2,000 runs of 150 steps of a true |G|^2 of 0 (two ranks, 8 dimensions): the standard error of
    the moving average (weight 0.95) is its spread over the runs, within 10%, and about 2.3% of the
    runs (one-sided, 2 standard errors) resolve a |G|^2 that is not there."""
    runs, steps, dimension, smoothing, batch = 2000, 150, 8, 0.95, 32
    generator = torch.Generator().manual_seed(3)
    halves = torch.randn(steps, 2, runs, dimension, generator=generator, dtype=torch.float64) * (1.0 / batch) ** 0.5
    small, big = halves[:, 0].pow(2).sum(-1), halves.mean(1).pow(2).sum(-1)
    per_step = 2 * big - small  # (B |G_B|^2 - b |G_b|^2) / (B - b) with B = 2b
    mean = torch.zeros(runs, dtype=torch.float64)
    mean_sq = torch.zeros(runs, dtype=torch.float64)
    for value in per_step:
        mean = smoothing * mean + (1 - smoothing) * value
        mean_sq = smoothing * mean_sq + (1 - smoothing) * value * value
    correction = 1 - smoothing ** steps
    weight_sq_sum = ema_weight_sq_sum(smoothing, steps)
    errors = [standard_error(m / correction, q / correction, weight_sq_sum)
              for m, q in zip(mean.tolist(), mean_sq.tolist())]
    averages = (mean / correction).tolist()
    assert sum(errors) / runs == pytest.approx(float((mean / correction).std()), rel=0.10)
    falsely_resolved = sum(assess(value, 1.0, error).resolved for value, error in zip(averages, errors)) / runs
    assert 0.005 < falsely_resolved < 0.05


def test_the_criterion_and_its_bound() -> None:
    assert ema_weight_sq_sum(0.9, 1) == 1.0 and ema_weight_sq_sum(0.0, 50) == 1.0
    assert ema_weight_sq_sum(0.99, 10**6) == pytest.approx(1 / 199)
    assert ema_weight_sq_sum(0.5, 2) == pytest.approx((1 / 3) ** 2 + (2 / 3) ** 2)  # weights 1/3, 2/3
    assert standard_error(1.0, 1.0, 1.0) is None  # one value: no variance known
    assert standard_error(0.0, 4.0, 0.25) == pytest.approx((4.0 / 0.75 * 0.25) ** 0.5)
    assert assess(1.0, 30.0, 0.4).value == 30.0
    unresolved = assess(-0.5, 30.0, 1.0)
    assert unresolved.value is None and unresolved.lower_bound == 15.0  # |G|^2 taken as 0, not -0.5
    assert "> 15 (unresolved: |G|^2 within its noise of 0)" in unresolved.text()
    assert assess(0.5, -3.0, 1.0).lower_bound is None  # tr(Sigma) not above 0: no bound
    assert assess(5.0, 30.0, None).resolved is False  # noise unknown: never resolved


def test_the_moving_averages_of_the_squared_estimates_survive_a_checkpoint() -> None:
    """A meter that loads another's state and takes the same steps reads what the other reads; a
    state without the squared estimates' average (older) starts anew rather than mix their steps."""
    whole, resumed = _two_ranks(0.9), _two_ranks(0.9)
    _steps(whole, 0.05, 33.0, 60, seed=4)
    state = whole.state()
    assert {"small", "big", "grad_sq_sq", "count"} <= set(state["networks"]["model"])
    resumed.load_state(state)
    _steps(whole, 0.05, 33.0, 40, seed=5)
    _steps(resumed, 0.05, 33.0, 40, seed=5)
    (kept,), (loaded,) = whole.read_window(100, 6400, _both_ranks), resumed.read_window(100, 6400, _both_ranks)
    assert loaded.grad_sq_avg == pytest.approx(kept.grad_sq_avg, rel=1e-5)
    assert loaded.grad_sq_avg_se == pytest.approx(kept.grad_sq_avg_se, rel=1e-4)
    assert loaded.resolved == kept.resolved
    older = _two_ranks(0.9)
    older.load_state({**state, "networks": {"model": {key: value for key, value in state["networks"]["model"].items()
                                                       if key != "grad_sq_sq"}}})
    assert older.networks["model"].count == 0


def test_the_summary_prints_an_unresolved_last_quarter_as_a_lower_bound() -> None:
    readings = {"policy": assess(0.01, 530.0, 1.0), "value": assess(4.0, 80.0, 0.5)}
    summary = RunSummary(
        workload="mahjong", size="tiny", target="cpu:eager:fp32", world_size=1, batch_size_per_device=64,
        global_batch=64, synthetic_data=False, num_workers=1, threads=1, first_step=0, last_step=100, samples=6400,
        wall_s=10.0, paused_s=1.0, end_to_end_samples_per_s=640.0, steady_samples_per_s=None,
        samples_per_s_per_device=640.0, step_time_s=0.1, data_wait_fraction=0.0, data_wait_fraction_worst_rank=0.0,
        steady_data_wait_fraction=None, h2d_s_per_step=0.0, final_loss=1.0, validation=None,
        bench_samples_per_s=None, io_efficiency=None, stopped_by_signal=False, torch_version="2",
        **summary_fields(readings))
    assert summary.noise_scale == {"value": 20.0}
    assert ("gradient noise scale B_simple (last quarter): policy > 263.7 (unresolved: |G|^2 within its noise of 0), "
            "value 20") in summary.lines()
    older = RunSummary(**{**summary.__dict__, "noise_scale": {"policy": 1951.0}, "noise_scale_readings": None})
    (reading,) = older.last_quarter_noise_scale().values()
    assert (reading.value, reading.resolved) == (1951.0, None)  # written before: not assessed


def test_a_version_1_row_reads_as_not_assessed_with_its_value_as_written() -> None:
    from trainspeed.rows import Source, parse_row

    written = {"kind": "noise-scale", "schema_version": 1, "step": 8, "samples": 512, "network": "policy",
               "method": "micro-batches", "biased": False, "small_batch": 32, "big_batch": 64, "grad_sq": 0.1,
               "trace_sigma": 50.0, "b_simple": 500.0, "grad_sq_avg": 0.2, "trace_sigma_avg": 53.0,
               "b_simple_avg": 265.0, "window_steps": 4}
    record, extra = parse_row(NoiseScaleRecord, written, Source("metrics.jsonl", 1))
    assert extra == {} and record.b_simple_avg == 265.0 and record.resolved is None
    assert (record.grad_sq_avg_se, record.b_simple_lower) == (None, None)
    reading = record.reading
    assert (reading.value, reading.lower_bound, reading.resolved) == (265.0, None, None)
    with pytest.raises(UsageError, match="field resolved must be"):
        parse_row(NoiseScaleRecord, {**written, "schema_version": 2, "resolved": "yes"}, Source("metrics.jsonl", 1))


# --- the report: an unresolved window is a lower bound, not a point of the curve ------------------

ONE_RANK = Path(__file__).resolve().parents[2] / "docs" / "results" / "time_to_target_one_rank"
"""A committed run to a goal, whose noise-scale rows are of version 1."""


def _unresolved_at_the_end(tmp_path: Path, last: int = 5) -> tuple[Path, list[dict]]:
    """The committed run with its noise-scale rows as version 2: the last `last` unresolved (a lower
    bound each), and its summary's last quarter unresolved too."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ONE_RANK, run)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    noise = [row for row in rows if row["kind"] == "noise-scale"]
    for index, row in enumerate(noise):
        unresolved = index >= len(noise) - last
        row.update(schema_version=2, grad_sq_se=1.0, grad_sq_avg_se=row["grad_sq_avg"] if unresolved else 1.0,
                   resolved=not unresolved, b_simple_lower=1000.0 + index if unresolved else None)
        if unresolved:
            row["b_simple_avg"] = None
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    summary = json.loads((run / "summary.json").read_text())
    summary.update(noise_scale=None, noise_scale_readings={"policy": {
        "value": None, "lower_bound": 1951.0, "resolved": False, "grad_sq": 0.01, "grad_sq_se": 0.02,
        "trace_sigma": 80.0}})
    (run / "summary.json").write_text(json.dumps(summary))
    return run, noise


def test_the_noise_scale_figure_draws_unresolved_windows_as_lower_bound_markers(tmp_path: Path) -> None:
    from trainspeed.train.figures import LOWER_BOUND_LABEL, LOWER_BOUND_MARKER, noise_scale_figure
    from trainspeed.train.runs import read_run

    run, noise = _unresolved_at_the_end(tmp_path)
    figure = noise_scale_figure([read_run(run)])
    noise_axes = figure.axes[1]
    (curve,) = [line for line in noise_axes.get_lines() if line.get_linestyle() != "None"]
    (bounds,) = [line for line in noise_axes.get_lines() if line.get_marker() == LOWER_BOUND_MARKER]
    assert list(curve.get_xdata()) == [row["samples"] for row in noise[:-5]]  # values only on the curve
    assert list(bounds.get_xdata()) == [row["samples"] for row in noise[-5:]]
    assert list(bounds.get_ydata()) == [row["b_simple_lower"] for row in noise[-5:]]
    assert LOWER_BOUND_LABEL in [text.get_text() for text in noise_axes.get_legend().get_texts()]


def test_the_report_says_an_unresolved_last_quarter_is_a_lower_bound(tmp_path: Path) -> None:
    from trainspeed.train.figures import LOWER_BOUND_LABEL

    run, _ = _unresolved_at_the_end(tmp_path)
    page = tmp_path / "report.html"
    assert main(["report", str(run), "--out", str(page)]) == 0
    html = page.read_text()
    assert "policy &gt; 1,951 (unresolved: |G|^2 within its noise of 0)" in html
    assert LOWER_BOUND_LABEL in html  # the figure's legend, as SVG text
