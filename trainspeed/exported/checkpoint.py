"""Checkpoints of a run of exported steps: the state's leaves and the loop's position in one npz,
its sha256 beside it.

An npz of plain arrays: the loop's position (step, samples, clock, the goal's watch, the noise
scale's averages) is JSON text stored as a byte array beside the leaves, read into typed fields
(`trainspeed.typed_json`: every key known, a bool no number), never a pickled object. Each is
written to a temporary file, its sha256 beside it (`step-N.npz.sha256`, as the torch trainer's
checkpoints, `trainspeed.checksum_file`), and only then renamed to its name, so a kill leaves the
last whole one and never a checkpoint without its checksum.

Reading one checks, in order: its checksum file; its size against the most a checkpoint of the
export's state takes (a sparse file of any size is refused before it is read); its sha256; each
array's header against the manifest's leaf before the array is allocated (`npz_arrays`); and the
position (a step of 0..999,999,999 that its file name says, samples of that many steps, a clock of
seconds). A file that is unfinished or changed (`Unfinished`) is passed over for an older one; one
that is whole but does not fit the run is refused (`UsageError`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dacite
import numpy as np

from trainspeed.atomic import atomic_path
from trainspeed.checksum_file import ChecksumProblem, checksum_path, recorded_checksum, write_checksum
from trainspeed.errors import UsageError
from trainspeed.exported.manifest import Manifest
from trainspeed.exported.manifest_checks import array_bytes, npz_bytes_bound
from trainspeed.exported.npz_arrays import Expected, read_npz
from trainspeed.exported.stored_arrays import leaf_key, restored, storable, stored_dtype
from trainspeed.train.config import MAX_STEPS
from trainspeed.train.time_to_target import RunTotals, TrackerState
from trainspeed.typed_json import first_line, typed
from trainspeed.user_files import FileRefused, open_regular
from trainspeed.user_json import parse_json

CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_NAME = re.compile(r"step-(\d{9})\.npz")
POSITION_KEY = "position_json"
MAX_POSITION_BYTES = 1 << 20
"""The position's JSON text: a clock, a goal's watch and the noise scale's averages, a few KB."""
REMOVE_IT = "remove it (and its .sha256) to resume from an older one"


@dataclass(frozen=True)
class Position:
    """Where the loop stood after a step: what a resume continues from."""

    step: int
    samples: int
    manifest_sha256: str
    batch_size: int
    seed: int
    clock: RunTotals
    goal: TrackerState | None
    """The goal's watch (`TargetTracker.state()`), where the run watches one."""
    noise_scale: dict[str, Any] | None = None
    """`NoiseAverages.state()`, where the run measures the noise scale."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


class Unfinished(UsageError):
    """A checkpoint file that is not whole or not the one written (no checksum, another size or
    sha256): passed over for an older one, said why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path, self.reason = path, reason


def checkpoint_path(run_dir: Path, step: int) -> Path:
    return run_dir / CHECKPOINT_DIR / f"step-{step:09d}.npz"


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    folder = run_dir / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir() if CHECKPOINT_NAME.fullmatch(path.name))


def save_checkpoint(run_dir: Path, leaves: list[Any], position: Position, keep: int) -> Path:
    """Write the checkpoint of `position.step` and its checksum, then drop all but the newest
    `keep` (0: keep all)."""
    if not 0 <= position.step <= MAX_STEPS:
        raise ValueError(f"a checkpoint's name holds its step in 9 digits, not step {position.step}")
    arrays = {leaf_key(index): storable(leaf) for index, leaf in enumerate(leaves)}
    arrays[POSITION_KEY] = np.frombuffer(position.to_json().encode(), dtype=np.uint8)
    path = checkpoint_path(run_dir, position.step)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)
        with open(tmp, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        write_checksum(path, digest)  # before the checkpoint takes its name: a kill leaves none without one
    if keep > 0:
        for old in checkpoints(run_dir)[:-keep]:
            old.unlink(missing_ok=True)
            checksum_path(old).unlink(missing_ok=True)
    return path


def expected_arrays(manifest: Manifest) -> dict[str, Expected]:
    """The arrays of a checkpoint of `manifest`'s state: each leaf as stored, and the position."""
    expected = {leaf_key(index): Expected(stored_dtype(leaf.dtype), tuple(leaf.shape))
                for index, leaf in enumerate(manifest.state)}
    expected[POSITION_KEY] = Expected(np.dtype(np.uint8), None, MAX_POSITION_BYTES)
    return expected


def most_bytes(manifest: Manifest) -> int:
    """The most bytes a checkpoint of `manifest`'s state takes."""
    leaves = sum(array_bytes(leaf.shape, leaf.dtype) for leaf in manifest.state)
    return npz_bytes_bound(leaves + MAX_POSITION_BYTES, len(manifest.state) + 1)


def _whole_bytes(path: Path, manifest: Manifest) -> bytes:
    """The file's bytes, once it has a checksum, a size a checkpoint of this state can take, and
    the sha256 its checksum says; Unfinished otherwise."""
    try:
        expected = recorded_checksum(path)
        with open_regular(path) as handle:
            size, bound = os.fstat(handle.fileno()).st_size, most_bytes(manifest)
            if size > bound:
                raise Unfinished(path, f"is {size:,} bytes, more than the {bound:,} a checkpoint of this export's "
                                 "state takes")
            data = handle.read(bound + 1)
    except ChecksumProblem as problem:
        raise Unfinished(path, problem.reason) from None
    except FileRefused as error:
        raise Unfinished(path, error.reason) from None
    except OSError as error:
        raise Unfinished(path, f"cannot be read ({error.strerror})") from None
    if hashlib.sha256(data).hexdigest() != expected:
        raise Unfinished(path, "fails its sha256 check (it changed after it was written)")
    return data


def _position(path: Path, raw: np.ndarray) -> Position:
    """The checked position; UsageError naming what is wrong with it."""
    try:
        position = typed(Position, parse_json(raw.tobytes().decode("utf-8"), str(path)))
    except (UnicodeDecodeError, TypeError, ValueError, dacite.DaciteError) as error:
        raise UsageError(f"{path}: its position is not a checkpoint's ({first_line(error)}); {REMOVE_IT}") from None
    named = int(CHECKPOINT_NAME.fullmatch(path.name).group(1))  # type: ignore[union-attr]
    clock = dataclasses.asdict(position.clock)
    if position.step != named:
        problem = f"records step {position.step}, and its name says step {named}"
    elif position.batch_size > 0 and position.samples != position.step * position.batch_size:
        problem = f"records {position.samples:,} samples, not {position.step} steps of batch {position.batch_size}"
    elif not all(math.isfinite(value) and value >= 0 for value in clock.values()):
        problem = f"records a clock of {clock}, not seconds and resumes >= 0"
    else:
        return position
    raise UsageError(f"{path}: {problem}; {REMOVE_IT}")


def load_checkpoint(path: Path, manifest: Manifest) -> tuple[list[np.ndarray], Position]:
    """The leaves (as the manifest's dtypes) and the position of one checkpoint of `manifest`'s
    state; Unfinished for a file that is not whole, UsageError for one that does not fit."""
    data = _whole_bytes(path, manifest)
    arrays = read_npz(data, expected_arrays(manifest), str(path), f"it is not a checkpoint of this export; {REMOVE_IT}")
    position = _position(path, arrays.pop(POSITION_KEY))
    leaves = [restored(arrays[leaf_key(index)], leaf.dtype) for index, leaf in enumerate(manifest.state)]
    return leaves, position
