"""Host feed: every timed step copies its own host batch to the device; device feed copies none."""

import pytest
import torch
from toy_workload import with_adamw

from trainspeed.bench.config import TimingPlan
from trainspeed.bench.feed import HOST_POOL_BATCHES, batch_nbytes
from trainspeed.bench.results import ResultRow
from trainspeed.bench.sweep import measure_configuration
from trainspeed.targets import available_targets, get_target
from trainspeed.targets.base import TargetSpec
from trainspeed.targets.cpu import CpuTarget
from trainspeed.workloads import get_workload

PLAN = TimingPlan(warmup_steps=1, windows=2, min_window_s=0.02)


class CountingTarget(CpuTarget):
    """Counts the bytes handed to `move_batch` between one step and the next."""

    def __init__(self) -> None:
        super().__init__(TargetSpec.parse("cpu:eager:fp32"))
        self.moved_bytes = 0
        self.moved_ids: list[int] = []
        self.bytes_per_step: list[int] = []

    def move_batch(self, batch):
        self.moved_bytes += batch_nbytes(batch)
        self.moved_ids.append(id(batch["features"]))
        return super().move_batch(batch)

    def run_step(self, trainable, batch):
        self.bytes_per_step.append(self.moved_bytes)
        self.moved_bytes = 0
        return super().run_step(trainable, batch)


def _row(target, feed: str, workload=None) -> ResultRow:
    workload = workload or get_workload("mahjong")
    base = ResultRow(run_id="t", timestamp="now", workload=workload.name, size="tiny", target=str(target),
                     batch_size=8, status="skipped")
    return measure_configuration(target, workload, "tiny", 8, PLAN, 0, base, feed)


def test_host_feed_copies_one_batch_into_every_step_and_cycles_through_the_pool():
    target = CountingTarget()
    row = _row(target, "host")
    expected = batch_nbytes(get_workload("mahjong").synthetic_batch("tiny", 8, torch.Generator().manual_seed(0)))
    assert row.status == "ok" and row.feed == "host" and row.bytes_per_step == expected > 0
    timed_steps = PLAN.windows * row.steps_per_window
    assert len(target.bytes_per_step) >= 2 + PLAN.warmup_steps + timed_steps
    assert set(target.bytes_per_step) == {expected}
    assert len(set(target.moved_ids)) == HOST_POOL_BATCHES
    assert all(moved == target.moved_ids[i % HOST_POOL_BATCHES] for i, moved in enumerate(target.moved_ids))
    assert row.series == "cpu:eager:fp32 host-fed"


def test_device_feed_moves_its_batch_once_before_the_first_step():
    target = CountingTarget()
    row = _row(target, "device")
    assert row.status == "ok" and row.feed == "device" and row.bytes_per_step == 0
    assert target.bytes_per_step[0] > 0 and set(target.bytes_per_step[1:]) == {0}
    assert len(target.moved_ids) == 1 and row.series == "cpu:eager:fp32"


@pytest.mark.slow
@pytest.mark.skipif(available_targets()["xla:lazy:fp32"] is not None, reason="torch_xla not installed")
def test_host_feed_on_xla_transfers_each_batch_without_recompiling():
    """The toy with AdamW compiles two graphs, as Mahjong's network does (the first step creates the
    optimizer's state): the feed's property, not the network's, at a fraction of the compile time."""
    row = _row(get_target("xla:lazy:fp32"), "host", with_adamw())
    assert row.status == "ok" and row.compiles_in_windows == 0 and row.bytes_per_step > 0


@pytest.mark.skipif(available_targets()["cuda:eager:fp32"] is not None, reason="no CUDA device")
def test_host_batches_are_pinned_where_the_target_says_so():
    from trainspeed.bench.feed import make_feed

    target = get_target("cuda:eager:fp32")
    assert target.pin_memory
    seen = []
    real_move = target.move_batch
    target.move_batch = lambda batch: seen.append(all(t.is_pinned() for t in batch.values())) or real_move(batch)
    feed = make_feed("host", target, get_workload("mahjong"), "tiny", 8, 0)
    moved = feed.next_batch()
    assert seen == [True] and all(t.device.type == "cuda" for t in moved.values())
