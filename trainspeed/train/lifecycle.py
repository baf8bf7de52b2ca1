"""Process life cycle of a run: children that die with their parent, the stop request a signal
makes, and the run's exit code."""

from __future__ import annotations

import ctypes
import signal
import sys
from types import FrameType
from typing import Any

from trainspeed.train.summary import RunSummary

PR_SET_PDEATHSIG = 1
EXIT_STOPPED_BY_SIGNAL = 128 + signal.SIGTERM


def die_with_parent(sig: signal.Signals = signal.SIGKILL) -> None:
    """Have the kernel send `sig` to this process when its parent exits (Linux; elsewhere a no-op).

    Without it a kill -9 of the launcher orphans the ranks, which then train on, or hang in a
    collective with a dead peer.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def exit_code(summary: RunSummary) -> int:
    """0 when the run reached its last step; 143 (SIGTERM's code) when it stopped early after a checkpoint."""
    return EXIT_STOPPED_BY_SIGNAL if summary.stopped_by_signal else 0


class StopRequest:
    """Turns SIGTERM into a flag the loop checks between steps (checkpoint, then exit cleanly).

    A handler that checkpointed directly could run in the middle of a step or a collective.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def __enter__(self) -> "StopRequest":
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        signal.signal(signal.SIGTERM, self._previous)
