"""Checkpoints of a run of exported steps: the state's leaves and the loop's position in one npz.

An npz of plain arrays, read with `allow_pickle=False`: the loop's position (step, samples, clock,
the goal's watch) is JSON text stored as a byte array beside the leaves, never a pickled object. A
checkpoint names the manifest it was made with (its sha256), and a resume refuses one of another
export. Each is written to a temporary file and renamed, so a kill leaves the last whole one.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dacite
import numpy as np

from trainspeed.atomic import atomic_write_bytes
from trainspeed.exported.stored_arrays import storable
from trainspeed.errors import UsageError
from trainspeed.user_files import FileRefused, read_regular
from trainspeed.user_json import parse_json

CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_NAME = re.compile(r"step-(\d{9})\.npz")
POSITION_KEY = "position_json"


@dataclass(frozen=True)
class Position:
    """Where the loop stood after a step: what a resume continues from."""

    step: int
    samples: int
    manifest_sha256: str
    batch_size: int
    seed: int
    clock: dict[str, Any]
    """`trainspeed.train.time_to_target.RunTotals.as_state()`."""
    goal: dict[str, Any] | None
    """`TargetTracker.as_state()`, where the run watches a goal."""
    noise_scale: dict[str, Any] | None = None
    """`NoiseAverages.state()`, where the run measures the noise scale (checkpoints before: none)."""


def checkpoint_path(run_dir: Path, step: int) -> Path:
    return run_dir / CHECKPOINT_DIR / f"step-{step:09d}.npz"


def save_checkpoint(run_dir: Path, leaves: list[Any], position: Position, keep: int) -> Path:
    """Write the checkpoint of `position.step`, then drop all but the newest `keep` (0: keep all)."""
    arrays = {f"leaf{index:05d}": storable(leaf) for index, leaf in enumerate(leaves)}
    arrays[POSITION_KEY] = np.frombuffer(json.dumps(position.__dict__).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path = checkpoint_path(run_dir, position.step)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buffer.getvalue())
    if keep > 0:
        for old in checkpoints(run_dir)[:-keep]:
            old.unlink(missing_ok=True)
    return path


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    folder = run_dir / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir() if CHECKPOINT_NAME.fullmatch(path.name))


def load_checkpoint(path: Path, leaf_count: int) -> tuple[list[np.ndarray], Position]:
    """The leaves and position of one checkpoint; one UsageError line for a file that is not one."""
    try:
        data = read_regular(path, str(path))
        with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
            arrays = {key: loaded[key] for key in loaded.files}
    except FileRefused as error:
        raise UsageError(str(error)) from None
    except (ValueError, OSError, EOFError) as error:
        raise UsageError(f"{path}: not a checkpoint of exported steps ({error}); remove it to resume from an "
                         "older one") from None
    raw = arrays.pop(POSITION_KEY, None)
    leaves = [arrays.get(f"leaf{index:05d}") for index in range(leaf_count)]
    if raw is None or raw.dtype != np.uint8 or any(leaf is None for leaf in leaves) or len(arrays) != leaf_count:
        raise UsageError(f"{path}: not a checkpoint of these exported steps (its arrays differ); remove it to "
                         "resume from an older one")
    try:
        fields = parse_json(raw.tobytes().decode("utf-8"), str(path))
        position = dacite.from_dict(Position, fields, config=dacite.Config(strict=True, check_types=True))
    except (UnicodeDecodeError, TypeError, ValueError, dacite.DaciteError):
        raise UsageError(f"{path}: its position is not a checkpoint's; remove it to resume from an older one") from None
    return leaves, position  # type: ignore[return-value]
