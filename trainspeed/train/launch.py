"""Start a run: in this process (one rank), under torchrun (one process per device), or XLA SPMD.

torchrun is spawned as a real subprocess (`python -m torch.distributed.run`) rather than called as a
library, so its elastic agent supervises the ranks as it does for any torchrun job: when a rank exits
non-zero the agent stops the others and reports the failing rank's error; nothing waits forever.

Multi-node: start the same command on every node with `--nnodes N --rdzv-endpoint HOST:PORT`
(c10d rendezvous: ranks are assigned as nodes join; the endpoint is any one node), or with
`--rdzv-backend static --node-rank R` (fixed node ranks, HOST:PORT is node 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

from trainspeed.atomic import atomic_write_text
from trainspeed.train.checkpoint import StopRequest
from trainspeed.train.config import TrainConfig
from trainspeed.train.distributed import Collectives, RankContext
from trainspeed.train.lifecycle import die_with_parent, exit_code
from trainspeed.train.loop import Layout, RankTrainer

CONFIG_FILE = "train_config.json"
REPO_ROOT = Path(__file__).resolve().parents[2]


def launch(config: TrainConfig) -> int:
    """Validate, record the configuration in the run directory, and run it; returns the exit code."""
    config.validate()
    config_path = config.run_dir / CONFIG_FILE
    atomic_write_text(config_path, config.to_json() + "\n")
    if config.device_type == "xla":
        from trainspeed.train.spmd import run_spmd

        return run_spmd(config)
    if config.world_size == 1:
        return run_in_process(config)
    return run_torchrun(torchrun_command(config, config_path), config)


def run_in_process(config: TrainConfig) -> int:
    context = RankContext()
    with StopRequest() as stop:
        summary = RankTrainer(config, Layout(context), Collectives(context)).run(stop)
    print("\n".join(summary.lines()), flush=True)
    return exit_code(summary)


def torchrun_command(config: TrainConfig, config_path: Path) -> list[str]:
    launch = config.launch
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={launch.nproc}",
        f"--nnodes={launch.nnodes}",
        "--max-restarts=0",
    ]
    if launch.nnodes == 1 and not launch.rdzv_endpoint:
        command.append("--standalone")
    elif launch.rdzv_backend == "static":
        host, _, port = launch.rdzv_endpoint.rpartition(":")
        command += [f"--node-rank={launch.node_rank}", f"--master-addr={host}", f"--master-port={port}"]
    else:
        command += ["--rdzv-backend=c10d", f"--rdzv-endpoint={launch.rdzv_endpoint}", f"--rdzv-id={launch.rdzv_id}"]
    return command + ["-m", "trainspeed.train.worker", str(config_path)]


def run_torchrun(command: list[str], config: TrainConfig) -> int:
    """Run torchrun, pass SIGTERM/SIGINT on to it (its agent forwards them to every rank)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    if config.threads is not None:
        env["OMP_NUM_THREADS"] = str(config.threads)
    process = subprocess.Popen(command, env=env, preexec_fn=lambda: die_with_parent(signal.SIGTERM))

    def forward(signum: int, frame: FrameType | None) -> None:
        process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
