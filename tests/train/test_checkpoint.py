"""Checkpoint files: the latest pointer, pruning, checksums, plain data only, RNG round trip."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from trainspeed.errors import UsageError
from trainspeed.targets import available_targets, get_target
from trainspeed.train.checkpoint import (
    capture_rng_states,
    find_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    restore_rng_states,
    save_checkpoint,
)


AVAILABLE = available_targets()


def _names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir())


def test_latest_points_at_the_newest_and_only_two_are_kept_each_with_its_checksum(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None and find_checkpoint(tmp_path) is None
    for step in (10, 20, 30):
        save_checkpoint(tmp_path, step, {"step": step, "weight": torch.full((2,), float(step))})
    latest = latest_checkpoint(tmp_path)
    assert latest is not None and load_checkpoint(latest)["step"] == 30
    assert _names(tmp_path) == [
        "latest", "step-000000020.pt", "step-000000020.pt.sha256", "step-000000030.pt", "step-000000030.pt.sha256"
    ]
    # The checksum files are the format of coreutils' sha256sum, so anyone can check a run by hand.
    checked = subprocess.run(["sha256sum", "-c", "step-000000020.pt.sha256", "step-000000030.pt.sha256"],
                             cwd=tmp_path / "checkpoints", capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_keep_zero_keeps_every_checkpoint_and_keep_three_the_newest_three(tmp_path: Path) -> None:
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path / "all", step, {"step": step}, keep=0)
        save_checkpoint(tmp_path / "three", step, {"step": step}, keep=3)
    assert [n for n in _names(tmp_path / "all") if n.endswith(".pt")] == [
        "step-000000010.pt", "step-000000020.pt", "step-000000030.pt", "step-000000040.pt"]
    assert [n for n in _names(tmp_path / "three") if n.endswith(".pt")] == [
        "step-000000020.pt", "step-000000030.pt", "step-000000040.pt"]


def test_writing_an_earlier_step_never_deletes_a_later_checkpoint(tmp_path: Path) -> None:
    """A run resumed from step 20 while a step-90 file lies there (damaged, or of the run's future)
    must not prune its own new checkpoints because they sort before step 90."""
    for step in (20, 90):
        save_checkpoint(tmp_path, step, {"step": step})
    for step in (30, 40, 50):
        save_checkpoint(tmp_path, step, {"step": step})
    assert [name for name in _names(tmp_path) if name.endswith(".pt")] == [
        "step-000000040.pt", "step-000000050.pt", "step-000000090.pt"
    ]
    assert latest_checkpoint(tmp_path).name == "step-000000050.pt"


@pytest.mark.parametrize("name", [n for n in ("cpu:eager:fp32", "xla:lazy:fp32") if AVAILABLE[n] is None])
def test_rng_states_round_trip_through_a_checkpoint_on_the_host_and_the_device(name: str, tmp_path: Path) -> None:
    target = get_target(name)

    def draw() -> tuple[float, ...]:
        on_device = torch.rand((), device=target.device)
        target.after_step()
        return random.random(), float(np.random.rand()), float(np.random.randn()), float(torch.rand(())), \
            float(on_device.cpu())

    np.random.randn()  # leaves a cached gaussian in numpy's state
    save_checkpoint(tmp_path, 1, {"rng": capture_rng_states(target)})
    drawn = draw()
    restore_rng_states(load_checkpoint(latest_checkpoint(tmp_path))["rng"], target)
    assert draw() == drawn


def test_a_truncated_checkpoint_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 1, {"step": 1})
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(UsageError, match=f"{path} fails its sha256 check"):
        load_checkpoint(path)


def test_a_checkpoint_without_its_checksum_file_is_refused(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 1, {"step": 1})
    path.with_name(path.name + ".sha256").unlink()
    with pytest.raises(UsageError, match="has no checksum file"):
        load_checkpoint(path)


def test_a_state_that_is_not_plain_data_is_refused_when_written_naming_where(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"checkpoint\['ranks'\]\[0\]\['loader'\] is a numpy.ndarray"):
        save_checkpoint(tmp_path, 1, {"step": 1, "ranks": [{"loader": np.zeros(3)}]})
    assert latest_checkpoint(tmp_path) is None
