"""Starting a run from a checkpoint of another run (`trainspeed train --init-from`).

A branch of a run continues that run's model at another batch: the critical-batch study
(`trainspeed study critical-batch`) starts several from each checkpoint of one base run. A branch
is a run of its own, in a new run directory. From the checkpoint it takes the networks (their
buffers included) and the optimizers' per-parameter states (Adam's moments and step counts), and
nothing else: its batch, its learning rate and schedule, its seed (so its data order and random
numbers), its steps and its budget are its own, counted from step 0, and the optimizers keep
this run's hyperparameters (the learning rate above all), not the checkpoint's.

The checkpoint is checked as a resume checks one (`trainspeed.train.resume.check_checkpoint`), by
the launcher, before anything is written: its checksum, torch's `weights_only` loading (it is data,
never code), every tensor against what its settings build. Its workload and size are compared with
this run's first, before anything is built from it, since building imports the workload its
settings name and a run directory is data. Each rank then loads the file again (its checksum again)
and records where it started in its summary (`InitFrom`). A resumed branch continues from its own
checkpoints; one that has none yet starts from --init-from again.

A checkpoint holds every network and optimizer state whatever the target and ranks of the run that
wrote it: rank 0's (equal on every rank, so an N-rank base run's branches may run on any number of
ranks), and on a remote target the server's, fetched at each checkpoint. So any run's checkpoint
starts a branch on any target.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainspeed.errors import UsageError
from trainspeed.train.checkpoint import CheckpointRefused, checkpoint_dir, checkpoint_name, load_checkpoint, step_files
from trainspeed.train.config import TrainConfig
from trainspeed.train.resume import CheckpointMismatch, check_checkpoint, checkpoint_config, name_step
from trainspeed.train.rows import InitFrom
from trainspeed.train.runs import is_run_directory
from trainspeed.workloads.base import Trainable

SHOWN_STEPS = 8
"""Steps of the checkpoints a run holds listed when the one asked for is not there."""
KEEP_EVERY_CHECKPOINT = "--checkpoint-every K --keep-checkpoints 0"
"""How a base run keeps the checkpoints its branches start from (every K steps, none deleted)."""


def init_checkpoint(config: TrainConfig) -> Path | None:
    """The checkpoint file `--init-from` names (None: no --init-from): RUN_DIR/checkpoints/step-S.pt
    for --init-from RUN_DIR --init-step S, or the file itself; UsageError where the two disagree or
    a run directory comes without its step."""
    if config.init_from is None:
        return None
    given = Path(config.init_from)
    named = name_step(given)
    if named is not None:
        if config.init_step is not None and config.init_step != named:
            raise UsageError(f"train: --init-from {given} is the checkpoint of step {named}, and --init-step says "
                             f"{config.init_step}; give one of the two")
        return given
    if config.init_step is None:
        raise UsageError(f"train: --init-from {given}: give the step of its checkpoint (--init-step S), or name the "
                         "checkpoint file (RUN_DIR/checkpoints/step-NNNNNNNNN.pt)")
    return checkpoint_dir(given) / checkpoint_name(config.init_step)


def checkpoint_steps(run_dir: Path) -> list[int]:
    """The steps of the checkpoints a run holds, oldest first."""
    return sorted(step for step, _ in step_files(run_dir))


def steps_text(steps: list[int]) -> str:
    if not steps:
        return "none"
    shown = ", ".join(map(str, steps[:SHOWN_STEPS]))
    return shown + (f" and {len(steps) - SHOWN_STEPS} more up to {steps[-1]}" if len(steps) > SHOWN_STEPS else "")


def check_start(path: Path, workload: str, size: str | None,
                what: str = "train: --init-from") -> tuple[TrainConfig, dict[str, Any]]:
    """The checkpoint at `path` as a start of a run of `workload` at `size`, checked: it exists
    (else the steps its run holds, and how a run keeps them), it loads as data, its workload and
    size are this run's (compared before anything is built from it), and it fits what its settings
    build (`check_checkpoint`). Returns its run's settings and its payload; UsageError in one line
    otherwise."""
    run_dir = path.parent.parent
    if not path.exists() and not path.is_symlink():
        if not is_run_directory(run_dir):
            raise UsageError(f"{what} {run_dir} is not a run directory of `trainspeed train` (it has no "
                             "train_config.json); name the run to start from")
        raise UsageError(f"{what}: {run_dir} holds no checkpoint of step {name_step(path)} (its checkpoints: steps "
                         f"{steps_text(checkpoint_steps(run_dir))}); a run keeps one every K steps with "
                         f"{KEEP_EVERY_CHECKPOINT}")
    try:
        payload = load_checkpoint(path)
        recorded = checkpoint_config(path, payload)
        if recorded.workload != workload:
            raise CheckpointMismatch(path, f"was written by a run of workload {recorded.workload[:60]!r}, and this "
                                     f"run trains {workload!r}; start from a run of the same workload")
        if size is not None and recorded.size != size:
            raise CheckpointMismatch(path, f"was written by a run of size {str(recorded.size)[:60]!r}, and this run "
                                     f"trains size {size!r}; give its --size")
        check_checkpoint(path, payload)
    except (CheckpointRefused, CheckpointMismatch) as error:
        raise UsageError(f"{what}: {error}") from None
    return recorded, payload


def check_init(config: TrainConfig) -> None:
    """The launcher's check of --init-from, before anything is written (the config's size resolved)."""
    path = init_checkpoint(config)
    if path is not None:
        check_start(path, config.workload, config.size)


def _own_hyperparameters(saved: dict[str, Any], optimizer: Any) -> dict[str, Any]:
    """An optimizer's saved state with this run's param-group settings (learning rate, betas, weight
    decay, what its schedulers set) in place of the saved ones: torch's `load_state_dict` takes
    every group setting from the state it loads, and a branch keeps its own."""
    groups = [{**saved_group, **{key: value for key, value in own.items() if key != "params"}}
              for saved_group, own in zip(saved["param_groups"], optimizer.param_groups)]
    return {**saved, "param_groups": groups}


def start_from(config: TrainConfig, trainable: Trainable | None) -> InitFrom:
    """Read the checkpoint --init-from names (its checksum again) and, where `trainable` is given,
    load its networks and optimizer states into it (this run's hyperparameters kept); returns
    where the run started. A resumed run passes None: it continues from its own checkpoint and
    only records where it started."""
    path = init_checkpoint(config)
    assert path is not None
    expected = name_step(path)
    try:
        payload = load_checkpoint(path)
    except CheckpointRefused as error:
        raise UsageError(f"train: --init-from: {error}") from None
    if payload.get("step") != expected:
        raise UsageError(f"train: --init-from {path} changed after the launcher checked it; start the run again")
    if trainable is not None:
        saved = payload["trainable"]
        trainable.load_state_dict({
            "networks": saved["networks"],
            "optimizers": {name: _own_hyperparameters(saved["optimizers"][name], optimizer)
                           for name, optimizer in trainable.optimizers.items()}})
    return InitFrom(run_dir=str(path.parent.parent), checkpoint=str(path), step=payload["step"],
                    samples=payload["step"] * payload["global_batch"], global_batch=payload["global_batch"])
