"""The run directory: one run per directory, one writer at a time, resumes that are checked.

Everything here happens in the launcher, before any rank starts, so a refusal is one line and
leaves the directory as it was:
- `--out` must be writable (checked by writing and removing a probe file);
- a lock file held for the whole run keeps a second run out (its message names the holder);
- a fresh run refuses a directory that already holds a run (`--resume` continues it), and no run
  goes into a folder that holds a dataset or other files (checked before the lock file is made);
- temporary files of a write a kill interrupted (`.step-*.pt.*.tmp`, `.latest.*.tmp`, ...) are
  removed once the lock is held, when no writer of this run can be alive;
- a resume follows the plan of `trainspeed.train.resume` (the checkpoint `latest` names, or the
  newest valid one, checked against what the run builds; settings that shape the trajectory must
  be equal, the others may change and each change is appended to `resumes.jsonl`): it says what
  was passed over, points `latest` at the chosen checkpoint, moves checkpoints of later steps aside
  (never overwritten) and writes the plan the ranks load;
- rows that a killed run logged after the checkpoint the resume continues from are dropped from
  `metrics.jsonl`, so every step appears once (TensorBoard hides them itself: the writer purges
  from the resume step); every other row stays.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import math
import os
import re
from pathlib import Path

from trainspeed.atomic import append_line, atomic_write_text, check_writable_directory
from trainspeed.data.shards import INDEX_NAME
from trainspeed.errors import UsageError
from trainspeed.train.checkpoint import CHECKPOINT_DIR, CHECKPOINT_NAME, LATEST_POINTER, set_aside_after
from trainspeed.train.config import TrainConfig
from trainspeed.train.metrics import TENSORBOARD_DIR
from trainspeed.train.resume import RESUME_PLAN_FILE, ResumePlan, plan_resume, write_plan
from trainspeed.train.rows import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from trainspeed.train.run_lock import LOCK_FILE, hold_run_lock

LOG_DIR = "logs"
RESUMES_FILE = "resumes.jsonl"
INTERRUPTED_WRITES = (
    (".", [re.escape(name) for name in (CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, RESUME_PLAN_FILE)]),
    (CHECKPOINT_DIR, [CHECKPOINT_NAME.pattern, CHECKPOINT_NAME.pattern + r"\.sha256", re.escape(LATEST_POINTER)]),
)
"""(folder, file-name patterns) of the files written through a temporary file (`atomic_path`)."""
RUN_FILES = (CONFIG_FILE, CHECKPOINT_DIR, METRICS_FILE, SUMMARY_FILE, RESUMES_FILE, RESUME_PLAN_FILE, LOCK_FILE,
             LOG_DIR, TENSORBOARD_DIR)
"""What a run directory may hold: a fresh run goes into a new or empty folder, a resume continues
only a folder that holds a run and nothing of another writer."""


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
        self._refuse_foreign_files()

    def check_holds_nothing_else(self) -> None:
        """Before anything is written (the lock file included): a folder that exists must be empty
        or hold a run, never a dataset or another tool's files, which a run would be mixed into."""
        if self.path.is_dir() and not self.holds_a_run():
            self._refuse_foreign_files()

    def _refuse_foreign_files(self) -> None:
        """UsageError when the folder holds files no run writes (a dataset, another tool's output):
        a run is never mixed into them, and nothing there is touched."""
        foreign = sorted(entry.name for entry in self.path.iterdir()
                         if entry.name not in RUN_FILES and not entry.name.startswith(".write-probe-"))
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            what = "a dataset" if INDEX_NAME in foreign else "files of something else"
            raise UsageError(f"train: --out {self.path} holds {what} ({shown}), not a run; give a new or empty "
                             "folder, or one that holds a run (nothing there is changed)")

    def resume_plan(self, config: TrainConfig, processes: int) -> ResumePlan:
        """The checkpoint to continue from, checked against `config` (`resume.plan_resume`); changes
        nothing: `continue_from` does, once the caller decided to go on."""
        if not self.holds_a_run():
            self._refuse_foreign_files()
        return plan_resume(self.path, config, processes)

    def continue_from(self, plan: ResumePlan) -> ResumePlan:
        """Make the directory continue from `plan` (from step 0 when the run never checkpointed):
        say what was passed over, point `latest` at it, move later checkpoints aside, record the
        resume, drop the rows logged after it, and write the plan the ranks follow."""
        path = plan.path(self.path)
        if path is None:
            print(f"train: no checkpoint under {self.path}; starting from step 0", flush=True)
        else:
            if plan.skipped:
                print(f"train: {'; '.join(plan.skipped)}; resuming from {path.name}, the "
                      "newest valid checkpoint", flush=True)
                atomic_write_text(path.parent / LATEST_POINTER, path.name + "\n")
            kept = set_aside_after(self.path, plan.step)
            if kept is not None:
                names = ", ".join(sorted(p.name for p in kept.glob("step-*.pt")))
                print(f"train: moved the checkpoints after step {plan.step} ({names}) to {kept}, where the "
                      "resumed run cannot overwrite them", flush=True)
                plan = dataclasses.replace(plan, set_aside=str(kept.relative_to(self.path)))
            self.record_resume(plan)
            plan = dataclasses.replace(plan, **self.logged_seconds())
        self.forget_steps_after(plan.step)
        write_plan(self.path, plan)
        return plan

    def record_resume(self, plan: ResumePlan) -> None:
        row = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "checkpoint": plan.checkpoint,
               "step": plan.step, "changed": {key: list(values) for key, values in plan.changed.items()}}
        append_line(self.path / RESUMES_FILE, json.dumps(row, sort_keys=True))

    def logged_seconds(self) -> dict[str, float | None]:
        """The run's seconds the latest train row recorded (before the rows after the checkpoint
        are dropped): what the killed invocation had spent, redone steps included."""
        latest: dict[str, float | None] = {"logged_train_s": None, "logged_wall_s": None}
        metrics = self.path / METRICS_FILE
        if not metrics.exists():
            return latest
        for line in metrics.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if not isinstance(row, dict) or row.get("kind") != "train":
                continue
            for key, field_name in (("logged_train_s", "run_train_s"), ("logged_wall_s", "run_wall_s")):
                value = row.get(field_name)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    latest[key] = max(float(value), latest[key] or 0.0)
        return latest

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
