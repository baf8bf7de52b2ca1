"""The run directory: one run per directory, one writer at a time, resumes that are checked.

Everything here happens in the launcher, before any rank starts, so a refusal is one line and
leaves the directory as it was:
- `--out` must be writable (checked by writing and removing a probe file);
- a lock file held for the whole run keeps a second run out (its message names the holder);
- a fresh run refuses a directory that already holds a run (`--resume` continues it);
- a resume compares the new settings with the checkpoint's: settings that shape the trajectory
  (model, data, seed, batch, world size, learning-rate schedule) must be equal; the others may
  change and each change is appended to `resumes.jsonl`;
- rows that a killed run logged after its last checkpoint are dropped from `metrics.jsonl`, so
  every step appears once (TensorBoard hides them itself: the writer purges from the resume step).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import fcntl
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from trainspeed.atomic import append_line, atomic_write_text, check_writable_directory
from trainspeed.errors import UsageError
from trainspeed.train.checkpoint import CHECKPOINT_DIR, latest_checkpoint, load_checkpoint
from trainspeed.train.config import TrainConfig
from trainspeed.train.metrics import METRICS_FILE

CONFIG_FILE = "train_config.json"
LOCK_FILE = ".lock"
RESUMES_FILE = "resumes.jsonl"
MUST_MATCH_ON_RESUME = (
    "workload", "size", "seed", "data", "synthetic_data", "batch_size_per_device", "world_size",
    "lr.base_lr", "lr.scaling", "lr.reference_batch", "lr.warmup_steps", "lr.min_lr_ratio",
)
"""Settings a checkpoint cannot continue under: they change the model, the sample order or the
LR schedule that the saved optimizer and scheduler states belong to."""


@dataclass(frozen=True)
class ResumePoint:
    checkpoint: Path
    step: int
    changed: dict[str, tuple[Any, Any]]
    """Setting -> (value in the checkpoint's run, value now) for settings allowed to change."""


def _flatten(config: TrainConfig) -> dict[str, Any]:
    flat: dict[str, Any] = {"world_size": config.world_size}
    for key, value in dataclasses.asdict(config).items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": item for inner, item in value.items()})
        else:
            flat[key] = value
    return flat


class RunDirectory:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    # --- checks ---------------------------------------------------------------------------------
    def check_writable(self) -> None:
        try:
            check_writable_directory(self.path, f"--out {self.path}")
        except UsageError as error:
            raise UsageError(f"train: {error}") from None

    def holds_a_run(self) -> bool:
        return any((self.path / name).exists() for name in (CONFIG_FILE, CHECKPOINT_DIR, METRICS_FILE))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory for this run; a second run gets one line naming the holder."""
        handle = open(self.path / LOCK_FILE, "a+", encoding="utf-8")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise UsageError(f"train: run directory {self.path} is in use by {holder}; "
                                 "wait for that run or choose another --out") from None
            handle.seek(0)
            handle.truncate()
            started = datetime.datetime.now().isoformat(timespec="seconds")
            handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {started}\n")
            handle.flush()
            try:
                yield
            finally:
                handle.truncate(0)  # nobody holds it now
        finally:
            handle.close()

    # --- fresh runs and resumes ---------------------------------------------------------------------
    def check_fresh(self) -> None:
        if self.holds_a_run():
            raise UsageError(f"train: {self.path} already holds a run; continue it with --resume "
                             "or choose another --out")

    def resume_point(self, config: TrainConfig) -> ResumePoint | None:
        """The checkpoint to continue from, checked against `config`; None when there is none."""
        path = latest_checkpoint(self.path)
        if path is None:
            return None
        payload = load_checkpoint(path)
        before, now = _flatten(TrainConfig.from_json(payload["config"])), _flatten(config)
        mismatched = [key for key in MUST_MATCH_ON_RESUME if before.get(key) != now.get(key)]
        if mismatched:
            details = ", ".join(f"{key} {before.get(key)!r} -> {now.get(key)!r}" for key in mismatched)
            raise UsageError(f"train: cannot resume {path} with other settings ({details}); "
                             "resume with the run's settings or start a new run in another --out")
        ignored = {"resume", "out_dir", "progress"}
        changed = {key: (before[key], value) for key, value in now.items()
                   if key in before and before[key] != value and key not in ignored}
        return ResumePoint(checkpoint=path, step=int(payload["step"]), changed=changed)

    def record_resume(self, point: ResumePoint) -> None:
        row = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "checkpoint": point.checkpoint.name,
               "step": point.step, "changed": {key: list(values) for key, values in point.changed.items()}}
        append_line(self.path / RESUMES_FILE, json.dumps(row, sort_keys=True))

    def forget_steps_after(self, step: int) -> None:
        """Drop metrics rows of steps after `step` (logged by a run killed after that checkpoint)."""
        metrics = self.path / METRICS_FILE
        if not metrics.exists():
            return
        lines = metrics.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if _row_step(line) <= step]
        if len(kept) != len(lines):
            atomic_write_text(metrics, "".join(line + "\n" for line in kept))

    def write_config(self, config: TrainConfig) -> Path:
        path = self.path / CONFIG_FILE
        atomic_write_text(path, config.to_json() + "\n")
        return path


def _row_step(line: str) -> float:
    """The row's step; infinity for a line that is not a whole row (torn by a kill), so it goes."""
    try:
        return int(json.loads(line)["step"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return float("inf")
