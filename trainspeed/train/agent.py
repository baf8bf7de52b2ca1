"""The elastic agent of a multi-rank run: `python -m trainspeed.train.agent RUN_DIR/train_config.json LAUNCHER_PID`.

The launcher starts this as a subprocess; it runs torchrun's own machinery (the elastic agent of
`torch.distributed.launcher`) for this node's ranks, with two changes in what the user sees:
- every rank's stdout and stderr go to `RUN_DIR/logs/` (rank 0's stdout also to the terminal,
  prefixed `[rank0]:`), and the agent's own log to `RUN_DIR/logs/agent.log`;
- when the job fails, one line names the first cause (which rank, what) instead of every rank's
  traceback, and the exit code is the one a one-rank run would give: 2 for bad input, 1 for an
  error, 128 + N for a rank killed by signal N, 143 (130) after a SIGTERM (SIGINT, Ctrl-C) that
  every rank answered with a checkpoint.

The launcher starts the agent in a process group of its own, so a Ctrl-C in the terminal reaches
the launcher alone, which passes it on once: torchrun's agent answers a signal by stopping the
ranks with it and waiting for them, and a second copy of the signal, arriving from the terminal in
the middle of that wait, would cut it short and kill ranks that are still checkpointing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from trainspeed.parent_death import die_with_parent
from trainspeed.train.config import TrainConfig
from trainspeed.train.lifecycle import STOPPED_EXIT_CODES
from trainspeed.train.run_dir import LOG_DIR
EXIT_ERROR, EXIT_USAGE = 1, 2
CONSEQUENTIAL_ERRORS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "gloo", "NCCL",
                        "Timed out", "timed out", "DistNetworkError", "DistBackendError")
"""Errors a rank gets because another rank died first: never the first cause when there is another."""


def launch_config(config: TrainConfig) -> LaunchConfig:
    """torchrun's settings for this node, as its command line would make them."""
    launch = config.launch
    if launch.nnodes == 1 and not launch.rdzv_endpoint:  # torchrun --standalone
        backend, endpoint, run_id, rdzv_configs = "c10d", "localhost:0", uuid.uuid4().hex, {}
    elif launch.rdzv_backend == "static":
        backend, endpoint, run_id, rdzv_configs = "static", launch.rdzv_endpoint, launch.rdzv_id, {"rank": launch.node_rank}
    else:
        backend, endpoint, run_id, rdzv_configs = "c10d", launch.rdzv_endpoint, launch.rdzv_id, {}
    return LaunchConfig(
        min_nodes=launch.nnodes,
        max_nodes=launch.nnodes,
        nproc_per_node=launch.nproc,
        run_id=run_id,
        rdzv_backend=backend,
        rdzv_endpoint=endpoint,
        rdzv_configs=rdzv_configs,
        max_restarts=0,
        logs_specs=DefaultLogsSpecs(log_dir=str(config.run_dir / LOG_DIR), redirects=Std.ALL, tee={0: Std.OUT}),
        log_line_prefix_template="[rank${rank}]:",
    )


@dataclass(frozen=True)
class FailureCause:
    rank: int
    description: str
    exit_code: int


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _describe(rank: int, failure: ProcessFailure) -> FailureCause:
    """A failure as one line. Without an error file the rank died without raising: a negative
    exit code (or 128 + N from its supervisor) is the signal that killed it."""
    exitcode = failure.exitcode
    has_error_file = Path(failure.error_file).is_file()
    signal_number = -exitcode if exitcode < 0 else exitcode - 128 if exitcode > 128 and not has_error_file else 0
    if signal_number:
        return FailureCause(rank, f"killed by signal {signal_number} ({_signal_name(signal_number)})", 128 + signal_number)
    message = failure.message.get("message", "") if isinstance(failure.message, dict) else str(failure.message)
    lines = message.strip().splitlines() if has_error_file else []
    first_line = lines[0] if lines else f"exited with code {exitcode}"
    if first_line.startswith("UsageError: "):
        return FailureCause(rank, first_line.removeprefix("UsageError: "), EXIT_USAGE)
    return FailureCause(rank, first_line, EXIT_ERROR)


def first_cause(failures: dict[int, ProcessFailure]) -> FailureCause | None:
    """The failure that came first, preferring a rank's own error over one caused by a dead peer;
    None when every rank stopped after a SIGTERM or SIGINT (exit 143 or 130, with a checkpoint)."""
    if all(failure.exitcode in STOPPED_EXIT_CODES for failure in failures.values()):
        return None
    causes = [(failure.timestamp, _describe(rank, failure)) for rank, failure in failures.items()
              if failure.exitcode not in STOPPED_EXIT_CODES]

    def order(item: tuple[int, FailureCause]) -> tuple[bool, int, int]:
        timestamp, cause = item
        return any(marker in cause.description for marker in CONSEQUENTIAL_ERRORS), timestamp, cause.rank

    return min(causes, key=order)[1]


def _log_agent_to(path: Path) -> None:
    """The agent's own messages (rendezvous, worker exits, shutdown) go to a file, not the terminal."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("torch.distributed.elastic", "torch.distributed.launcher"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False


def main(argv: list[str]) -> int:
    """`CONFIG_PATH [LAUNCHER_PID]`: the launcher's pid, that a killed launcher takes its run with it
    (nothing writes after its lock is gone), also where it died before this process could arm that."""
    die_with_parent(int(argv[1]) if len(argv) > 1 else os.getppid())
    config_path = Path(argv[0])
    config = TrainConfig.from_json(config_path.read_text())
    log_dir = config.run_dir / LOG_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    _log_agent_to(log_dir / "agent.log")
    try:
        elastic_launch(launch_config(config), sys.executable)("-u", "-m", "trainspeed.train.worker", str(config_path),
                                                              str(os.getpid()))
    except ChildFailedError as failed:
        cause = first_cause(failed.failures)
        if cause is None:
            return failed.failures[min(failed.failures)].exitcode
        print(f"trainspeed: error: rank {cause.rank}: {cause.description} (every rank's log: {log_dir})",
              file=sys.stderr, flush=True)
        return cause.exit_code
    except SignalException as stopped:  # the agent itself was signalled; it stopped the ranks first
        return 128 + int(stopped.sigval)
    return 0


if __name__ == "__main__":
    from trainspeed.process_end import end_process

    end_process(main(sys.argv[1:]))
