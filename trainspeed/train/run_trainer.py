"""Which trainer wrote a run folder, and the rule that only that trainer continues it.

Two trainers write run folders of the same files: `trainspeed train` (the torch trainer, which
takes torch checkpoints, `step-N.pt`) and `trainspeed train --exported DIR` (steps exported for a
machine with JAX only, whose checkpoints are npz files, `step-N.npz`). Neither can read the
other's checkpoints, so a `--resume` of the other's run would see none, start from step 0 and drop
the rows of every step the run had done. A run says which trainer wrote it: its settings
(`train_config.json`) name the exported folder it trains (`TrainConfig.exported`); a run written
before they did is known by its checkpoints' kind, or its summary's `data.exported`. The other
trainer refuses it in one line before anything in the folder changes. It imports no torch: both
trainers check the rule.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.train.config import TrainConfig
from trainspeed.train.rows import CONFIG_FILE, SUMMARY_FILE
from trainspeed.user_files import FileRefused, read_regular
from trainspeed.user_json import JSONRefused, loads

CHECKPOINT_DIR = "checkpoints"
TORCH = "trainspeed train"
EXPORTED = "trainspeed train --exported"
CHECKPOINT_KINDS = ((re.compile(r"step-\d{9}\.pt"), TORCH), (re.compile(r"step-\d{9}\.npz"), EXPORTED))
"""A checkpoint's file name and the trainer that writes it (`checkpoints/`)."""
RECORD_MAX_BYTES = 1 << 20


def trainer_of(config: TrainConfig) -> str:
    """The trainer that runs `config`."""
    return EXPORTED if config.exported is not None else TORCH


def _settings_trainer(run_dir: Path) -> str | None:
    """The trainer the run's settings name; None where they cannot be read."""
    try:
        text = read_regular(run_dir / CONFIG_FILE, CONFIG_FILE, RECORD_MAX_BYTES).decode("utf-8")
        return trainer_of(TrainConfig.from_json(text))
    except (UsageError, UnicodeDecodeError, OSError):
        return None


def _checkpoints_trainer(run_dir: Path) -> str | None:
    """The trainer whose checkpoints the run holds (None: none of either)."""
    folder = run_dir / CHECKPOINT_DIR
    names = [entry.name for entry in folder.iterdir()] if folder.is_dir() else []
    for pattern, trainer in CHECKPOINT_KINDS:
        if any(pattern.fullmatch(name) for name in names):
            return trainer
    return None


def _summary_trainer(run_dir: Path) -> str | None:
    """`trainspeed train --exported` where the run's summary names an exported folder."""
    try:
        summary = loads(read_regular(run_dir / SUMMARY_FILE, SUMMARY_FILE, RECORD_MAX_BYTES).decode("utf-8"))
    except (FileRefused, UnicodeDecodeError, JSONRefused, OSError):
        return None
    data = summary.get("data") if isinstance(summary, dict) else None
    return EXPORTED if isinstance(data, dict) and data.get("exported") is not None else None


def recorded_trainer(run_dir: Path) -> str | None:
    """The trainer that wrote the run in `run_dir`, or None where nothing says (no run there).
    The checkpoints come first: they are what a resume continues, and their kind cannot be
    mistaken. Settings without an exported folder were also written by the exported trainer
    before its runs recorded one, so they count only after the summary."""
    settings = _settings_trainer(run_dir)
    return _checkpoints_trainer(run_dir) or (settings if settings == EXPORTED else None) \
        or _summary_trainer(run_dir) or settings


def refuse_another_trainers_run(run_dir: Path, config: TrainConfig) -> None:
    """UsageError in one line where the run in `run_dir` was written by the other trainer than the
    one `config` runs (nothing in the folder is read further or changed)."""
    wrote, this = recorded_trainer(run_dir), trainer_of(config)
    if wrote is None or wrote == this:
        return
    how = ("`trainspeed train --exported DIR --resume` with the folder it trained (where only JAX is, or here)"
           if wrote == EXPORTED else "`trainspeed train --resume` (the torch trainer, with its --target)")
    raise UsageError(f"train: --resume: {run_dir} holds a run of `{wrote}`, whose checkpoints `{this}` cannot read "
                     f"(it would start over at step 0); continue it with {how}, or give another --out")
