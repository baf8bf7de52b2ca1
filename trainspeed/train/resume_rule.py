"""What a `--resume` may change, when a run is finished, and how a resume is recorded: one rule for
the torch trainer (`trainspeed.train.resume`) and the trainer of exported steps
(`trainspeed.exported.resume`), in a module that imports no torch.

A resume continues a checkpoint under the settings it was written with: those that shape the
trajectory (the model, the sample order, the LR schedule the optimizer's state belongs to, the
batch) must be the same, and a resume that changes one is refused in one line naming each. The
others (a longer `--steps`, another `--eval-every`) may change; each change is recorded in
`resumes.jsonl`. A run whose checkpoint is at or past the run's end has nothing to do, and says so
without touching a file.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

from trainspeed.atomic import append_line
from trainspeed.errors import UsageError
from trainspeed.train.config import TrainConfig

RESUMES_FILE = "resumes.jsonl"
"""Each resume and the settings it changed, one row each."""
MUST_MATCH_ON_RESUME = (
    "workload", "size", "seed", "data", "synthetic_data", "batch_size_per_device", "world_size",
    "lr.base_lr", "lr.scaling", "lr.reference_batch", "lr.warmup_steps", "lr.min_lr_ratio", "init_from", "init_step",
    "batch.schedule", "batch.global_batch_min", "batch.global_batch_max", "batch.critical_batch",
    "batch.max_batch_per_device",
)
"""Settings a checkpoint cannot continue under: they change the model, the sample order, the
LR schedule that the saved optimizer and scheduler states belong to, or the batch schedule."""
CHANGES_NOT_RECORDED = ("resume", "out_dir", "progress")


def flat_settings(config: TrainConfig) -> dict[str, Any]:
    flat: dict[str, Any] = {"world_size": config.world_size}
    for key, value in dataclasses.asdict(config).items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": item for inner, item in value.items()})
        else:
            flat[key] = value
    return flat


def changed_settings(checkpoint: Path, before: TrainConfig, now: TrainConfig) -> dict[str, tuple[Any, Any]]:
    """Setting -> (its value in the checkpoint's run, its value now) for the settings a resume of
    `checkpoint` changes and records; UsageError naming every setting it cannot change."""
    old, new = flat_settings(before), flat_settings(now)
    mismatched = [key for key in MUST_MATCH_ON_RESUME if old.get(key) != new.get(key)]
    if mismatched:
        details = ", ".join(f"{key} {old.get(key)!r} -> {new.get(key)!r}" for key in mismatched)
        raise UsageError(f"train: cannot resume {checkpoint} with other settings ({details}); "
                         "resume with the run's settings or start a new run in another --out")
    return {key: (old[key], value) for key, value in new.items()
            if key in old and old[key] != value and key not in CHANGES_NOT_RECORDED}


def finished_line(run_dir: Path, step: int, samples: int | None, total_steps: int | None,
                  budget_samples: int | None = None) -> str | None:
    """What a resume says of a run whose checkpoint at `step` (`samples` trained) is at or past its
    end (`total_steps`, or where its steps are not known in advance `budget_samples`); None where
    the run has steps to do."""
    if total_steps is not None and step >= total_steps:
        return (f"train: the run in {run_dir} already finished step {step} of {total_steps}; "
                "nothing to do (give a larger --steps to train on)")
    if total_steps is None and budget_samples is not None and (samples or 0) >= budget_samples:
        return (f"train: the run in {run_dir} already trained {samples:,} of {budget_samples:,} samples; "
                "nothing to do (give a larger --samples to train on)")
    return None


def record_resume(run_dir: Path, checkpoint: str | None, step: int, changed: dict[str, tuple[Any, Any]]) -> None:
    """Append the resume from `checkpoint` (a file name in `checkpoints/`) at `step`, and the
    settings it changed, to `resumes.jsonl`."""
    row = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "checkpoint": checkpoint,
           "step": step, "changed": {key: list(values) for key, values in changed.items()}}
    append_line(run_dir / RESUMES_FILE, json.dumps(row, sort_keys=True))
