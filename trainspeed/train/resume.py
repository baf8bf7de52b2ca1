"""Resuming a run, in one place: the launcher prepares the resume once; each rank restores from it.

`prepare` runs in the launcher with the run's lock held, before anything in the run directory
changes. It takes the checkpoint `checkpoints/latest` names, or the newest one that loads when that
one does not (saying so), and checks it against what the run's settings build (`check_checkpoint`):
its step against its file name, its scalars' types, the settings it was written under, every
network tensor's name, shape and dtype, the optimizer and scheduler states, one part per rank with
a loader position, RNG states of the right form and the networks' buffers; then the settings that
shape the trajectory, the number of rank processes and the global batch against this run's. A
checkpoint that loads but does not fit is refused in one line: it is neither passed over for an
older one nor a reason to start over, so a `--resume` on a directory that holds checkpoints never
trains from step 0. Once it goes on, it points `latest` at the chosen checkpoint, moves the
checkpoints of later steps aside (`checkpoints/superseded/N/`, never overwritten), records the
resume in `resumes.jsonl`, drops the metrics rows of the steps it trains again and writes the plan
(`resume_plan.json`).

`restore` runs in each rank: it reads the plan and loads the checkpoint the plan names (it searches
nothing itself) into the parts the rank continues with (`RankParts`: the trainable, the schedules,
the loader's position, the RNG states and buffers, the noise-scale meter, the --until tracker, the
batch schedule's state),
each through its own load method, and continues the run's clock. The loop holds no resume code:
it builds its parts, calls `restore`, and starts from the step it returns.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch

from trainspeed.atomic import atomic_write_bytes, atomic_write_text
from trainspeed.errors import UsageError
from trainspeed.train.checkpoint import (
    CHECKPOINT_NAME,
    LATEST_POINTER,
    SUPERSEDED_DIR,
    FoundCheckpoint,
    checkpoint_dir,
    checksum_path,
    find_checkpoint,
    load_checkpoint,
    restore_rng_states,
    step_files,
)
from trainspeed.train.config import TrainConfig
from trainspeed.train.rows import METRICS_FILE
from trainspeed.train.resume_rule import changed_settings, finished_line, record_resume
from trainspeed.train.run_dir import RESUME_PLAN_FILE, RunDirectory
from trainspeed.train.run_trainer import refuse_another_trainers_run
from trainspeed.train.runs import logged_seconds, metrics_lines
from trainspeed.train.time_to_target import RunTotals, TargetTracker
from trainspeed.user_files import FileRefused, read_regular
from trainspeed.user_json import parse_json
from trainspeed.workloads import get_workload
from trainspeed.workloads.base import Trainable, setup_optimizers

if TYPE_CHECKING:
    from trainspeed.data.base import BatchLoader
    from trainspeed.gradients.noise_scale import NoiseScaleMeter
    from trainspeed.targets.base import Target
    from trainspeed.train.batch_schedule import BatchPlan

PLAN_MAX_BYTES = 1 << 20
SHOWN_NAMES = 3
"""Names listed when keys are missing or extra (the count says how many more)."""


class CheckpointMismatch(UsageError):
    """A checkpoint that loads (its checksum matches, it is plain data) but does not fit the run
    that would continue from it: refused, never passed over."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


# --- what a checkpoint must hold --------------------------------------------------------------------

def _whole(payload: dict[str, Any], key: str, path: Path, least: int = 0) -> int:
    value = payload.get(key)
    if key not in payload:
        raise CheckpointMismatch(path, f"has no {key!r}: it is not a checkpoint of `trainspeed train`")
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise CheckpointMismatch(path, f"records {key} {_shown(value)}, not a whole number >= {least}")
    return value


def _shown(value: Any) -> str:
    """A value from someone else's file, short and on one line."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) else f"a {type(value).__name__}"
    return text[:60]


def name_step(path: Path) -> int | None:
    """The step a checkpoint's file name says (`step-000000060.pt` -> 60), or None."""
    match = CHECKPOINT_NAME.fullmatch(path.name)
    return int(match.group(1)) if match else None


