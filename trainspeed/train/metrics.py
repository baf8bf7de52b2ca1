"""Where a rank's time goes, and how rank 0 records it (JSONL + TensorBoard).

Per step the loop measures three host intervals: waiting for the loader (data wait), copying the
batch to the device (host-to-device, H2D), and the step itself. A window of steps ends at each log
step with a device sync (reading the loss), so the window's wall time is true device time even
where steps are asynchronous. Windows are reduced over ranks: samples/s counts every rank's
samples over the window's wall time, and the data-wait fraction is reported as the mean and the
worst rank (one slow loader stalls everyone at the next all-reduce).

H2D is timed with a sync before and after the copy, which stalls an asynchronous device, so it is
sampled on the first step of each window only.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed.atomic import append_line
from trainspeed.rows import KIND, row_record
from trainspeed.train.distributed import Collectives
from trainspeed.train.rows import METRICS_FILE, WindowRecord

TENSORBOARD_DIR = "tensorboard"


@dataclass
class StepWindow:
    """Host timings of the steps since the last log step, on this rank."""

    started_at: float = field(default_factory=time.perf_counter)
    steps: int = 0
    data_wait_s: float = 0.0
    h2d_s: float = 0.0
    h2d_measured_steps: int = 0
    samples: int = 0
    """Samples of the window's steps, every rank's."""
    holds_switch: bool = False
    """The window holds steps that settle a batch schedule's new batch (`trainspeed.train.loop`)."""
    split_steps: int = 0
    """Steps run over more than one micro-batch (the meter's slices, or the memory cap's)."""
    parts: int = 1
    """The most micro-batches a step of the window ran over."""

    def add_step(self, data_wait_s: float, h2d_s: float | None, samples: int, parts: int = 1) -> None:
        self.steps += 1
        self.samples += samples
        if parts > 1:
            self.split_steps += 1
            self.parts = max(self.parts, parts)
        self.data_wait_s += data_wait_s
        if h2d_s is not None:
            self.h2d_s += h2d_s
            self.h2d_measured_steps += 1

    @property
    def wants_h2d_sample(self) -> bool:
        return self.h2d_measured_steps == 0


def reduce_window(
    window: StepWindow,
    collectives: Collectives,
    *,
    step: int,
    epoch: int,
    loss: float,
    lr: float,
    global_batch: int,
    elapsed_s: float,
    run_train_s: float,
    run_wall_s: float,
    samples: int | None = None,
) -> WindowRecord:
    """Close a window (call after the device sync) and reduce it over ranks. `global_batch`: the
    batch of the window's steps; `samples`: the run's after them."""
    wall_s = max(time.perf_counter() - window.started_at, 1e-9)
    world_size = collectives.context.world_size
    fraction = window.data_wait_s / wall_s
    h2d_per_step = window.h2d_s / max(window.h2d_measured_steps, 1)
    wait_sum, wall_sum, h2d_sum, loss_sum = collectives.sum([window.data_wait_s, wall_s, h2d_per_step, loss])
    (worst_fraction, slowest_wall) = collectives.max([fraction, wall_s])
    steps = max(window.steps, 1)
    return WindowRecord(
        step=step,
        epoch=epoch,
        loss=loss_sum / world_size,
        lr=lr,
        samples_per_s=window.samples / slowest_wall,
        step_time_s=slowest_wall / steps,
        data_wait_s_per_step=wait_sum / world_size / steps,
        data_wait_fraction=wait_sum / wall_sum,
        data_wait_fraction_worst_rank=worst_fraction,
        h2d_s_per_step=h2d_sum / world_size,
        elapsed_s=elapsed_s,
        run_train_s=run_train_s,
        run_wall_s=run_wall_s,
        samples=samples,
        global_batch=global_batch,
        holds_switch=window.holds_switch,
    )


class MetricsLog:
    """metrics.jsonl and TensorBoard event files of a run; only rank 0 opens one (`enabled`)."""

    def __init__(self, run_dir: Path, enabled: bool, purge_step: int | None = None) -> None:
        """`purge_step`: TensorBoard drops earlier events of this run at or after that step (a
        resumed run logs those steps again)."""
        self.path = Path(run_dir) / METRICS_FILE
        self._enabled = enabled
        self._writer: Any = None
        if enabled:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(Path(run_dir) / TENSORBOARD_DIR), purge_step=purge_step)

    def write(self, record: Any, step: int) -> None:
        """Append one row (a row dataclass, or the JSON object of one) and its numbers as
        TensorBoard scalars."""
        if not self._enabled:
            return
        row = row_record(record) if dataclasses.is_dataclass(record) else dict(record)
        append_line(self.path, json.dumps(row, sort_keys=True))
        # Rows of one kind per network (the noise scale of G and of D) get a tag per network.
        scope = f"{row[KIND]}/{row['network']}" if isinstance(row.get("network"), str) else row[KIND]
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in ("step", "epoch"):
                self._writer.add_scalar(f"{scope}/{key}", value, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
