"""Timing waits for the device: without the sync an XLA window measures only tracing."""

import pytest
import torch

from trainspeed.bench.timing import TimingPlan, time_training
from trainspeed.targets import available_targets, get_target
from trainspeed.workloads import get_workload


def _completed_xla_executions() -> int:
    """Graphs the XLA device has finished executing (the metric is recorded on completion)."""
    import torch_xla.debug.metrics as met

    data = met.metric_data("ExecuteTime")
    return int(data[0]) if data else 0


@pytest.mark.slow
@pytest.mark.skipif(available_targets()["xla:lazy:fp32"] is not None, reason="torch_xla not installed")
def test_an_xla_step_runs_only_at_the_sync_so_each_window_ends_with_its_steps_executed():
    workload = get_workload("mahjong")
    target = get_target("xla:lazy:fp32")
    trainable = target.prepare(workload.build("tiny"))
    batch = target.move_batch(workload.synthetic_batch("tiny", 16, torch.Generator().manual_seed(0)))
    target.run_step(trainable, batch)
    target.sync()

    # The naive port: a step with neither the graph cut nor the wait records work, runs none.
    before = _completed_xla_executions()
    loss = trainable.train_step(batch)
    assert _completed_xla_executions() == before
    target.after_step()
    target.sync()
    assert _completed_xla_executions() == before + 1 and torch.isfinite(loss.cpu())

    # The bench's windows: every window closes only after each of its steps has executed.
    executed_at_sync: list[int] = []
    real_sync = target.sync

    def counting_sync() -> None:
        real_sync()
        executed_at_sync.append(_completed_xla_executions())

    target.sync = counting_sync
    plan = TimingPlan(warmup_steps=1, windows=3, min_window_s=1e-6, max_steps_per_window=2)
    timing = time_training(target, trainable, batch, plan)
    window_ends = executed_at_sync[-plan.windows - 1 :]
    assert [b - a for a, b in zip(window_ends, window_ends[1:])] == [timing.steps_per_window] * plan.windows


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