def checkpoint_config(path: Path, payload: dict[str, Any]) -> TrainConfig:
    """The settings a checkpoint was written under, after its scalars are checked: a step equal to
    the one its name says, an epoch, the processes and global batch; CheckpointMismatch otherwise."""
    step = _whole(payload, "step", path)
    named = name_step(path)
    if named is not None and step != named:
        raise CheckpointMismatch(path, f"records step {step}, but its name says step {named}: its contents are "
                                 "another step's (restore the file or move it out of checkpoints/)")
    _whole(payload, "epoch", path)
    _whole(payload, "world_size", path, least=1)
    _whole(payload, "global_batch", path, least=1)
    text = payload.get("config")
    if not isinstance(text, str):
        raise CheckpointMismatch(path, f"records its settings as {_shown(text)}, not as the JSON text the trainer writes")
    try:
        return TrainConfig.from_json(text, where="its settings")
    except UsageError as error:
        raise CheckpointMismatch(path, f"has settings that cannot be read ({error})") from None


def built_for_checking(config: TrainConfig) -> Trainable:
    """What the run's settings build, on the host, with its optimizers: the shape every checkpoint
    of the run must have."""
    trainable = get_workload(config.workload).build(config.size, seed=config.seed)
    setup_optimizers(trainable, fused=False)
    return trainable


def check_checkpoint(path: Path, payload: dict[str, Any]) -> TrainConfig:
    """The checkpoint's settings once everything a resume or an evaluation uses is checked against
    what those settings build; CheckpointMismatch naming the first part that does not fit."""
    config = checkpoint_config(path, payload)
    step = payload["step"]
    trainable = built_for_checking(config)
    state = _part(payload, "trainable", dict, path)
    networks = _part(state, "networks", dict, path, "trainable")
    _same_names(path, "it", "network", networks, trainable.networks)
    for name, network in trainable.networks.items():
        _check_tensors(path, f"network {name!r}", _part(networks, name, dict, path, "networks"), network.state_dict())
    optimizers = _part(state, "optimizers", dict, path, "trainable")
    _same_names(path, "it", "optimizer", optimizers, trainable.optimizers)
    for name, optimizer in trainable.optimizers.items():
        _check_optimizer(path, name, optimizers[name], optimizer)
    schedulers = _part(payload, "schedulers", dict, path)
    _same_names(path, "it", "learning-rate schedule", schedulers, trainable.optimizers)
    for name, scheduler in schedulers.items():
        if not isinstance(scheduler, dict) or scheduler.get("last_epoch") != step:
            shown = scheduler.get("last_epoch") if isinstance(scheduler, dict) else scheduler
            raise CheckpointMismatch(path, f"has a learning-rate schedule {name!r} at step {_shown(shown)}, not at "
                                     f"its step {step}")
    if config.batch.schedule is not None:
        _check_schedule_state(path, payload.get("batch_schedule"))
    ranks = _part(payload, "ranks", list, path)
    if len(ranks) != payload["world_size"]:
        raise CheckpointMismatch(path, f"holds {len(ranks)} rank parts for {payload['world_size']} ranks")
    buffers = {name: dict(network.named_buffers()) for name, network in trainable.networks.items()}
    for rank, part in enumerate(ranks):
        _check_rank_part(path, rank, part, buffers)
    return config


def _check_schedule_state(path: Path, state: Any) -> None:
    """The batch schedule's state loads (its batch, count and switches are numbers)."""
    from trainspeed.train.batch_schedule import BatchPlan

    try:
        BatchPlan(entries=None, rule=None, global_batch=1).load_state(state)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise CheckpointMismatch(path, f"holds a batch schedule's state that does not load ({_first_line(error)}); "
                                 "it is not a checkpoint of this run's schedule") from None


