"""Timing waits for the device: without the sync an XLA window measures only tracing."""

import time

import pytest
import torch

from trainspeed.bench.timing import TimingPlan, time_training
from trainspeed.targets import available_targets, get_target
from trainspeed.workloads import get_workload


@pytest.mark.skipif(available_targets()["xla:lazy:fp32"] is not None, reason="torch_xla not installed")
def test_an_xla_window_without_sync_measures_only_tracing():
    workload = get_workload("mahjong")
    target = get_target("xla:lazy:fp32")
    trainable = target.prepare(workload.build("small"))
    batch = target.move_batch(workload.synthetic_batch("small", 128, torch.Generator().manual_seed(0)))
    plan = TimingPlan(warmup_steps=1, windows=1, min_window_s=0.0, max_steps_per_window=1)
    synced = time_training(target, trainable, batch, plan)  # also compiles and caches the step graph

    # The naive port: the same step with neither the graph cut nor the wait for the device.
    start = time.perf_counter()
    loss = trainable.train_step(batch)
    naive_window_s = time.perf_counter() - start
    start = time.perf_counter()
    target.after_step()
    target.sync()
    deferred_s = time.perf_counter() - start

    assert naive_window_s < 0.5 * synced.window_s[0], (naive_window_s, synced.window_s)
    assert deferred_s > naive_window_s  # the step's real work ran only at the sync
    assert torch.isfinite(loss.cpu())


def test_windows_are_sized_from_the_warmup():
    workload = get_workload("mahjong")
    target = get_target("cpu:eager:fp32")
    trainable = target.prepare(workload.build("tiny"))
    batch = workload.synthetic_batch("tiny", 16, torch.Generator().manual_seed(0))
    timing = time_training(target, trainable, batch, TimingPlan(warmup_steps=2, windows=3, min_window_s=0.05))
    assert len(timing.window_s) == 3
    assert timing.steps_per_window >= 1
    assert timing.compiles_in_windows == 0
    assert timing.median_step_s == sorted(timing.step_times_s)[1]
