"""Checkpoints that a crash cannot corrupt, and the SIGTERM request to write one.

A checkpoint is one file holding everything to continue bit-for-bit: networks, optimizers, LR
schedulers, the step, and per rank the loader position and the RNG states (python, numpy, torch,
and the target's device generator). Rank 0 gathers the per-rank parts and writes the file through `atomic_path`, then points
`checkpoints/latest` at it (also atomically), so a kill -9 at any moment leaves either the previous
checkpoint or the new one. The two newest are kept.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch

from trainspeed.atomic import atomic_path, atomic_write_text
from trainspeed.errors import UsageError
from trainspeed.targets.base import Target

CHECKPOINT_DIR = "checkpoints"
LATEST_POINTER = "latest"
KEEP_CHECKPOINTS = 2


def capture_rng_states(target: Target) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "device": target.device_rng_state(),
    }


def restore_rng_states(states: dict[str, Any], target: Target) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states.get("device") is not None:
        target.set_device_rng_state(states["device"])


def to_host(value: Any) -> Any:
    """Copy every tensor in a nested state to the CPU (XLA and CUDA tensors do not pickle portably)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, dict):
        return {key: to_host(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_host(item) for item in value)
    return value


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def save_checkpoint(run_dir: Path, step: int, payload: dict[str, Any]) -> Path:
    """Write `payload` as the checkpoint of `step` and make it the latest; prune older ones."""
    directory = checkpoint_dir(run_dir)
    path = directory / f"step-{step:09d}.pt"
    with atomic_path(path) as tmp:
        torch.save(to_host(payload), tmp)
    atomic_write_text(directory / LATEST_POINTER, path.name + "\n")
    for old in sorted(directory.glob("step-*.pt"))[:-KEEP_CHECKPOINTS]:
        old.unlink(missing_ok=True)
    return path


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = checkpoint_dir(run_dir) / LATEST_POINTER
    if not pointer.exists():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if path.exists() else None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """The payload, on the host. It holds RNG states (numpy arrays, tuples), so this is a full unpickle:
    load only checkpoints this tool wrote."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError) as error:
        raise UsageError(f"train: cannot read checkpoint {path}: {error}") from error


class StopRequest:
    """Turns SIGTERM into a flag the loop checks between steps (checkpoint, then exit cleanly).

    A handler that checkpointed directly could run in the middle of a step or a collective.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def __enter__(self) -> "StopRequest":
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.signal(signal.SIGTERM, self._previous)
