"""The run directory: one run per directory, one writer at a time, resumes that are checked.

Everything here happens in the launcher, before any rank starts, so a refusal is one line and
leaves the directory as it was:
- `--out` must be writable (checked by writing and removing a probe file);
- a lock file held for the whole run keeps a second run out (its message names the holder);
- a fresh run refuses a directory that already holds a run (`--resume` continues it);
- temporary files of a write a kill interrupted (`.step-*.pt.*.tmp`, `.latest.*.tmp`, ...) are
  removed once the lock is held, when no writer of this run can be alive;
- a resume continues from the checkpoint `latest` names, or, when that pointer or its file is not
  valid, from the newest valid checkpoint (saying so in one line, and pointing `latest` at it);
  checkpoints of later steps are moved aside, never overwritten; a run that has checkpoints but
  no valid one is refused, never restarted from step 0;
- a resume compares the new settings with the checkpoint's: settings that shape the trajectory
  (model, data, seed, batch, world size, learning-rate schedule) must be equal; the others may
  change and each change is appended to `resumes.jsonl`;
- rows that a killed run logged after the checkpoint the resume continues from are dropped from
  `metrics.jsonl`, so every step appears once (TensorBoard hides them itself: the writer purges
  from the resume step); every other row stays.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainspeed.atomic import append_line, atomic_write_text, check_writable_directory
from trainspeed.errors import UsageError
from trainspeed.train.checkpoint import (
    CHECKPOINT_DIR,
    CHECKPOINT_NAME,
    LATEST_POINTER,
    find_checkpoint,
    set_aside_after,
)
from trainspeed.train.config import TrainConfig
from trainspeed.train.rows import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from trainspeed.train.run_lock import hold_run_lock

RESUMES_FILE = "resumes.jsonl"
INTERRUPTED_WRITES = (
    (".", [re.escape(name) for name in (CONFIG_FILE, METRICS_FILE, SUMMARY_FILE)]),
    (CHECKPOINT_DIR, [CHECKPOINT_NAME.pattern, CHECKPOINT_NAME.pattern + r"\.sha256", re.escape(LATEST_POINTER)]),
)
"""(folder, file-name patterns) of the files written through a temporary file (`atomic_path`)."""
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
    skipped: tuple[str, ...] = ()
    """Why `latest` or newer checkpoints were passed over (empty: it is the one `latest` names)."""


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

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the directory for this run; a second run gets one line naming the holder."""
        return hold_run_lock(self.path)

    def remove_interrupted_writes(self) -> list[Path]:
        """Delete the temporary files of atomic writes that a kill cut short; call with the lock
        held (no writer of this directory is alive then). Only the names this trainer writes."""
        leftovers = [path for folder, names in INTERRUPTED_WRITES for path in sorted((self.path / folder).glob(".*.tmp"))
                     if any(re.fullmatch(rf"\.{name}\.[^/]+\.tmp", path.name) for name in names)]
        for path in leftovers:
            path.unlink(missing_ok=True)
        return leftovers

    # --- fresh runs and resumes ---------------------------------------------------------------------
    def check_fresh(self) -> None:
        if self.holds_a_run():
            raise UsageError(f"train: {self.path} already holds a run; continue it with --resume "
                             "or choose another --out")

    def resume_point(self, config: TrainConfig) -> ResumePoint | None:
        """The checkpoint to continue from, checked against `config`; None when the run has none.
        Changes nothing: `continue_from` does, once the caller decided to go on."""
        try:
            found = find_checkpoint(self.path)
        except UsageError as error:
            raise UsageError(f"train: cannot resume: {error}; restore a valid checkpoint or start a new "
                             "run in another --out") from None
        if found is None:
            return None
        path, payload = found.path, found.payload
        try:
            before, step = _flatten(TrainConfig.from_json(payload["config"])), int(payload["step"])
        except (KeyError, TypeError, ValueError) as error:
            raise UsageError(f"train: {path} is not a trainspeed training checkpoint ({error!r})") from None
        now = _flatten(config)
        mismatched = [key for key in MUST_MATCH_ON_RESUME if before.get(key) != now.get(key)]
        if mismatched:
            details = ", ".join(f"{key} {before.get(key)!r} -> {now.get(key)!r}" for key in mismatched)
            raise UsageError(f"train: cannot resume {path} with other settings ({details}); "
                             "resume with the run's settings or start a new run in another --out")
        ignored = {"resume", "out_dir", "progress"}
        changed = {key: (before[key], value) for key, value in now.items()
                   if key in before and before[key] != value and key not in ignored}
        return ResumePoint(checkpoint=path, step=step, changed=changed, skipped=found.skipped)

    def continue_from(self, point: ResumePoint | None) -> None:
        """Make the directory continue from `point` (None: from step 0, the run never checkpointed):
        say what was passed over, point `latest` at it, record the resume, drop the rows logged after it."""
        if point is None:
            print(f"train: no checkpoint under {self.path}; starting from step 0", flush=True)
        else:
            if point.skipped:
                print(f"train: {'; '.join(point.skipped)}; resuming from {point.checkpoint.name}, the "
                      "newest valid checkpoint", flush=True)
                atomic_write_text(point.checkpoint.parent / LATEST_POINTER, point.checkpoint.name + "\n")
            kept = set_aside_after(self.path, point.step)
            if kept is not None:
                names = ", ".join(sorted(p.name for p in kept.glob("step-*.pt")))
                print(f"train: moved the checkpoints after step {point.step} ({names}) to {kept}, where the "
                      "resumed run cannot overwrite them", flush=True)
            self.record_resume(point)
        self.forget_steps_after(0 if point is None else point.step)

    def record_resume(self, point: ResumePoint) -> None:
        row = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "checkpoint": point.checkpoint.name,
               "step": point.step, "changed": {key: list(values) for key, values in point.changed.items()}}
        append_line(self.path / RESUMES_FILE, json.dumps(row, sort_keys=True))

    def forget_steps_after(self, step: int) -> None:
        """Drop metrics rows of steps after `step` (logged by a run killed after that checkpoint) and
        lines a kill tore; keep every other row."""
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
    """The last step a row describes (`step`, or a summary's `last_step`); minus infinity for a row
    with neither (kept), infinity for a line that is not a whole row (torn by a kill, dropped)."""
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return float("inf")
    if not isinstance(row, dict):
        return float("inf")
    for key in ("step", "last_step"):
        if key in row:
            try:
                return int(row[key])
            except (TypeError, ValueError):
                return float("inf")
    return float("-inf")
