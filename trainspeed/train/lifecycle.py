"""Process life cycle of a run: children that die with their parent, the stop request a signal
makes, and the run's exit code."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from types import FrameType

from trainspeed.signal_handlers import handling
from trainspeed.train.rows import RunSummary

PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOPPED_EXIT_CODES = frozenset(128 + sig for sig in STOP_SIGNALS)
"""What a rank (and the whole run) exits with after a stop signal and its checkpoint: 143, 130."""


def die_with_parent(sig: signal.Signals = signal.SIGKILL) -> None:
    """Have the kernel send `sig` to this process when its parent exits (Linux; elsewhere a no-op).

    Without it a kill -9 of the launcher orphans the ranks, which then train on, or hang in a
    collective with a dead peer.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def exit_without_teardown(code: int) -> None:
    """End a rank of a multi-rank run now, skipping the interpreter's and C++'s exit-time teardown.

    DistributedDataParallel keeps its gloo process group alive past `destroy_process_group`, and
    nothing frees it: its threads still run when the process exits, and destroying one of them
    at exit aborts the rank ("terminate called without an active exception", SIGABRT) after it
    finished its run. Called once every rank has passed the closing barrier, so no peer still
    waits on this one. The loaders' worker processes are stopped as Python's own exit stops
    daemonic children: a garbage collection would shut them down through their queues, which a
    collected reference cycle may already have closed, and each would then wait out PyTorch's
    5 s join.
    """
    children = [child for child in multiprocessing.active_children() if child.daemon]
    for child in children:
        child.terminate()
    for child in children:
        child.join(timeout=1.0)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class StopRequest:
    """Turns SIGTERM and SIGINT (Ctrl-C) into a flag the loop checks between steps (checkpoint, then
    exit cleanly), remembering which signal came.

    A handler that checkpointed directly could run in the middle of a step or a collective, and
    SIGINT's default, KeyboardInterrupt, would leave without a checkpoint from wherever it landed.
    A run started from another thread than the main one installs no handler (`handling`): the
    signals are its program's.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signal: signal.Signals | None = None
        self._handlers = contextlib.ExitStack()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        self.signal = self.signal or signal.Signals(signum)

    def __enter__(self) -> "StopRequest":
        self._handlers.enter_context(handling(STOP_SIGNALS, self._handle))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._handlers.close()


def finish(summary: RunSummary, stop: StopRequest, show: bool) -> int:
    """Print the run's summary (when `show`: rank 0) and return its exit code: 0 when it reached its
    last step; 128 + the signal (130 for SIGINT, 143 for SIGTERM) when it stopped early after a
    checkpoint. A rank that stopped because a peer was signalled reports SIGTERM's code."""
    stopped_by = (stop.signal or signal.SIGTERM) if summary.stopped_by_signal else None
    if show:
        lines = summary.lines()
        if stopped_by is not None:
            lines.append(f"stopped by {stopped_by.name} after checkpointing step {summary.last_step}; "
                         "continue with --resume")
        print("\n".join(lines), flush=True)
    return 0 if stopped_by is None else 128 + stopped_by