def _part(container: dict[str, Any] | list[Any], key: str, kind: type, path: Path, inside: str = "") -> Any:
    where = f"{inside}[{key!r}]" if inside else repr(key)
    if not isinstance(container, dict) or key not in container:
        raise CheckpointMismatch(path, f"has no {where}: it is not a checkpoint of `trainspeed train`")
    value = container[key]
    if type(value) is not kind:
        raise CheckpointMismatch(path, f"holds {_shown(value)} as {where}, not a {kind.__name__}")
    return value


def _names(names: list[Any]) -> str:
    shown = ", ".join(repr(name)[:40] for name in names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


def _same_names(path: Path, owner: str, noun: str, given: dict[Any, Any], expected: dict[Any, Any]) -> None:
    """`owner` ("network 'policy'") holds the `noun`s ("tensor") the run's model has, no more, no fewer."""
    missing = [name for name in expected if name not in given]
    extra = [name for name in given if name not in expected]
    if missing or extra:
        parts = ([f"lacks {noun} {_names(missing)}"] if missing else []) + \
                ([f"has extra {noun} {_names(extra)}"] if extra else [])
        raise CheckpointMismatch(path, f"does not fit the run's model: {owner} {' and '.join(parts)}")


def _check_tensors(path: Path, what: str, given: dict[Any, Any], expected: dict[str, torch.Tensor]) -> None:
    """Same names, and each a tensor of the expected shape and dtype."""
    _same_names(path, what, "tensor", given, expected)
    for key, reference in expected.items():
        tensor = given[key]
        if not isinstance(tensor, torch.Tensor):
            raise CheckpointMismatch(path, f"holds {_shown(tensor)} as {what} {key!r}, not a tensor")
        if tensor.shape != reference.shape or tensor.dtype != reference.dtype:
            raise CheckpointMismatch(path, f"does not fit the run's model: {what} {key!r} is {tensor.dtype} "
                                     f"{list(tensor.shape)}, the model's is {reference.dtype} {list(reference.shape)}")


def _check_optimizer(path: Path, name: str, given: Any, optimizer: torch.optim.Optimizer) -> None:
    """The state loads into the run's optimizer (groups of the same sizes), and every per-parameter
    tensor is a scalar or has its parameter's shape (what every torch.optim optimizer keeps)."""
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    if not isinstance(given, dict) or not isinstance(given.get("state"), dict) or not isinstance(given.get("param_groups"), list):
        raise CheckpointMismatch(path, f"holds {_shown(given)} as the state of optimizer {name!r}, not an optimizer's state")
    for index, entry in given["state"].items():
        if not isinstance(index, int) or not 0 <= index < len(parameters) or not isinstance(entry, dict):
            raise CheckpointMismatch(path, f"has a state of optimizer {name!r} for parameter {_shown(index)}, which "
                                     f"the model's {len(parameters)} parameters do not have")
        for key, value in entry.items():
            shape = parameters[index].shape
            if isinstance(value, torch.Tensor) and value.numel() > 1 and value.shape != shape:
                raise CheckpointMismatch(path, f"does not fit the run's model: optimizer {name!r} keeps {key!r} of "
                                         f"parameter {index} as {list(value.shape)}, the parameter is {list(shape)}")
    try:
        optimizer.load_state_dict(given)
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as error:
        raise CheckpointMismatch(path, f"has a state of optimizer {name!r} that does not fit the run's model "
                                 f"({_first_line(error)})") from None


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:160]


def _check_rank_part(path: Path, rank: int, part: Any, buffers: dict[str, dict[str, torch.Tensor]]) -> None:
    where = f"rank {rank}'s part"
    if not isinstance(part, dict):
        raise CheckpointMismatch(path, f"holds {_shown(part)} as {where}, not a dict")
    loader = _part(part, "loader", dict, path, where)
    epoch = loader.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:  # every loader keeps its epoch
        raise CheckpointMismatch(path, f"records {where}'s loader epoch as {_shown(epoch)}, not a whole number >= 0")
    _check_rng_states(path, where, _part(part, "rng", dict, path, where))
    given = _part(part, "buffers", dict, path, where)
    if not given:
        return  # a target whose model lives elsewhere (a remote server) keeps no buffers on the rank
    _same_names(path, f"{where}'s buffers", "network", given, buffers)
    for name, expected in buffers.items():
        _check_tensors(path, f"{where}'s buffers of network {name!r}", _part(given, name, dict, path, where), expected)


