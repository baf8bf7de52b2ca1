"""Start a run: in this process (one rank), under torchrun (one process per device), or SPMD.

Everything the user gave is checked here, before any process starts or any step runs: flags,
the target, the workload and its size, the dataset, the bench rows of `--bench-jsonl`.

Several ranks are started by torchrun's elastic agent, run in a subprocess of its own
(`trainspeed.train.agent`): it supervises the ranks as it does for any torchrun job (when a rank
exits non-zero it stops the others; nothing waits forever), keeps every rank's output in the run
directory, and reports the first cause of a failure in one line.
A target whose family drives all local devices from one process (`data_parallel = "spmd"`, XLA)
runs in this process over `--nproc` devices instead.

Multi-node: start the same command on every node with `--nnodes N --rdzv-endpoint HOST:PORT`
(c10d rendezvous: ranks are assigned as nodes join; the endpoint is any one node), or with
`--rdzv-backend static --node-rank R` (fixed node ranks, HOST:PORT is node 0).
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path
from types import FrameType

import psutil

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.safe_path import isolated_environment
from trainspeed.signal_handlers import handling
from trainspeed.targets import check_target_builds, get_target, target_family
from trainspeed.targets.base import Target
from trainspeed.targets.threads import threads_kept
from trainspeed.train.batch_schedule import (
    AUTO,
    RunLength,
    batches_of,
    bench_memory_cap,
    loader_unit,
    read_calibration,
    run_length,
    start_batch,
)
from trainspeed.train.config import MAX_STEPS, TrainConfig, resolve_lr
from trainspeed.train.distributed import Collectives, RankContext
from trainspeed.train.evaluation import metric_names
from trainspeed.train.init_from import check_init
from trainspeed.train.lifecycle import (
    STOP_SIGNALS,
    StopRequest,
    die_with_parent,
    finish,
)
from trainspeed.train.loop import Layout, RankTrainer
from trainspeed.train.resume import prepare
from trainspeed.train.run_dir import RunDirectory
from trainspeed.train.startup import hand_down
from trainspeed.train.summary import bench_samples_per_s
from trainspeed.train.synthetic import held_bytes_per_rank
from trainspeed.train.time_to_target import check_goal_metric, parse_goal
from trainspeed.train.validation_split import check_validation_split
from trainspeed.workloads import get_workload, reference_batch, resolve_size
from trainspeed.workloads.base import Workload
from trainspeed.workloads.batches import batch_layout, batch_problem

REPO_ROOT = Path(__file__).resolve().parents[2]


def resolve_workload_settings(config: TrainConfig, workload: Workload) -> TrainConfig:
    """The config with the workload's defaults filled in (its size, the batch its LR was tuned
    at), so the run directory records what the run used, not what was left unsaid."""
    return dataclasses.replace(config, size=resolve_size(workload, config.size),
                               lr=resolve_lr(config.lr, reference_batch(workload)))


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
        if not family.gradients_here:
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
        if not family.gradients_here:
            raise UsageError(f"train: --batch-schedule steps past the memory cap of {cap} per device in micro-batches, "
                             f"whose gradients {config.target} keeps {family.gradients_where}; give batches of at most "
                             f"{cap * devices}")
        trained = workload.build(config.size, seed=0).trained_network_names()
        if len(trained) > 1:
            raise UsageError(f"train: --batch-schedule steps past the memory cap of {cap} per device in micro-batches, "
                             f"which accumulate a step that trains one network, and {workload.name!r} trains "
                             f"{len(trained)} ({', '.join(trained)}) in phases; give batches of at most {cap * devices}")
    return config


def check_runnable(config: TrainConfig) -> tuple[TrainConfig, type[Target], int | None]:
    """Raise UsageError for anything that would fail later in a rank; returns the config with the
    workload's defaults resolved, the target family and the batches per epoch of the training
    split (None for synthetic data)."""
    config.validate()
    family = target_family(config.target)
    if family.data_parallel == "single" and config.world_size > 1:
        raise UsageError(
            f"train: {config.target} trains on one rank only (one connection drives its device); "
            f"use --nproc 1 --nnodes 1, not {config.launch.nproc} x {config.launch.nnodes}"
        )
    if config.launch.nnodes > 1 and not family.supports_multi_node:
        raise UsageError(f"train: {config.target} drives one host's devices from one process; it has no multi-node mode")
    workload = get_workload(config.workload)
    config = resolve_workload_settings(config, workload)
    check_init(config)
    check_target_builds(config.target, workload)
    _check_quality_settings(config, workload, family)
    if config.batch.schedule is not None:
        config = resolve_batch_schedule(config, workload, family)
    batches_per_epoch = None
    if config.data is not None:
        if not hasattr(workload, "open_dataset"):
            raise UsageError(f"train: workload {workload.name!r} has no real dataset; use --synthetic-data")
        unit = loader_unit(config) if config.batch.schedule is not None else config.batch_size_per_device
        probe = LoaderConfig(batch_size=unit, world_size=config.world_size, num_workers=0,
                             bad_samples=config.bad_samples)
        loader = workload.open_dataset(config.data, config.size, probe)
        batches_per_epoch = len(loader)
        if config.batch.schedule is not None:
            _check_schedule_fits(config, loader.num_samples, batches_per_epoch, unit)
        if batches_per_epoch == 0:
            raise UsageError(
                f"train: the training split of --data {config.data} has {loader.num_samples} samples, fewer than "
                f"one global batch of {config.global_batch} ({config.batch_size_per_device} per device x "
                f"{config.world_size}); choose a smaller --batch-size-per-device or give more data"
            )
        _check_loader_batches(config, workload, loader)
        if config.until is not None:
            check_validation_split(config, workload, f"train: --until {config.until} needs validation")
    else:
        _check_synthetic_batches_fit(config, workload)
    if config.batch.schedule is None and config.total_steps(batches_per_epoch) > MAX_STEPS:
        raise UsageError(f"train: --epochs {config.epochs} makes {config.total_steps(batches_per_epoch):,} steps, more than "
                         f"the {MAX_STEPS:,} a checkpoint's name can hold; give fewer epochs")
    if config.batch.schedule is not None:
        length = run_length(config, None if config.data is None else loader.num_samples)
        most = length.total_steps or math.ceil(length.total_samples / start_batch(config))
        if most > MAX_STEPS:
            raise UsageError(f"train: the schedule makes up to {most:,} steps, more than the {MAX_STEPS:,} a checkpoint's "
                             "name can hold; give a smaller budget")
    elif config.bench_jsonl:
        bench_samples_per_s(config.bench_jsonl, workload.name, config.size, config.target, config.batch_size_per_device)
    return config, family, batches_per_epoch


def _check_schedule_fits(config: TrainConfig, samples: int, unit_batches: int, unit: int) -> None:
    """Every batch of the schedule fits into one epoch of the training split."""
    largest = max(batches_of(config))
    if largest // config.world_size // unit > unit_batches:
        flag = "--global-batch-max" if config.batch.schedule == AUTO else "--batch-schedule"
        raise UsageError(f"train: the training split of --data {config.data} has {samples} samples, fewer than the "
                         f"schedule's largest global batch of {largest} ({flag}); give smaller batches or more data")


def run_length_of(config: TrainConfig, batches_per_epoch: int | None, train_samples: int | None) -> RunLength:
    """How long the run trains: its steps at a fixed batch, or its schedule's length."""
    if config.batch.schedule is None:
        steps = config.total_steps(batches_per_epoch)
        return RunLength(total_samples=steps * config.global_batch, total_steps=steps)
    return run_length(config, train_samples)


