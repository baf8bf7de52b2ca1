"""`train --exported ... --resume`: the checkpoint a run continues from, chosen and checked before
anything in its folder changes, by the torch trainer's rule (`trainspeed.train.resume_rule`).

The newest whole checkpoint is taken (one without its checksum, of another size or sha256 is passed
over, said so); one that is whole but was made with another export, batch size or seed, or whose
position does not hold, is refused, never passed over; a run that has checkpoints but none whole
is refused, never started over. The settings are those the run recorded (`train_config.json`, as
each invocation of it wrote them): the ones that shape the trajectory must be the same, the others
are recorded as changed (`resumes.jsonl`). A run whose checkpoint is at its end has nothing to do.

Only then does the folder change (`continue_run`): the resume is recorded and the rows logged after
the checkpoint are dropped (they are logged again), as are those of a run that never checkpointed,
which starts again from step 0, so no step is logged twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed.atomic import atomic_write_bytes
from trainspeed.errors import UsageError
from trainspeed.exported.checkpoint import CHECKPOINT_DIR, Position, Unfinished, checkpoints, load_checkpoint
from trainspeed.exported.manifest import Manifest
from trainspeed.rows import KIND
from trainspeed.train.config import TrainConfig
from trainspeed.train.resume_rule import changed_settings, finished_line, record_resume
from trainspeed.train.rows import CONFIG_FILE, METRICS_FILE
from trainspeed.train.runs import metrics_lines
from trainspeed.user_files import read_regular

LOGGED_KINDS = ("train", "val", "noise-scale")
"""The rows logged along the steps, kept up to the checkpoint a resume continues from."""
SETTINGS_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class ResumePoint:
    """A checkpoint that was read whole: its file, its leaves on the host, its position."""

    path: Path
    leaves: list[Any]
    position: Position


@dataclass(frozen=True)
class Continuation:
    """What a resume continues from (`point` None: the run never checkpointed; step 0)."""

    point: ResumePoint | None
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    passed_over: tuple[str, ...] = ()
    """Why newer checkpoints were passed over, one phrase each."""

    @property
    def step(self) -> int:
        return self.point.position.step if self.point is not None else 0


def newest_whole(run_dir: Path, manifest: Manifest) -> tuple[ResumePoint | None, tuple[str, ...]]:
    """The newest checkpoint that reads whole, and why newer ones were passed over; (None, ())
    for a run without checkpoints. UsageError when it has some and none is whole."""
    passed: list[str] = []
    for path in reversed(checkpoints(run_dir)):
        try:
            leaves, position = load_checkpoint(path, manifest)
        except Unfinished as error:
            passed.append(f"{path.name} {error.reason}")
            continue
        return ResumePoint(path, leaves, position), tuple(passed)
    if passed:
        raise UsageError(f"train: cannot resume: {'; '.join(passed)}; no whole checkpoint is left in "
                         f"{run_dir / CHECKPOINT_DIR}: restore one, or start a new run in another --out")
    return None, ()


def _check_fits(point: ResumePoint, manifest_sha256: str, batch_size: int, seed: int) -> None:
    position = point.position
    if position.manifest_sha256 != manifest_sha256 or position.batch_size != batch_size or position.seed != seed:
        raise UsageError(f"train --resume: {point.path} was made with another export, batch size or seed "
                         f"(batch {position.batch_size}, seed {position.seed}); resume with the same --exported, "
                         "--batch-size-per-device and --seed")


def recorded_settings(run_dir: Path) -> TrainConfig:
    """The settings the run's last invocation recorded; UsageError where there are none to read."""
    path = run_dir / CONFIG_FILE
    try:
        text = read_regular(path, str(path), SETTINGS_MAX_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"train: cannot resume: {path} is not UTF-8 text, so the run's settings are not known; "
                         "restore it, or start a new run in another --out") from None
    except UsageError as error:
        raise UsageError(f"train: cannot resume: {error}, so the run's settings are not known; restore it, or start "
                         "a new run in another --out") from None
    return TrainConfig.from_json(text, where=str(path))


def plan_resume(run_dir: Path, settings: TrainConfig, manifest: Manifest, manifest_sha256: str,
                total_steps: int) -> Continuation | None:
    """What `--resume` in `run_dir` continues from under `settings` (as this run records them);
    None when the run already finished (said so). Changes nothing; UsageError in one line when
    it cannot continue."""
    point, passed = newest_whole(run_dir, manifest)
    if point is None:
        return Continuation(None)
    _check_fits(point, manifest_sha256, settings.batch_size_per_device, settings.seed)
    changed = changed_settings(point.path, recorded_settings(run_dir), settings)
    finished = finished_line(run_dir, point.position.step, point.position.samples, total_steps)
    if finished is not None:
        print(finished, flush=True)
        return None
    return Continuation(point, changed, passed)


def keep_rows_until(run_dir: Path, step: int) -> None:
    """metrics.jsonl without the rows logged after `step` (they are logged again), nor the
    end-of-run rows of the invocations before, nor a line a kill cut short (read as every reader
    of a run reads it: `trainspeed.train.runs.metrics_lines`)."""
    lines = metrics_lines(run_dir)
    if not lines:
        return
    kept = [line.text for line in lines if line.row is not None and line.row.get(KIND) in LOGGED_KINDS
            and isinstance(line.row.get("step"), int) and line.row["step"] <= step]
    atomic_write_bytes(run_dir / METRICS_FILE, b"".join(text + b"\n" for text in kept))


def continue_run(run_dir: Path, continuation: Continuation) -> None:
    """Make the folder continue from `continuation` (call with its lock held, once every input is
    accepted): say what was passed over, record the resume, drop the rows after its step."""
    point = continuation.point
    if point is None:
        print(f"train: no checkpoint under {run_dir}; starting from step 0", flush=True)
    else:
        if continuation.passed_over:
            print(f"train: {'; '.join(continuation.passed_over)}; resuming from {point.path.name}, the newest whole "
                  "checkpoint", flush=True)
        record_resume(run_dir, point.path.name, point.position.step, continuation.changed)
    keep_rows_until(run_dir, continuation.step)
    if point is not None:
        print(f"train: resumed from {point.path} (step {point.position.step}, {point.position.samples:,} samples)",
              flush=True)
