"""Checkpoint files: the latest pointer, pruning, RNG round trip, and a clear error for a bad file."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from trainspeed.errors import UsageError
from trainspeed.targets import available_targets, get_target
from trainspeed.train.checkpoint import (
    capture_rng_states,
    latest_checkpoint,
    load_checkpoint,
    restore_rng_states,
    save_checkpoint,
)


AVAILABLE = available_targets()


def test_latest_points_at_the_newest_and_only_two_are_kept(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None
    for step in (10, 20, 30):
        save_checkpoint(tmp_path, step, {"step": step, "weight": torch.full((2,), float(step))})
    latest = latest_checkpoint(tmp_path)
    assert latest is not None and load_checkpoint(latest)["step"] == 30
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest", "step-000000020.pt", "step-000000030.pt"
    ]


@pytest.mark.parametrize("name", [n for n in ("cpu:eager:fp32", "xla:lazy:fp32") if AVAILABLE[n] is None])
def test_rng_states_round_trip_on_the_host_and_the_device(name: str) -> None:
    target = get_target(name)

    def draw() -> tuple[float, ...]:
        on_device = torch.rand((), device=target.device)
        target.after_step()
        return random.random(), float(np.random.rand()), float(torch.rand(())), float(on_device.cpu())

    states = capture_rng_states(target)
    drawn = draw()
    restore_rng_states(states, target)
    assert draw() == drawn


def test_a_damaged_checkpoint_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 1, {"step": 1})
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(UsageError, match=str(path)):
        load_checkpoint(path)