RNG_CHECKS: dict[str, Callable[[Any], None]] = {
    "python": lambda state: random.Random().setstate(state),
    "numpy": lambda state: np.random.RandomState().set_state({
        "bit_generator": state["bit_generator"],
        "state": {"key": np.asarray(state["key"], dtype=np.uint32), "pos": state["pos"]},
        "has_gauss": state["has_gauss"], "gauss": state["gauss"]}),
    "torch": lambda state: torch.Generator().set_state(state),
}
"""Each host RNG state, restored into a generator of its own: what the rank restores, checked
without touching this process's generators."""


def _check_rng_states(path: Path, where: str, states: dict[str, Any]) -> None:
    for name, check in RNG_CHECKS.items():
        if name not in states:
            raise CheckpointMismatch(path, f"has no {name} RNG state in {where}")
        try:
            if name == "numpy" and (not isinstance(states[name], dict) or len(states[name].get("key", ())) != 624):
                raise ValueError("not 624 words of MT19937 state")
            check(states[name])
        except Exception as error:  # noqa: BLE001 - each generator refuses a bad state its own way
            raise CheckpointMismatch(path, f"has a {name} RNG state in {where} that its generator refuses "
                                     f"({_first_line(error)})") from None
    device = states.get("device")
    if device is not None and (isinstance(device, (bool, float, str)) or
                               not isinstance(device, (int, torch.Tensor, list, tuple, dict))):
        raise CheckpointMismatch(path, f"holds {_shown(device)} as the device RNG state in {where} (a target keeps "
                                 "a seed or tensors there)")


# --- the plan ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResumePlan:
    """What the launcher decided: the ranks continue from `checkpoint` (a file name in
    `checkpoints/`) at `step`, or from step 0 when the run never checkpointed (`checkpoint` None)."""

    step: int
    checkpoint: str | None
    changed: dict[str, tuple[Any, Any]] = dataclasses.field(default_factory=dict)
    """Setting -> (value in the checkpoint's run, value now) for settings allowed to change."""
    skipped: tuple[str, ...] = ()
    """Why `latest` or newer checkpoints were passed over (empty: it is the one `latest` names)."""
    set_aside: str | None = None
    """The folder the checkpoints of later steps were moved to, once `prepare` moved them."""
    logged_train_s: float | None = None
    """The run's training seconds its last logged window recorded before this resume (a killed
    invocation's time after its checkpoint, which the resumed run adds to its clock)."""
    logged_wall_s: float | None = None
    samples: int | None = None
    """Samples the run had trained at the checkpoint (None: from step 0)."""

    def path(self, run_dir: Path) -> Path | None:
        return None if self.checkpoint is None else checkpoint_dir(run_dir) / self.checkpoint

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)


def plan_resume(run_dir: Path, config: TrainConfig, processes: int) -> ResumePlan:
    """The plan of `--resume` in `run_dir` under `config` (run by `processes` rank processes):
    the checkpoint to continue from, checked; changes nothing. UsageError when the run has
    checkpoints but none that loads, or when the one chosen does not fit."""
    try:
        found = find_checkpoint(run_dir, check=functools.partial(_check_for_resume, workload=config.workload))
    except CheckpointMismatch as error:
        raise UsageError(f"train: cannot resume: {error}; restore it, or start a new run in another --out") from None
    except UsageError as error:
        raise UsageError(f"train: cannot resume: {error}; restore a valid checkpoint or start a new "
                         "run in another --out") from None
    if found is None:
        return ResumePlan(step=0, checkpoint=None)
    return _plan_for(found, config, processes)


