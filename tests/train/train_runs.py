"""Running `trainspeed train` as a user would, and reading what it wrote (shared by tests/train)."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

import torch
from child_commands import REPO_ROOT, run_child, trainspeed_argv, trainspeed_env

from trainspeed.train.checkpoint import find_checkpoint

ATOL_FLOAT64 = 1e-9
"""How far two float64 runs that add the same numbers in another order may drift apart (the
derivation is in tests/train/test_data_parallel.py)."""
# A large LR makes parameters move ~1e-2 in a few steps, far above the comparison tolerances.
TINY_RUN = ["--workload", "mahjong", "--size", "tiny", "--no-progress", "--threads", "1", "--log-every", "2", "--lr", "3e-3"]


__all__ = ["REPO_ROOT"]


def train_command(*args: str) -> list[str]:
    return trainspeed_argv("train", *TINY_RUN, *args)


def train_env(extra_pythonpath: str | None = None) -> dict[str, str]:
    return trainspeed_env(*([extra_pythonpath] if extra_pythonpath else []))


def run_train(*args: str, timeout: float = 120, extra_pythonpath: str | None = None) -> subprocess.CompletedProcess:
    return run_child(train_command(*args), env=train_env(extra_pythonpath), timeout=timeout)


def latest_payload(run_dir: Path) -> dict:
    """The run's latest checkpoint (written by rank 0), checked and loaded as the trainer loads it."""
    found = find_checkpoint(run_dir)
    assert found is not None, f"{run_dir} has no checkpoint"
    return found.payload


def final_parameters(run_dir: Path, network: str = "policy") -> dict[str, torch.Tensor]:
    """One network's parameters in the run's latest checkpoint."""
    return latest_payload(run_dir)["trainable"]["networks"][network]


def all_networks(run_dir: Path) -> dict[str, torch.Tensor]:
    """Every tensor of every network in the run's latest checkpoint, as "network.name"."""
    networks = latest_payload(run_dir)["trainable"]["networks"]
    return {f"{network}.{name}": tensor for network, state in networks.items() for name, tensor in state.items()}


FLOAT64_WORKLOAD = '''
import torch
from torch import nn

from trainspeed.workloads.base import Trainable
from trainspeed.workloads.mahjong.workload import MahjongWorkload


class Float64Policy(Trainable):
    """A two-layer policy over Mahjong's features that computes in float64 from inputs to loss."""

    def __init__(self, features: int, actions: int) -> None:
        network = nn.Sequential(nn.Flatten(), nn.Linear(features, 64), nn.Tanh(), nn.Linear(64, actions))
        super().__init__({"policy": network.double()})

    def setup_optimizers(self, fused=False):
        self.optimizers = {"policy": torch.optim.AdamW(self.networks["policy"].parameters(), lr=1e-3)}

    def train_step(self, batch):
        logits = self.wrapped["policy"](batch["features"].double()).masked_fill(~batch["mask"], -1e9)
        loss = nn.functional.cross_entropy(logits, batch["action"])
        loss.backward()
        self.optimizers["policy"].step()
        self.optimizers["policy"].zero_grad(set_to_none=True)
        return loss.detach()


class Float64Mahjong(MahjongWorkload):
    """Mahjong's real shards, loader and synthetic batches, with the float64 policy."""

    def build(self, size, seed=0):
        torch.manual_seed(seed)
        sample = self.synthetic_batch(size, 1, torch.Generator().manual_seed(0))
        return Float64Policy(sample["features"][0].numel(), sample["mask"].shape[1])
'''
"""A user workload (`--workload float64_workload:Float64Mahjong`) for comparisons that must not
depend on one CPU's float32 rounding."""


def float64_workload(folder: Path) -> list[str]:
    """Write FLOAT64_WORKLOAD into `folder` (pass it as `extra_pythonpath`); the --workload flags."""
    (folder / "float64_workload.py").write_text(FLOAT64_WORKLOAD)
    return ["--workload", "float64_workload:Float64Mahjong"]


def float64_initial_parameters(folder: Path, monkeypatch) -> dict[str, torch.Tensor]:
    """The float64 policy's parameters before training (seed 0, as `trainspeed train` builds it)."""
    monkeypatch.syspath_prepend(str(folder))
    from trainspeed.workloads import get_workload

    return get_workload("float64_workload:Float64Mahjong").build("tiny", seed=0).networks["policy"].state_dict()


def max_abs_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """In float64, so the difference of two float64 runs is not rounded to float32 first."""
    assert a.keys() == b.keys()
    return max(float((a[key].double() - b[key].double()).abs().max()) for key in a)


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


STEPS = 24
PER_DEVICE = 16
"""The data-parallel tests' runs: 24 steps of 16 samples per rank on the session's self-play set."""


def train_checkpointed(out: Path, nproc: int, data_args: list[str], *extra: str) -> None:
    """`STEPS` steps of `PER_DEVICE` samples per rank, a checkpoint every 4."""
    result = run_train(
        *data_args, "--nproc", str(nproc), "--batch-size-per-device", str(PER_DEVICE), "--steps", str(STEPS),
        "--checkpoint-every", "4", "--out", str(out), *extra, timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def wait_for_checkpoint(run_dir: Path, process: subprocess.Popen, timeout_s: float) -> str:
    """The first checkpoint a running training writes (its name), failing if it ends first."""
    pointer = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if pointer.exists():
            return pointer.read_text().strip()
        time.sleep(0.01)
    raise AssertionError(f"no checkpoint appeared under {run_dir} (exit code {process.poll()})")


STYLEGAN3_STEPS = 8
"""StyleGAN3's two-rank runs: 8 steps of 2 images per rank on the 24 images of `image_data_args`
(6 steps an epoch), a checkpoint every 4: a resume from step 4 crosses the epoch's end."""


def stylegan3_args(image_data_args: list[str]) -> list[str]:
    """StyleGAN3 tiny-t on the session's image dataset (`image_data_args`), `STYLEGAN3_STEPS` steps of
    2 images per rank."""
    return ["--workload", "stylegan3", "--size", "tiny-t", *image_data_args, "--batch-size-per-device", "2",
            "--steps", str(STYLEGAN3_STEPS)]


STYLEGAN3_TWO_RANKS = ["--target", "cpu:eager:fp32", "--nproc", "2", "--num-workers", "1", "--checkpoint-every", "4"]
"""The rest of `stylegan3_two_rank_run`'s flags: the kill -9 test's StyleGAN3 case resumes with these."""