def _check_quality_settings(config: TrainConfig, workload: Workload, family: type[Target]) -> None:
    """What --until names is a validation metric of the workload; micro-batches split a step that
    trains one network, here."""
    if config.until is None and config.noise_scale_micro_batches == 1:
        return
    on_host = workload.build(config.size, seed=0)
    if config.until is not None:
        check_goal_metric(parse_goal(config.until), metric_names(on_host, workload, config.size), workload.name)
    if config.noise_scale_micro_batches > 1:
        if not family.gradients_here:
            raise UsageError(f"train: --noise-scale-micro-batches: {config.target} keeps its gradients {family.gradients_where}, "
                             "where they are not measured; drop it")
        trained = on_host.trained_network_names()
        if len(trained) > 1:
            raise UsageError(f"train: --noise-scale-micro-batches splits a step that trains one network, and "
                             f"{workload.name!r} trains {len(trained)} ({', '.join(trained)}) in phases; drop it (the "
                             "noise scale is then measured from the previous step, or from each rank on --nproc > 1)")


def _check_loader_batches(config: TrainConfig, workload: Workload, loader: BatchLoader) -> None:
    """The loader's first batch has the workload's batch layout (its synthetic batch's keys, dtypes
    and per-sample shapes), checked by the function a remote server checks every batch with, so
    a loader that does not is refused here, for a local target as for a remote one."""
    try:
        first = next(iter(loader))
    except StopIteration:
        return
    problem = batch_problem(batch_layout(workload, config.size), first)
    if problem is not None:
        raise UsageError(f"train: the batches of --data {config.data} do not have {workload.name!r}'s batch layout: "
                         f"{problem}; the workload's open_dataset must give the keys, dtypes and shapes of its "
                         "synthetic_batch")