def _check_for_resume(path: Path, payload: dict[str, Any], workload: str) -> TrainConfig:
    """`check_checkpoint` for a run that trains `workload`: a checkpoint of another workload is
    refused before anything is built from it, since building imports the workload its settings
    name, and a run directory is data, never code (a module of the user's is imported only where
    the user names it on the command line)."""
    recorded = checkpoint_config(path, payload)
    if recorded.workload != workload:
        raise CheckpointMismatch(path, f"was written by a run of workload {_shown(recorded.workload)}, and this run "
                                 f"trains {workload!r}: resume with the run's --workload")
    return check_checkpoint(path, payload)


def _plan_for(found: FoundCheckpoint, config: TrainConfig, processes: int) -> ResumePlan:
    changed = changed_settings(found.path, TrainConfig.from_json(found.payload["config"]), config)
    if found.payload["world_size"] != processes:
        raise UsageError(f"train: cannot resume {found.path}: it was written by {found.payload['world_size']} rank "
                         f"processes, this run has {processes}; resume with the same --nproc/--nnodes and target")
    if config.batch.schedule is None and found.payload["global_batch"] != config.global_batch:
        raise UsageError(f"train: cannot resume {found.path}: it records global batch {found.payload['global_batch']}, "
                         f"but the run's settings make {config.global_batch}; restore it, or start a new run in "
                         "another --out")
    return ResumePlan(step=found.payload["step"], checkpoint=found.path.name, changed=changed, skipped=found.skipped,
                      samples=trained_samples(found.payload))


def trained_samples(payload: dict[str, Any]) -> int:
    """The samples a checkpoint's run had trained: its own record, or (a checkpoint of a fixed batch
    written before runs recorded them) its steps at its global batch."""
    samples = payload.get("samples")
    if isinstance(samples, int) and not isinstance(samples, bool) and samples >= 0:
        return samples
    return payload["step"] * payload["global_batch"]


def write_plan(run_dir: Path, plan: ResumePlan) -> Path:
    path = Path(run_dir) / RESUME_PLAN_FILE
    atomic_write_text(path, plan.to_json() + "\n")
    return path


def read_plan(run_dir: Path) -> ResumePlan:
    """The plan the launcher wrote for this resume (in a rank); UsageError if it is not there."""
    path = Path(run_dir) / RESUME_PLAN_FILE
    try:
        raw = parse_json(read_regular(path, str(path), PLAN_MAX_BYTES).decode("utf-8"), str(path))
        plan = ResumePlan(step=raw["step"], checkpoint=raw["checkpoint"],
                          changed={key: tuple(value) for key, value in raw["changed"].items()},
                          skipped=tuple(raw["skipped"]), set_aside=raw["set_aside"],
                          logged_train_s=_seconds(raw.get("logged_train_s")),
                          logged_wall_s=_seconds(raw.get("logged_wall_s")), samples=raw.get("samples"))
    except (FileRefused, UnicodeDecodeError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(f"train: {path}: not the resume plan the launcher writes ({_first_line(error)}); "
                         "start the resume with `trainspeed train ... --resume`") from None
    if not isinstance(plan.step, int) or (plan.checkpoint is not None and name_step(Path(plan.checkpoint)) != plan.step):
        raise UsageError(f"train: {path}: a resume plan of step {plan.step!r} from {plan.checkpoint!r} does not "
                         "name a checkpoint of that step; start the resume with `trainspeed train ... --resume`")
    return plan


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"seconds recorded as {_shown(value)}")
    return float(value)


def load_planned(run_dir: Path, plan: ResumePlan) -> dict[str, Any] | None:
    """The payload of the checkpoint the plan names (read as data again, and of the plan's step),
    or None for a plan from step 0."""
    path = plan.path(run_dir)
    if path is None:
        return None
    payload = load_checkpoint(path)
    if payload.get("step") != plan.step:
        raise UsageError(f"train: {path} changed after the launcher checked it (it records step "
                         f"{_shown(payload.get('step'))}, the plan step {plan.step}); resume again")
    return payload


# --- the launcher: prepare --------------------------------------------------------------------------

