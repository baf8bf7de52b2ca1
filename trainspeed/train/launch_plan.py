"""What a launch resolves once, before any process starts or anything is written: the run's
settings as every rank will read them, the target's family, what the data's training split holds
and how long the run trains, each checked where it is found (`LaunchPlan`, `resolve_launch`).

The launcher (`launch.py`) then only takes the run directory and starts the ranks with the plan;
nothing after this reads a flag again, opens the dataset again or works out the length again.
Everything the user gave is checked here: flags, the target, the workload and its size, the
checkpoint a run starts from, the dataset, the bench rows of `--bench-jsonl`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import psutil

from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.flags import machine_cpus
from trainspeed.targets import check_target_builds, target_family
from trainspeed.targets.base import Target
from trainspeed.train.batch_schedule import (
    AUTO,
    RunLength,
    batches_of,
    bench_memory_cap,
    check_schedule_settings,
    loader_unit,
    read_calibration,
    run_length,
    start_batch,
)
from trainspeed.train.config import MAX_STEPS, TrainConfig, resolve_lr
from trainspeed.train.data_read import loader_record
from trainspeed.train.evaluation import metric_names
from trainspeed.train.init_from import check_init
from trainspeed.train.summary import bench_samples_per_s
from trainspeed.train.synthetic import held_bytes_per_rank
from trainspeed.train.time_to_target import check_goal_metric, parse_goal
from trainspeed.train.validation_split import check_validation_split
from trainspeed.workloads import get_workload, reference_batch, resolve_size
from trainspeed.workloads.base import Workload
from trainspeed.workloads.batches import batch_layout, batch_problem


@dataclass(frozen=True)
class TrainingSplit:
    """What the launcher read of `--data`'s training split."""

    samples: int
    batches_per_epoch: int
    """Loader batches (global batches at a fixed batch; schedule units otherwise) in one epoch."""
    data_record: dict | None = None
    """Which data it is (`trainspeed.train.data_read.loader_record`); None where the loader records nothing."""


@dataclass(frozen=True)
class LaunchPlan:
    """A run as resolved and checked, which the launcher starts."""

    config: TrainConfig
    """The settings with the workload's defaults (its size, the batch its LR was tuned at) and a
    schedule's start and memory cap filled in: what the run directory records and every rank reads."""
    family: type[Target]
    split: TrainingSplit | None
    """None: synthetic data."""
    length: RunLength
    """How long the run trains: its steps at a fixed batch, or its schedule's length."""

    @property
    def processes(self) -> int:
        """Processes that train: one drives every device of an SPMD target on each host, else one per rank."""
        return self.config.launch.nnodes if self.family.data_parallel == "spmd" else self.config.world_size


def resolve_launch(config: TrainConfig) -> LaunchPlan:
    """The run `config` describes, resolved and checked in the order a reader meets its parts;
    UsageError for anything that would fail later in a rank."""
    config.validate()
    check_schedule_settings(config)
    family = target_family(config.target)
    if family.data_parallel == "single" and config.world_size > 1:
        raise UsageError(
            f"train: {config.target} trains on one rank only (one connection drives its device); "
            f"use --nproc 1 --nnodes 1, not {config.launch.nproc} x {config.launch.nnodes}"
        )
    if family.data_parallel != "spmd" and config.launch.nproc > machine_cpus():
        raise UsageError(f"train: --nproc {config.launch.nproc} is more than {machine_cpus()} processes, more than this "
                         f"machine's CPUs ({config.target} runs one process per device)")
    if config.launch.nnodes > 1 and not family.supports_multi_node:
        raise UsageError(f"train: {config.target} drives one host's devices from one process; it has no multi-node mode")
    if config.launch.nnodes > 1 and family.data_parallel == "spmd" and config.launch.rdzv_backend != "static":
        raise UsageError(f"train: {config.target} runs one process per host, each knowing its place: add "
                         "--rdzv-backend static --node-rank R (0 on the host of --rdzv-endpoint)")
    workload = get_workload(config.workload)
    config = resolve_workload_settings(config, workload)
    check_init(config)
    check_target_builds(config.target, workload, config.world_size)
    check_quality_settings(config, workload, family)
    if config.batch.schedule is not None:
        config = resolve_batch_schedule(config, workload, family)
    if config.data is not None:
        split = checked_split(config, workload)
    else:
        split = None
        check_synthetic_batches_fit(config, workload)
    length = checked_length(config, split)
    if config.batch.schedule is None and config.bench_jsonl:
        bench_samples_per_s(config.bench_jsonl, workload.name, config.size, config.target, config.batch_size_per_device)
    return LaunchPlan(config=config, family=family, split=split, length=length)


