"""The run folder of `train --exported` (`--out`), checked before anything is written in it.

A fresh run takes a new or empty folder; `--resume` takes one that holds a run of this trainer
(`trainspeed.train.run_trainer`: a run of the torch trainer is refused, whose checkpoints this one
cannot read); neither mixes a run into a folder of other files. Nothing here writes: the folder is
made, probed and locked only once every input of the run has been accepted
(`trainspeed.exported.train`).
"""

from __future__ import annotations

from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.exported.checkpoint import CHECKPOINT_DIR
from trainspeed.train.config import TrainConfig
from trainspeed.train.data_read import DATA_FILE
from trainspeed.train.resume_rule import RESUMES_FILE
from trainspeed.train.rows import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from trainspeed.train.run_lock import LOCK_FILE
from trainspeed.train.run_trainer import refuse_another_trainers_run

RUN_FILES = (CONFIG_FILE, DATA_FILE, METRICS_FILE, SUMMARY_FILE, CHECKPOINT_DIR, LOCK_FILE, RESUMES_FILE)
"""What the folder of a run of exported steps holds."""


def holds_a_run(run_dir: Path) -> bool:
    return run_dir.is_dir() and any((run_dir / name).exists() for name in (CONFIG_FILE, METRICS_FILE, CHECKPOINT_DIR))


def check_run_folder(run_dir: Path, config: TrainConfig) -> None:
    """UsageError in one line where `--out` cannot take this run: another trainer's run to
    resume, files of something else, a run where a fresh one was asked for, or none to resume."""
    holds = holds_a_run(run_dir)
    if config.resume and holds:
        refuse_another_trainers_run(run_dir, config)
    if run_dir.is_dir():
        foreign = sorted(entry.name for entry in run_dir.iterdir() if entry.name not in RUN_FILES)
        if foreign:
            raise UsageError(f"train: --out {run_dir} holds files of something else ({', '.join(foreign[:3])}), not a "
                             "run; give a new or empty folder (nothing there is changed)")
    if holds and not config.resume:
        raise UsageError(f"train: {run_dir} already holds a run; continue it with --resume or choose another --out")
    if config.resume and not holds:
        raise UsageError(f"train: --resume: {run_dir} holds no run to continue; drop --resume to start one")