def prepare(run_dir: RunDirectory, config: TrainConfig, processes: int, total_steps: int | None,
            budget_samples: int | None = None) -> ResumePlan | None:
    """Prepare `--resume` in `run_dir` (call with its lock held) for `processes` rank processes:
    choose and check the checkpoint, then make the directory continue from it and write the plan
    the ranks follow. None when the run already finished `total_steps` (or, where its steps are not
    known in advance, `budget_samples`; said so; nothing changed). UsageError, before anything
    changes, when the run has checkpoints but none that fits."""
    run_dir.check_holds_nothing_else()  # again, now that the lock is held
    refuse_another_trainers_run(run_dir.path, config)
    plan = plan_resume(run_dir.path, config, processes)
    finished = None if plan.checkpoint is None else finished_line(run_dir.path, plan.step, plan.samples, total_steps,
                                                                  budget_samples)
    if finished is not None:
        print(finished)
        return None
    return _continue_from(run_dir.path, plan)


def _continue_from(run_dir: Path, plan: ResumePlan) -> ResumePlan:
    """Make the directory continue from `plan` (from step 0 when the run never checkpointed):
    say what was passed over, point `latest` at it, move later checkpoints aside, record the
    resume, drop the rows logged after it, and write the plan the ranks follow."""
    path = plan.path(run_dir)
    if path is None:
        print(f"train: no checkpoint under {run_dir}; starting from step 0", flush=True)
    else:
        if plan.skipped:
            print(f"train: {'; '.join(plan.skipped)}; resuming from {path.name}, the "
                  "newest valid checkpoint", flush=True)
            atomic_write_text(path.parent / LATEST_POINTER, path.name + "\n")
        kept = set_aside_after(run_dir, plan.step)
        if kept is not None:
            names = ", ".join(sorted(p.name for p in kept.glob("step-*.pt")))
            print(f"train: moved the checkpoints after step {plan.step} ({names}) to {kept}, where the "
                  "resumed run cannot overwrite them", flush=True)
            plan = dataclasses.replace(plan, set_aside=str(kept.relative_to(run_dir)))
        record_resume(run_dir, plan.checkpoint, plan.step, plan.changed)
        logged = logged_seconds(run_dir)
        plan = dataclasses.replace(plan, logged_train_s=logged.train_s, logged_wall_s=logged.wall_s)
    forget_steps_after(run_dir, plan.step)
    write_plan(run_dir, plan)
    return plan


def set_aside_after(run_dir: Path, step: int) -> Path | None:
    """Move the checkpoints of steps after `step` (and their checksum files) into a new folder
    `checkpoints/superseded/N/`, so a run resumed from `step` cannot overwrite or prune them;
    returns that folder, or None when there were none."""
    later = [path for found_step, path in step_files(run_dir) if found_step > step]
    if not later:
        return None
    parent = checkpoint_dir(run_dir) / SUPERSEDED_DIR
    parent.mkdir(exist_ok=True)
    number = 1 + max((int(p.name) for p in parent.iterdir() if p.name.isdigit()), default=0)
    folder = parent / str(number)
    folder.mkdir()
    for path in later:
        for moved in (path, checksum_path(path)):
            if moved.exists():
                moved.replace(folder / moved.name)
    return folder


def forget_steps_after(run_dir: Path, step: int) -> None:
    """Drop metrics rows of steps after `step` (logged by a run killed after that checkpoint) and
    lines a kill tore; keep every other row."""
    lines = metrics_lines(run_dir)
    kept = [line.text for line in lines if line.step <= step]
    if len(kept) != len(lines):
        atomic_write_bytes(run_dir / METRICS_FILE, b"".join(text + b"\n" for text in kept))


# --- a rank: restore --------------------------------------------------------------------------------