def resolve_workload_settings(config: TrainConfig, workload: Workload) -> TrainConfig:
    """The config with the workload's defaults filled in (its size, the batch its LR was tuned
    at), so the run directory records what the run used, not what was left unsaid."""
    return dataclasses.replace(config, size=resolve_size(workload, config.size),
                               lr=resolve_lr(config.lr, reference_batch(workload)))


def check_quality_settings(config: TrainConfig, workload: Workload, family: type[Target]) -> None:
    """What --until names is a validation metric of the workload; micro-batches split a step that
    trains one network, here."""
    if config.until is None and config.noise_scale_micro_batches == 1:
        return
    on_host = workload.build(config.size, seed=0)
    if config.until is not None:
        check_goal_metric(parse_goal(config.until), metric_names(on_host, workload, config.size), workload.name)
    if config.noise_scale_micro_batches > 1:
        if not family.runs_micro_batches():
            raise UsageError(f"train: --noise-scale-micro-batches: {config.target} keeps its gradients {family.gradients_where}, "
                             "where they are not measured; drop it")
        trained = on_host.trained_network_names()
        if len(trained) > 1:
            raise UsageError(f"train: --noise-scale-micro-batches splits a step that trains one network, and "
                             f"{workload.name!r} trains {len(trained)} ({', '.join(trained)}) in phases; drop it (the "
                             "noise scale is then measured from the previous step, or from each rank on --nproc > 1)")


def resolve_batch_schedule(config: TrainConfig, workload: Workload, family: type[Target]) -> TrainConfig:
    """A schedule's config as the run follows it: the per-device batch it starts at, and the memory
    cap, the smaller of --max-batch-per-device and what --bench-jsonl's out-of-memory rows allow;
    UsageError for a schedule this workload and target cannot follow."""
    settings = config.batch
    devices = config.world_size
    cap = settings.max_batch_per_device
    if config.bench_jsonl:
        assert config.size is not None
        found = bench_memory_cap(config.bench_jsonl, workload.name, config.size, config.target)
        cap = found if cap is None else (cap if found is None else min(cap, found))
    config = dataclasses.replace(config, batch_size_per_device=start_batch(config) // devices,
                                 batch=dataclasses.replace(settings, max_batch_per_device=cap))
    if settings.schedule == AUTO:
        if not family.runs_micro_batches():
            raise UsageError(f"train: --batch-schedule auto follows the gradient noise scale, and {config.target} keeps "
                             f"its gradients {family.gradients_where}, where it is not measured; give an explicit schedule")
        if settings.critical_batch:
            read_calibration(settings.critical_batch)
        if cap is not None and settings.global_batch_min // devices > cap:  # type: ignore[operator]
            raise UsageError(f"train: --global-batch-min {settings.global_batch_min} is more than the memory cap of {cap} "
                             "per device (--max-batch-per-device, or --bench-jsonl's out-of-memory rows), and auto never "
                             "steps in micro-batches; give a smaller min")
        return config
    largest = max(batches_of(config)) // devices
    if cap is not None and largest > cap:
        if not family.runs_micro_batches():
            raise UsageError(f"train: --batch-schedule steps past the memory cap of {cap} per device in micro-batches, "
                             f"whose gradients {config.target} keeps {family.gradients_where}; give batches of at most "
                             f"{cap * devices}")
        trained = workload.build(config.size, seed=0).trained_network_names()
        if len(trained) > 1:
            raise UsageError(f"train: --batch-schedule steps past the memory cap of {cap} per device in micro-batches, "
                             f"which accumulate a step that trains one network, and {workload.name!r} trains "
                             f"{len(trained)} ({', '.join(trained)}) in phases; give batches of at most {cap * devices}")
    return config


