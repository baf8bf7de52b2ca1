"""Timing waits for the device (without the sync an XLA window measures only tracing), and every
window lasts the minimum asked, whatever the warm-up steps took."""

import time

import pytest
import torch
from toy_workload import ToyWorkload, with_adamw

from trainspeed.bench.config import TimingPlan
from trainspeed.bench.timing import time_training
from trainspeed.targets import available_targets, get_target
from trainspeed.targets.base import TargetSpec
from trainspeed.targets.cpu import CpuTarget
from trainspeed.workloads import get_workload


def _completed_xla_executions() -> int:
    """Graphs the XLA device has finished executing (the metric is recorded on completion)."""
    import torch_xla.debug.metrics as met

    data = met.metric_data("ExecuteTime")
    return int(data[0]) if data else 0


@pytest.mark.slow
@pytest.mark.skipif(available_targets()["xla:lazy:fp32"] is not None, reason="torch_xla not installed")
def test_an_xla_step_runs_only_at_the_sync_so_each_window_ends_with_its_steps_executed():
    """The toy with AdamW: a real step with optimizer state, whose graphs compile in a fraction of
    the time Mahjong's network takes; when a graph runs is the target's doing, not the network's."""
    workload = with_adamw()
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


def test_every_window_holds_at_least_the_steps_asked_for():
    """A pipelined remote target overlaps steps only inside a window: a short minimum window must
    not leave it one step per window."""
    workload = get_workload("mahjong")
    target = get_target("cpu:eager:fp32")
    trainable = target.prepare(workload.build("tiny"))
    batch = workload.synthetic_batch("tiny", 8, torch.Generator().manual_seed(0))
    plan = TimingPlan(warmup_steps=0, windows=2, min_window_s=1e-6, min_steps_per_window=3)
    assert time_training(target, trainable, batch, plan).steps_per_window == 3


class SlowStartTarget(CpuTarget):
    """A CPU target whose first `slow_steps` steps take `slow_s` and later ones `fast_s`, as a
    CUDA-graph recording or XLA's second compile makes the warm-up slower than the steady steps."""

    def __init__(self, slow_steps: int, slow_s: float = 0.1, fast_s: float = 0.005) -> None:
        super().__init__(TargetSpec.parse("cpu:eager:fp32"))
        self.slow_steps, self.slow_s, self.fast_s = slow_steps, slow_s, fast_s
        self.steps = 0

    def run_step(self, trainable, batch):
        self.steps += 1
        time.sleep(self.slow_s if self.steps <= self.slow_steps else self.fast_s)
        return super().run_step(trainable, batch)


def _tiny(target):
    toy = ToyWorkload()
    return target.prepare(toy.build("tiny")), toy.synthetic_batch("tiny", 8, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("slow_steps", [3, 4], ids=["slow-warmup", "slow-warmup-and-probe"])
def test_every_window_lasts_the_minimum_when_steps_speed_up_after_the_warmup(slow_steps):
    """Slow warm-up steps must not size the windows: with 3 slow steps (first + 2 warm-up) the
    post-warm-up probe step sizes them; with 4 the probe is slow too, and the short first window
    makes every window start again with more steps. A fast step (1 ms) would have to be held up
    200-fold, in three windows in a row, for a one-step window to reach the minimum on its own; the
    bounds asserted are lower bounds that sleeping guarantees."""
    target = SlowStartTarget(slow_steps, slow_s=0.3, fast_s=0.001)
    trainable, batch = _tiny(target)
    plan = TimingPlan(warmup_steps=2, windows=3, min_window_s=0.2)
    timing = time_training(target, trainable, batch, plan)
    assert len(timing.window_s) == plan.windows
    assert min(timing.window_s) >= plan.min_window_s, timing
    assert not timing.steps_capped
    if slow_steps == 4:  # the slow probe sized windows of one step: they had to grow
        assert timing.restarts >= 1 and timing.probe_step_s >= target.slow_s


def test_the_cap_on_steps_per_window_is_reported_when_it_leaves_a_window_short():
    """Three capped steps of 2 ms against a 5 s minimum: short on any machine, however loaded."""
    target = SlowStartTarget(slow_steps=0, fast_s=0.002)
    trainable, batch = _tiny(target)
    plan = TimingPlan(warmup_steps=1, windows=2, min_window_s=5.0, max_steps_per_window=3)
    timing = time_training(target, trainable, batch, plan)
    assert timing.steps_per_window == 3 and timing.steps_capped
    assert len(timing.window_s) == 2 and max(timing.window_s) < plan.min_window_s
