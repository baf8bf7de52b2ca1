"""A launch resolves its run once: the settings every rank reads, what the training split holds
and how long the run trains, all in one plan before anything is written."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.train.batch_schedule import RunLength
from trainspeed.train.config import BatchScheduleConfig, TrainConfig
from trainspeed.train.launch_plan import resolve_launch
from trainspeed.workloads import get_workload


def test_a_synthetic_run_is_resolved_with_the_workload_s_defaults_and_its_length(tmp_path: Path) -> None:
    plan = resolve_launch(TrainConfig(synthetic_data=True, steps=3, batch_size_per_device=8,
                                      out_dir=str(tmp_path / "run")))
    assert plan.config.size == get_workload("mahjong").default_size
    assert plan.config.lr.reference_batch is not None  # the batch the workload's LR was tuned at, recorded
    assert (plan.split, plan.length, plan.processes) == (None, RunLength(total_samples=24, total_steps=3), 1)
    assert not (tmp_path / "run").exists()  # resolving writes nothing


@pytest.mark.e2e
def test_a_schedule_over_epochs_is_as_long_as_the_training_split_it_read_once(selfplay_data: Path,
                                                                              tmp_path: Path) -> None:
    """An auto schedule's budget is --epochs x the samples of the split the launcher opened for its
    checks: the same count a resume's plan and every rank use."""
    plan = resolve_launch(TrainConfig(data=str(selfplay_data), epochs=1.5, out_dir=str(tmp_path / "run"),
                                      noise_scale_micro_batches=2,
                                      batch=BatchScheduleConfig(schedule="auto", global_batch_min=32,
                                                                global_batch_max=128)))
    assert plan.split is not None and plan.split.samples > 0
    assert plan.length.budget_samples == math.ceil(1.5 * plan.split.samples)
    assert plan.config.batch_size_per_device == 32  # the schedule's start


def test_a_run_longer_than_a_checkpoint_name_holds_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="a checkpoint's name can hold"):
        resolve_launch(TrainConfig(synthetic_data=True, samples=2**61, batch_size_per_device=1,
                                   out_dir=str(tmp_path / "run")))
