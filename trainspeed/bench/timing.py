"""Timing training steps the way accelerators need it.

A device queues work and returns at once (CUDA streams, XLA's async execution), so a window is
timed from a synced start to a synced end. The first steps compile graphs (torch.compile, XLA), so
they are timed separately and excluded; a compilation that still happens inside a timed window
is counted, and the bench marks that measurement invalid.

Window length: warm-up steps can be far slower than later steps (CUDA-graph recording, XLA's
second compile), so the steps per window are sized from one synced step after the warm-up, and a
window that still comes out shorter than `min_window_s` makes every window start again with more
steps. All kept windows have the same number of steps; only the cap on steps per window can leave
a window short, and the timing says so.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Union

from trainspeed.bench.config import TimingPlan

if TYPE_CHECKING:  # the timing itself needs no torch: the bench of exported steps times JAX programs with it
    import torch

    from trainspeed.targets.base import Target
    from trainspeed.workloads.base import Batch, Trainable

BatchSource = Callable[[], "Batch"]
"""Returns the batch of the next step on the device; called inside the timed steps."""

GROWTH_MARGIN = 1.2
"""A short window's step count grows by its shortfall times this, so the next try clears the minimum."""


@dataclass(frozen=True)
class Timing:
    first_step_s: float
    """The first step alone, synced: includes compilation where the mode compiles."""
    window_s: tuple[float, ...]
    """Real seconds of each kept window, from a synced start to a synced end."""
    steps_per_window: int
    compiles_in_windows: int
    """Compilations since the first timed window started (discarded windows included)."""
    final_loss: float
    probe_step_s: float = math.nan
    """One synced step after the warm-up: what the first guess of steps per window came from."""
    restarts: int = 0
    """How often a short window made every window start again with more steps."""
    steps_capped: bool = False
    """The cap on steps per window stopped a window from reaching `min_window_s`."""
    cpu_s_per_wall_s: float = math.nan
    """Process CPU time over wall time in the kept windows: about the number of busy threads."""

    @property
    def step_times_s(self) -> list[float]:
        return [w / self.steps_per_window for w in self.window_s]

    @property
    def median_step_s(self) -> float:
        return statistics.median(self.step_times_s)


def steps_for_window(step_s: float, plan: TimingPlan) -> int:
    wanted = max(plan.min_steps_per_window, math.ceil(plan.min_window_s / max(step_s, 1e-9)))
    return max(1, min(plan.max_steps_per_window, wanted))


def grown_steps(steps: int, short_window_s: float, plan: TimingPlan) -> int:
    """Steps for the next try after a window of `steps` lasted only `short_window_s`."""
    wanted = math.ceil(steps * GROWTH_MARGIN * plan.min_window_s / max(short_window_s, 1e-9))
    return min(plan.max_steps_per_window, max(steps + 1, wanted))


def _as_source(batches: Union["Batch", BatchSource]) -> BatchSource:
    """A batch dict is the device feed: the same device batch every step."""
    if callable(batches):
        return batches
    return lambda: batches


def _timed_steps(target: Target, trainable: Trainable, next_batch: BatchSource, steps: int) -> tuple[float, float, torch.Tensor]:
    """Run `steps` steps and sync; (wall seconds, CPU seconds, last loss). The caller has synced
    just before (each window starts where the previous one's closing sync left off)."""
    cpu_start, start = time.process_time(), time.perf_counter()
    for _ in range(steps):
        loss = target.run_step(trainable, next_batch())
    target.sync()
    return time.perf_counter() - start, time.process_time() - cpu_start, loss


def time_training(target: "Target | Any", trainable: "Trainable | Any", batches: Union["Batch", BatchSource],
                  plan: TimingPlan) -> Timing:
    """Run the first step, warm up, then time `plan.windows` synced windows of training steps.

    `batches` is either one device batch (reused every step) or a function returning each step's
    batch; with a function, whatever it does (a host-to-device copy) is inside the timed steps.
    The target hears where the kept windows start and end (`start_timed_windows`,
    `end_timed_windows`), so what it counts on its device covers the same steps.
    """
    next_batch = _as_source(batches)
    target.sync()
    first_step_s, _, loss = _timed_steps(target, trainable, next_batch, 1)
    for _ in range(plan.warmup_steps):
        loss = target.run_step(trainable, next_batch())
    target.sync()
    probe_step_s, _, loss = _timed_steps(target, trainable, next_batch, 1)
    steps = steps_for_window(probe_step_s, plan)

    compiles_before = target.compile_count()
    restarts = 0
    while True:
        target.start_timed_windows()
        window_s: list[float] = []
        cpu_s = 0.0
        for _ in range(plan.windows):
            wall, cpu, loss = _timed_steps(target, trainable, next_batch, steps)
            window_s.append(wall)
            cpu_s += cpu
            if wall < plan.min_window_s and steps < plan.max_steps_per_window:
                break
        if min(window_s) >= plan.min_window_s or steps >= plan.max_steps_per_window:
            break
        steps = grown_steps(steps, window_s[-1], plan)
        restarts += 1
    target.end_timed_windows(steps * len(window_s))
    return Timing(
        first_step_s=first_step_s,
        window_s=tuple(window_s),
        steps_per_window=steps,
        compiles_in_windows=target.compile_count() - compiles_before,
        final_loss=float(loss),
        probe_step_s=probe_step_s,
        restarts=restarts,
        steps_capped=min(window_s) < plan.min_window_s,
        cpu_s_per_wall_s=cpu_s / max(sum(window_s), 1e-12),
    )
