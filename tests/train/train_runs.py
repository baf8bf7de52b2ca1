"""Running `trainspeed train` as a user would, and reading what it wrote (shared by tests/train)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
# A large LR makes parameters move ~1e-2 in a few steps, far above the comparison tolerances.
TINY_RUN = ["--workload", "mahjong", "--size", "tiny", "--no-progress", "--threads", "1", "--log-every", "2", "--lr", "3e-3"]


def train_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainspeed", "train", *TINY_RUN, *args]


def train_env(extra_pythonpath: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO_ROOT)] + ([extra_pythonpath] if extra_pythonpath else []) + [env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    env.setdefault("PJRT_DEVICE", "CPU")
    return env


def run_train(*args: str, timeout: float = 120, extra_pythonpath: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        train_command(*args),
        env=train_env(extra_pythonpath),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def final_parameters(run_dir: Path) -> dict[str, torch.Tensor]:
    """The policy's parameters in the run's latest checkpoint (written by rank 0)."""
    pointer = run_dir / "checkpoints" / "latest"
    payload = torch.load(pointer.parent / pointer.read_text().strip(), map_location="cpu", weights_only=False)
    return payload["trainable"]["networks"]["policy"]


def initial_parameters(size: str = "tiny", seed: int = 0) -> dict[str, torch.Tensor]:
    """The policy's parameters before training (the workload builds deterministically per seed)."""
    from trainspeed.workloads import get_workload

    return get_workload("mahjong").build(size, seed=seed).networks["policy"].state_dict()


def max_abs_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[key].float() - b[key].float()).abs().max()) for key in a)
