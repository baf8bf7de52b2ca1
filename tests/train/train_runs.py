"""Running `trainspeed train` as a user would, and reading what it wrote (shared by tests/train)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import torch

from trainspeed.train.checkpoint import latest_checkpoint, load_checkpoint

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


def latest_payload(run_dir: Path) -> dict:
    """The run's latest checkpoint (written by rank 0), checked and loaded as the trainer loads it."""
    path = latest_checkpoint(run_dir)
    assert path is not None, f"{run_dir} has no checkpoint"
    return load_checkpoint(path)


def final_parameters(run_dir: Path, network: str = "policy") -> dict[str, torch.Tensor]:
    """One network's parameters in the run's latest checkpoint."""
    return latest_payload(run_dir)["trainable"]["networks"][network]


def initial_parameters(size: str = "tiny", seed: int = 0) -> dict[str, torch.Tensor]:
    """The policy's parameters before training (the workload builds deterministically per seed)."""
    from trainspeed.workloads import get_workload

    return get_workload("mahjong").build(size, seed=seed).networks["policy"].state_dict()


def max_abs_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[key].float() - b[key].float()).abs().max()) for key in a)


class CreatesAFile:
    """Unpickled, this object is `open(marker, "w")`: a checkpoint that runs code when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple:
        return (open, (self.marker, "w"))


def plant_payload(run_dir: Path, marker: Path) -> None:
    """Replace every checkpoint of the run by a pickle payload that creates `marker`, each with a
    checksum file that matches it (as a tamperer would write), so only the way checkpoints are read
    stands between the payload and running it."""
    for path in (run_dir / "checkpoints").glob("step-*.pt"):
        torch.save({"step": 1, "config": "{}", "trainable": CreatesAFile(marker)}, path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n")
