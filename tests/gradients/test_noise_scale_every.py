"""The meter that measures one step in K: which steps it splits into micro-batches, the moving
averages' weights when measurements are K steps apart, what its rows and checkpoints say of it, and
that a row written before it is read as it was."""

from __future__ import annotations

import json
import math

import pytest
import torch

from trainspeed.gradients.noise_scale import NoiseScaleMeter
from trainspeed.gradients.rows import AverageWeights, NoiseScaleRecord, ema_weight_sq_sum
from trainspeed.rows import Source, parse_row, row_line
from trainspeed.workloads.base import Trainable


class Regression(Trainable):
    """y = w . x with a squared loss, Adam: gradients that are numbers and differ from batch to batch."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        super().__init__({"model": torch.nn.Linear(4, 1)})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"model": torch.optim.Adam(self.networks["model"].parameters(), lr=1e-3)}

    def train_step(self, batch):
        loss = (self.networks["model"](batch["x"]).squeeze(1) - batch["y"]).pow(2).mean()
        loss.backward()
        self.optimizers["model"].step()
        self.optimizers["model"].zero_grad(set_to_none=True)
        return loss.detach()


def _meter(**options) -> tuple[Regression, NoiseScaleMeter]:
    trainable = Regression()
    trainable.setup_optimizers()
    meter = NoiseScaleMeter(trainable, world_size=1, samples_per_rank=16, micro_batches=2, smoothing=0.9, **options)
    meter.attach("single", {})
    return trainable, meter


def _batch(step: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(step)
    x = torch.randn(16, 4, generator=generator)
    return {"x": x, "y": x.sum(1) + torch.randn(16, generator=generator)}


def test_one_rank_splits_one_step_in_k_into_its_micro_batches_and_trains_the_others_whole() -> None:
    _, meter = _meter(every=4)
    assert [meter.split(step, 16)[0] for step in range(10)] == [2, 1, 1, 1, 2, 1, 1, 1, 2, 1]
    assert meter.split(1, 16)[1] is None and meter.split(4, 16)[1] is not None  # a random partition where split
    _, dense = _meter(every=4, dense_steps=3)  # auto's first reading: every step below 3
    assert [dense.split(step, 16)[0] for step in range(6)] == [2, 2, 2, 1, 2, 1]
    _, capped = _meter(every=4, plain_parts=2)  # split anyway by a memory cap: measured every time
    assert [capped.split(step, 16)[0] for step in range(4)] == [2, 2, 2, 2]
    _, every_step = _meter(every=1)
    assert [every_step.split(step, 16)[0] for step in range(4)] == [2, 2, 2, 2]


def test_the_moving_averages_decay_per_step_between_measurements_and_the_rows_count_them() -> None:
    trainable, meter = _meter(every=4)
    for step in range(12):
        meter.run_step(trainable.train_step, _batch(step), step)
    norms = meter.networks["model"]
    assert (norms.count, norms.measured_steps, norms.last_step) == (3, 3, 8)
    expected = AverageWeights()
    for decay in (0.9, 0.9**4, 0.9**4):  # each measurement at weight 1 - 0.9, decayed 0.9 per step since
        expected.add(decay, 0.1)
    assert (norms.weights.correction, norms.weights.raw_weight_sq) == pytest.approx(
        (expected.correction, expected.raw_weight_sq))
    (row,) = meter.read_window(12, 12 * 16, lambda values: values)
    assert (row.window_steps, row.measured_steps, row.measure_every) == (3, 3, 4)
    assert row.measured_fraction == pytest.approx(3 / 12)


def test_average_weights_are_those_of_the_decayed_sum_they_normalise() -> None:
    """Measurements close together keep their weight beside one far later: each counts alike, its
    weight fading with the steps since it was made."""
    steps, beta = [0, 1, 2, 3, 35, 67], 0.99
    weights = AverageWeights()
    for before, step in zip([None, *steps], steps):
        weights.add(beta ** (step - before if before is not None else 1), 1 - beta)
    raw = [(1 - beta) * beta ** (steps[-1] - step) for step in steps]
    assert weights.correction == pytest.approx(sum(raw))
    assert weights.weight_sq_sum == pytest.approx(sum((w / sum(raw)) ** 2 for w in raw))
    assert 1 / weights.weight_sq_sum > 5  # the four close together still count
    constant = AverageWeights.constant(0.99, 50)
    assert constant.weight_sq_sum == pytest.approx(ema_weight_sq_sum(0.99, 50))
    every_step = AverageWeights()
    for _ in range(50):
        every_step.add(0.99, 0.01)
    assert (every_step.correction, every_step.weight_sq_sum) == pytest.approx((constant.correction,
                                                                               constant.weight_sq_sum))
    assert AverageWeights().weight_sq_sum == 1.0


def test_a_checkpoint_keeps_the_weights_and_one_written_before_them_reads_as_measured_every_step() -> None:
    trainable, meter = _meter(every=4)
    for step in range(9):
        meter.run_step(trainable.train_step, _batch(step), step)
    state = json.loads(json.dumps(meter.state()))  # what a checkpoint holds: plain values
    _, resumed = _meter(every=4)
    resumed.load_state(state)
    norms = resumed.networks["model"]
    assert (norms.weights, norms.measured_steps, norms.last_step) == (
        meter.networks["model"].weights, 3, 8)
    older = json.loads(json.dumps(state))
    for saved in older["networks"].values():
        for key in ("correction", "raw_weight_sq", "measured_steps", "last_step"):
            del saved[key]
    _, before = _meter(every=4)
    before.load_state(older)
    constant = AverageWeights.constant(0.9, 3)
    kept = before.networks["model"].weights
    assert (kept.correction, kept.weight_sq_sum) == pytest.approx((constant.correction, constant.weight_sq_sum))
    assert (before.networks["model"].measured_steps, before.networks["model"].last_step) == (3, None)


def test_a_noise_scale_row_written_before_the_meter_counted_its_steps_reads_with_them_unknown() -> None:
    row = NoiseScaleRecord(step=4, samples=64, network="model", method="micro-batches", biased=False, small_batch=8,
                           big_batch=16, grad_sq=1.0, trace_sigma=10.0, b_simple=10.0, grad_sq_avg=1.0,
                           trace_sigma_avg=10.0, b_simple_avg=10.0, window_steps=4, grad_sq_se=0.1,
                           grad_sq_avg_se=0.1, resolved=True, b_simple_lower=None)
    record = json.loads(row_line(row))
    for key in ("measured_steps", "measured_fraction", "measure_every"):
        del record[key]
    older, _ = parse_row(NoiseScaleRecord, record, Source("metrics.jsonl", 1))
    assert (older.measured_steps, older.measured_fraction, older.measure_every) == (None, None, None)
    assert older.reading.value == 10.0
