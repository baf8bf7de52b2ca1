"""Start a run: in this process (one rank), under torchrun (one process per device), or SPMD.

The run is resolved and checked once first (`launch_plan.py`: flags, the target, the workload and
its size, the dataset, the bench rows of `--bench-jsonl`), before any process starts or any step
runs; the launcher then takes the run directory and starts the ranks with what the plan resolved.

Several ranks are started by torchrun's elastic agent, run in a subprocess of its own
(`trainspeed.train.agent`): it supervises the ranks as it does for any torchrun job (when a rank
exits non-zero it stops the others; nothing waits forever), keeps every rank's output in the run
directory, and reports the first cause of a failure in one line.
A target whose family drives all local devices from one process (`data_parallel = "spmd"`, XLA)
runs in this process over `--nproc` devices instead; one whose program can span hosts (the jax
family) runs, with `--nnodes N --rdzv-backend static --node-rank R --rdzv-endpoint HOST:PORT`, as
process R of N, its devices one program with every other process's.

Multi-node: start the same command on every node with `--nnodes N --rdzv-endpoint HOST:PORT`
(c10d rendezvous: ranks are assigned as nodes join; the endpoint is any one node), or with
`--rdzv-backend static --node-rank R` (fixed node ranks, HOST:PORT is node 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import NoReturn

from trainspeed.own_code import IMPORT_ROOT
from trainspeed.safe_path import isolated_environment
from trainspeed.signal_handlers import handling
from trainspeed.targets import get_target
from trainspeed.targets.base import Target
from trainspeed.targets.threads import threads_kept
from trainspeed.train.config import TrainConfig
from trainspeed.train.data_read import check_same_data, record_data
from trainspeed.train.distributed import Collectives, RankContext, destroy_process_group, init_host_group
from trainspeed.train.launch_plan import resolve_launch
from trainspeed.train.lifecycle import STOP_SIGNALS, StopRequest, finish
from trainspeed.train.loop import Layout, RankTrainer
from trainspeed.train.resume import prepare
from trainspeed.train.run_dir import RunDirectory
from trainspeed.train.startup import hand_down


def launch(config: TrainConfig) -> int:
    """Resolve and check the run, take the run directory, record the configuration in it, and run;
    returns the exit code."""
    plan = resolve_launch(config)
    config = plan.config  # as resolved: what the run directory records and every rank reads
    run_dir = RunDirectory(config.run_dir)
    data_read = plan.split.data_record if plan.split is not None else None
    with run_dir.taken(fresh=not config.resume):
        if config.resume:
            check_same_data(run_dir.path, data_read, config.data)
            if prepare(run_dir, config, plan.processes, plan.length.total_steps, plan.length.budget_samples) is None:
                return 0  # the run had finished
        config_path = run_dir.write_config(config)
        record_data(run_dir.path, data_read)
        if plan.family.data_parallel == "spmd":
            return run_spmd(config, plan.family)
        if config.world_size == 1:
            return run_in_process(config)
        return run_agent(config_path, config)


@threads_kept()  # --threads is this run's: a run in a Python caller's process leaves its count as it was
def _run(config: TrainConfig, layout: Layout, target: Target, place=None) -> int:
    with StopRequest() as stop:
        summary = RankTrainer(config, layout, Collectives(layout.context), target, place).run(stop)
        return finish(summary, stop, show=True)


def run_in_process(config: TrainConfig) -> int:
    return _run(config, Layout(RankContext()), get_target(config.target))


def run_spmd(config: TrainConfig, family: type[Target]) -> int:
    """One process drives all `--nproc` local devices; the batch is split over them. With
    `--nnodes N` it is process `--node-rank` of N, which run one program over all their devices."""
    launch = config.launch
    if launch.nnodes == 1:
        devices = family.start_spmd(launch.nproc)
        target = get_target(config.target)
        return _run(config, Layout(RankContext(), devices_per_process=devices), target, target.spmd_placer(devices))
    context = RankContext(rank=launch.node_rank, world_size=launch.nnodes)
    endpoint = launch.rdzv_endpoint or ""
    family.join_spmd_processes(endpoint, launch.nnodes, launch.node_rank, launch.nproc, launch.collective_timeout_s)
    init_host_group(context, endpoint, launch.collective_timeout_s)
    try:
        devices = family.start_spmd(launch.nproc)
        target = get_target(config.target)
        layout = Layout(context, devices_per_process=devices, program_spans_processes=True)
        return _run(config, layout, target, target.spmd_placer(devices))
    except RuntimeError as error:
        if "gloo" not in str(error).lower():
            raise
        _lost_a_process(context, error)
    finally:
        destroy_process_group()


def _lost_a_process(context: RankContext, error: RuntimeError) -> NoReturn:
    """One line for a run whose processes lost one of theirs (its connection closed, or it stopped
    answering), then this process's end at once: JAX's own exit would wait out the lost process's
    heartbeats and abort with a stack trace."""
    others = context.world_size - 1
    lost = f"process {1 - context.rank}" if others == 1 else f"one of the other {others} processes"
    cause = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
    print(f"train: process {context.rank} of {context.world_size} stopped: {lost} of this run is gone ({cause}); "
          "start every process again with --resume", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def run_agent(config_path: Path, config: TrainConfig) -> int:
    """Run this node's elastic agent (`trainspeed.train.agent`, torchrun's machinery) as a
    subprocess, passing SIGTERM/SIGINT on to it (it forwards them to every rank). The agent, and
    every process below it, imports nothing from the working directory."""
    env = isolated_environment()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), env.get("PYTHONPATH")]))
    if config.threads is not None:
        env["OMP_NUM_THREADS"] = str(config.threads)
    hand_down(env)
    # The agent runs in a process group of its own (a Ctrl-C in the terminal reaches only the
    # launcher, which passes it on once), and dies with the launcher, whose pid it is given: it
    # arms that itself, for no Python runs between the fork and the exec (this process may have
    # started JAX, whose threads a forked copy of this process could deadlock on).
    command = [sys.executable, "-m", "trainspeed.train.agent", str(config_path), str(os.getpid())]
    process = subprocess.Popen(command, env=env, process_group=0)

    def forward(signum: int, frame: FrameType | None) -> None:
        process.send_signal(signum)

    with handling(STOP_SIGNALS, forward):
        return process.wait()