def _check_synthetic_batches_fit(config: TrainConfig, workload: Workload) -> None:
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


def launch(config: TrainConfig) -> int:
    """Check, take the run directory, record the configuration in it, and run; returns the exit code."""
    config, family, batches_per_epoch = check_runnable(config)
    run_dir = RunDirectory(config.run_dir)
    run_dir.check_holds_nothing_else()
    run_dir.check_writable()
    with run_dir.lock():
        run_dir.remove_interrupted_writes()
        if not config.resume:
            run_dir.check_fresh()
        else:
            processes = 1 if family.data_parallel == "spmd" else config.world_size
            length = run_length_of(config, batches_per_epoch, _train_samples(config))
            if prepare(run_dir, config, processes, length.total_steps, length.budget_samples) is None:
                return 0
        config_path = run_dir.write_config(config)
        if family.data_parallel == "spmd":
            return run_spmd(config, family)
        if config.world_size == 1:
            return run_in_process(config)
        return run_agent(config_path, config)


def _train_samples(config: TrainConfig) -> int | None:
    """The samples of the training split, where a schedule's --epochs needs them."""
    if config.batch.schedule is None or config.epochs is None or config.data is None:
        return None
    workload = get_workload(config.workload)
    probe = LoaderConfig(batch_size=loader_unit(config), world_size=config.world_size, num_workers=0)
    return workload.open_dataset(config.data, config.size, probe).num_samples  # type: ignore[attr-defined]


@threads_kept()  # --threads is this run's: a run in a Python caller's process leaves its count as it was
def _run(config: TrainConfig, layout: Layout, target: Target, place=None) -> int:
    with StopRequest() as stop:
        summary = RankTrainer(config, layout, Collectives(layout.context), target, place).run(stop)
        return finish(summary, stop, show=True)


def run_in_process(config: TrainConfig) -> int:
    return _run(config, Layout(RankContext()), get_target(config.target))


def run_spmd(config: TrainConfig, family: type[Target]) -> int:
    """One process drives all `--nproc` local devices; the batch is split over them."""
    devices = family.start_spmd(config.launch.nproc)
    target = get_target(config.target)
    return _run(config, Layout(RankContext(), devices_per_process=devices), target, target.spmd_placer(devices))


def _agent_process_setup() -> None:
    """In the agent before exec: a process group of its own (a Ctrl-C in the terminal reaches only
    the launcher, which passes it on once) and death with the launcher."""
    os.setpgid(0, 0)
    die_with_parent()


def run_agent(config_path: Path, config: TrainConfig) -> int:
    """Run this node's elastic agent (`trainspeed.train.agent`, torchrun's machinery) as a
    subprocess, passing SIGTERM/SIGINT on to it (it forwards them to every rank). The agent, and
    every process below it, imports nothing from the working directory."""
    env = isolated_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    if config.threads is not None:
        env["OMP_NUM_THREADS"] = str(config.threads)
    hand_down(env)
    command = [sys.executable, "-m", "trainspeed.train.agent", str(config_path)]
    process = subprocess.Popen(command, env=env, preexec_fn=_agent_process_setup)

    def forward(signum: int, frame: FrameType | None) -> None:
        process.send_signal(signum)

    with handling(STOP_SIGNALS, forward):
        return process.wait()