def checked_split(config: TrainConfig, workload: Workload) -> TrainingSplit:
    """The training split of --data, opened once: it holds a global batch (every batch of a
    schedule, each within one epoch), its first batch has the workload's batch layout (its synthetic
    batch's keys, dtypes and per-sample shapes, checked by the function a remote server checks every
    batch with, so a loader that does not is refused here, for a local target as for a remote one),
    and it has validation samples where the run needs them."""
    if not hasattr(workload, "open_dataset"):
        raise UsageError(f"train: workload {workload.name!r} has no real dataset; use --synthetic-data")
    if config.batch.schedule is not None:
        unit, largest = loader_unit(config), max(batches_of(config))
    else:
        unit, largest = config.batch_size_per_device, config.global_batch
    probe = LoaderConfig(batch_size=unit, world_size=config.world_size, num_workers=0, bad_samples=config.bad_samples)
    loader = workload.open_dataset(config.data, config.size, probe)
    split = TrainingSplit(samples=loader.num_samples, batches_per_epoch=len(loader), data_record=loader_record(loader))
    if config.batch.schedule is not None and largest // config.world_size // unit > split.batches_per_epoch:
        flag = "--global-batch-max" if config.batch.schedule == AUTO else "--batch-schedule"
        raise UsageError(f"train: the training split of --data {config.data} has {split.samples} samples, fewer than "
                         f"the schedule's largest global batch of {largest} ({flag}); give smaller batches or more data")
    if split.batches_per_epoch == 0:
        raise UsageError(
            f"train: the training split of --data {config.data} has {split.samples} samples, fewer than "
            f"one global batch of {config.global_batch} ({config.batch_size_per_device} per device x "
            f"{config.world_size}); choose a smaller --batch-size-per-device or give more data"
        )
    first = next(iter(loader), None)  # the layout a remote server checks every batch against, checked here
    problem = None if first is None else batch_problem(batch_layout(workload, config.size), first)
    if problem is not None:
        raise UsageError(f"train: the batches of --data {config.data} do not have {workload.name!r}'s batch layout: "
                         f"{problem}; the workload's open_dataset must give the keys, dtypes and shapes of its "
                         "synthetic_batch")
    if config.until is not None:
        check_validation_split(config, workload, f"train: --until {config.until} needs validation")
    return split


def check_synthetic_batches_fit(config: TrainConfig, workload: Workload) -> None:
    """Refuse a batch whose synthetic batches alone would not fit in this host's memory (the
    network's activations come on top), before any rank allocates them."""
    needed = held_bytes_per_rank(workload, config.size, config.batch_size_per_device) * config.launch.nproc
    memory = psutil.virtual_memory().total
    if needed > memory:
        raise UsageError(
            f"train: --batch-size-per-device {config.batch_size_per_device}: the synthetic batches of "
            f"{config.launch.nproc} rank(s) alone would take {needed / 2**30:,.1f} GiB, more than this host's "
            f"{memory / 2**30:,.1f} GiB; choose a smaller batch"
        )


def checked_length(config: TrainConfig, split: TrainingSplit | None) -> RunLength:
    """How long the run trains (its steps at a fixed batch, or its schedule's length), in steps a
    checkpoint's name can hold."""
    if config.batch.schedule is None:
        steps = config.total_steps(None if split is None else split.batches_per_epoch)
        if steps > MAX_STEPS:
            raise UsageError(f"train: --epochs {config.epochs} makes {steps:,} steps, more than the {MAX_STEPS:,} a "
                             "checkpoint's name can hold; give fewer epochs")
        return RunLength(total_samples=steps * config.global_batch, total_steps=steps)
    length = run_length(config, None if split is None else split.samples)
    most = length.total_steps or math.ceil(length.total_samples / start_batch(config))
    if most > MAX_STEPS:
        raise UsageError(f"train: the schedule makes up to {most:,} steps, more than the {MAX_STEPS:,} a checkpoint's "
                         "name can hold; give a smaller budget")
    return length
