"""The run directory: one run per directory, one writer at a time.

Everything here happens in the launcher, before any rank starts, so a refusal is one line and
leaves the directory as it was:
- `--out` must be writable (checked by writing and removing a probe file);
- a lock file held for the whole run keeps a second run out (its message names the holder);
- a fresh run refuses a directory that already holds a run (`--resume` continues it, through
  `trainspeed.train.resume.prepare`), and no run goes into a folder that holds a dataset or other
  files (checked before the lock file is made);
- temporary files of a write a kill interrupted (`.step-*.pt.*.tmp`, `.latest.*.tmp`, ...) are
  removed once the lock is held, when no writer of this run can be alive.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from trainspeed.atomic import atomic_write_text, check_writable_directory
from trainspeed.data.shards import INDEX_NAME
from trainspeed.errors import UsageError
from trainspeed.train.checkpoint import CHECKPOINT_DIR, CHECKPOINT_NAME, LATEST_POINTER
from trainspeed.train.config import TrainConfig
from trainspeed.train.data_read import DATA_FILE
from trainspeed.train.resume_rule import RESUMES_FILE
from trainspeed.train.metrics import TENSORBOARD_DIR
from trainspeed.train.rows import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from trainspeed.train.run_lock import LOCK_FILE, hold_run_lock

LOG_DIR = "logs"
RESUME_PLAN_FILE = "resume_plan.json"
"""The checkpoint the ranks of a resume load, chosen and checked once by the launcher."""
INTERRUPTED_WRITES = (
    (".", [re.escape(name) for name in (CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, RESUME_PLAN_FILE, DATA_FILE)]),
    (CHECKPOINT_DIR, [CHECKPOINT_NAME.pattern, CHECKPOINT_NAME.pattern + r"\.sha256", re.escape(LATEST_POINTER)]),
)
"""(folder, file-name patterns) of the files written through a temporary file (`atomic_path`)."""
RUN_FILES = (CONFIG_FILE, DATA_FILE, CHECKPOINT_DIR, METRICS_FILE, SUMMARY_FILE, RESUMES_FILE, RESUME_PLAN_FILE, LOCK_FILE,
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

    @contextlib.contextmanager
    def taken(self, fresh: bool) -> Iterator[None]:
        """The directory held for this run while the block lasts: checked to hold nothing of another
        writer and to be writable before the lock file is made, then locked, its interrupted writes
        removed, and, for a `fresh` run, refused where it holds a run already."""
        self.check_holds_nothing_else()
        self.check_writable()
        with self.lock():
            self.remove_interrupted_writes()
            if fresh:
                self.check_fresh()
            yield

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

    def write_config(self, config: TrainConfig) -> Path:
        path = self.path / CONFIG_FILE
        atomic_write_text(path, config.to_json() + "\n")
        return path

