"""Timing training steps the way accelerators need it.

A device queues work and returns at once (CUDA streams, XLA's async execution), so a window is
timed from a synced start to a synced end. The first steps compile graphs (torch.compile, XLA), so
they are timed separately and excluded; a compilation that still happens inside a timed window
is counted, and the bench marks that measurement invalid.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

from trainspeed.targets.base import Target
from trainspeed.workloads.base import Batch, Trainable


@dataclass(frozen=True)
class TimingPlan:
    warmup_steps: int = 3
    windows: int = 5
    min_window_s: float = 0.5
    """Each window runs enough steps to last about this long (estimated from the warm-up)."""
    max_steps_per_window: int = 200


@dataclass(frozen=True)
class Timing:
    first_step_s: float
    """The first step alone, synced: includes compilation where the mode compiles."""
    window_s: tuple[float, ...]
    steps_per_window: int
    compiles_in_windows: int
    final_loss: float

    @property
    def step_times_s(self) -> list[float]:
        return [w / self.steps_per_window for w in self.window_s]

    @property
    def median_step_s(self) -> float:
        return statistics.median(self.step_times_s)


def steps_for_window(step_s: float, plan: TimingPlan) -> int:
    return max(1, min(plan.max_steps_per_window, math.ceil(plan.min_window_s / max(step_s, 1e-9))))


def time_training(target: Target, trainable: Trainable, batch: Batch, plan: TimingPlan) -> Timing:
    """Run the first step, warm up, then time `plan.windows` synced windows of training steps."""
    start = time.perf_counter()
    target.run_step(trainable, batch)
    target.sync()
    first_step_s = time.perf_counter() - start

    start = time.perf_counter()
    for _ in range(plan.warmup_steps):
        loss = target.run_step(trainable, batch)
    target.sync()
    warmup_step_s = (time.perf_counter() - start) / max(plan.warmup_steps, 1)
    steps = steps_for_window(warmup_step_s, plan)

    compiles_before = target.compile_count()
    window_s = []
    for _ in range(plan.windows):
        start = time.perf_counter()
        for _ in range(steps):
            loss = target.run_step(trainable, batch)
        target.sync()
        window_s.append(time.perf_counter() - start)
    compiles = target.compile_count() - compiles_before
    return Timing(first_step_s, tuple(window_s), steps, compiles, float(loss))