@dataclass
class RankParts:
    """What one rank's part of a checkpoint is loaded into, each through its own load method."""

    rank: int
    trainable: Trainable
    """The networks and their optimizers (the checkpoint holds rank 0's, equal on every rank)."""
    schedulers: dict[str, Any]
    loader: BatchLoader
    """The training loader, which continues at the position this rank's part records."""
    target: Target
    """Where the device's RNG state goes."""
    tracker: TargetTracker | None = None
    meter: NoiseScaleMeter | None = None
    plan: BatchPlan | None = None
    """The batch schedule, which continues at the batch and with the switches the checkpoint records."""


@dataclass(frozen=True)
class Restored:
    """Where the rank continues: the checkpoint it loaded, its step and epoch, and the run's clock."""

    path: Path
    step: int
    epoch: int
    totals: RunTotals
    """The run's seconds before this invocation, this resume and the killed invocation's lost
    seconds counted."""
    samples: int = 0
    """The samples the run had trained."""


def restore(run_dir: Path, parts: RankParts) -> Restored | None:
    """Load the checkpoint the launcher's plan names into `parts`; None for a plan from step 0
    (nothing loaded). The launcher chose and checked it once, so every rank loads the same one and
    none searches again; UsageError when the file changed since or does not fit this rank."""
    plan = read_plan(run_dir)
    try:
        payload = load_planned(run_dir, plan)
    except UsageError as error:
        message = str(error)
        raise UsageError(message if message.startswith("train: ") else f"train: {message}") from None
    if payload is None:
        return None
    path = plan.path(run_dir)
    assert path is not None
    try:
        totals = _load_into(parts, payload)
        step, epoch, samples = payload["step"], payload["epoch"], trained_samples(payload)
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as error:
        raise UsageError(f"train: {path} does not fit this rank ({type(error).__name__}: "
                         f"{str(error).splitlines()[0][:160] if str(error) else ''}); restore it or start a new "
                         "run in another --out") from None
    if parts.rank == 0:
        print(f"train: resumed from {path} at step {step}", flush=True)
    return Restored(path=path, step=step, epoch=epoch, totals=_continued(totals, plan), samples=samples)


def _load_into(parts: RankParts, payload: dict[str, Any]) -> RunTotals:
    """Each part takes its state from the checkpoint; returns the run's clock it carries."""
    parts.trainable.load_state_dict(payload["trainable"])
    for name, scheduler in parts.schedulers.items():
        scheduler.load_state_dict(payload["schedulers"][name])
    own = payload["ranks"][parts.rank]
    restore_buffers(parts.trainable, own["buffers"])
    parts.loader.load_state_dict(own["loader"])
    restore_rng_states(own["rng"], parts.target)
    totals = RunTotals.from_state(payload.get("run_clock"))
    if parts.tracker is not None:
        parts.tracker.load_state(payload.get("time_to_target"))
    if parts.meter is not None:
        parts.meter.load_state(own.get("noise_scale"))
    if parts.plan is not None:
        parts.plan.load_state(payload.get("batch_schedule"))
    return totals


def restore_buffers(trainable: Trainable, buffers: dict[str, dict[str, torch.Tensor]]) -> None:
    """This rank's own buffers (statistics of its batches), which are not averaged over ranks; none
    where the trainable's own state holds them (`network_buffers`)."""
    if not buffers:
        return
    with torch.no_grad():
        for name, network in trainable.networks.items():
            for key, buffer in network.named_buffers():
                buffer.copy_(buffers[name][key])


def _continued(totals: RunTotals, plan: ResumePlan) -> RunTotals:
    """The checkpoint's clock with this resume counted, and the seconds the killed invocation
    logged after its checkpoint added (its steps are redone, so they count twice, as they cost)."""
    lost_train = max(0.0, (plan.logged_train_s or 0.0) - totals.train_s)
    lost_wall = max(0.0, (plan.logged_wall_s or 0.0) - totals.wall_s)
    return dataclasses.replace(
        totals, resumes=totals.resumes + 1, train_s=totals.train_s + lost_train, wall_s=totals.wall_s + lost_wall,
        lost_train_s=totals.lost_train_s + lost_train, lost_wall_s=totals.lost_wall_s + lost_wall)
