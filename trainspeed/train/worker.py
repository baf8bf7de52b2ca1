"""What torchrun starts per rank: a small supervisor that runs the rank in its own process group.

torchrun's agent stops a worker with killpg (the worker's whole process group). A rank's loader
worker processes are in that group, and PyTorch's loader workers die on a SIGTERM that does not come
from their parent; the rank then fails with "DataLoader worker ... killed by signal" in the middle
of its step instead of checkpointing. So torchrun's worker is this supervisor: it starts the real
rank (`trainspeed.train.rank`) in a new process group, passes SIGTERM/SIGINT on to that one process,
and exits with its exit code. The rank and its loader workers die with the supervisor if it is
killed outright. This module imports nothing heavy: it costs a Python start, not a torch import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import FrameType

from trainspeed.parent_death import die_with_parent as die_with_agent
from trainspeed.train.lifecycle import die_with_parent


def _own_group_tied_to_parent() -> None:
    """In the child before exec: a process group of its own, and death with this supervisor."""
    os.setpgid(0, 0)
    die_with_parent()


def main(argv: list[str]) -> int:
    """`CONFIG_PATH AGENT_PID`: the agent's pid, that this process dies with the agent also where
    the agent died before this process could arm that (it imports first)."""
    die_with_agent(int(argv[1]))
    rank = subprocess.Popen([sys.executable, "-m", "trainspeed.train.rank", argv[0]], preexec_fn=_own_group_tied_to_parent)

    def forward(signum: int, frame: FrameType | None) -> None:
        rank.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    code = rank.wait()
    return 128 - code if code < 0 else code  # killed by signal N: report it as a shell would (128 + N)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
