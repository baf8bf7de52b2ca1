"""Worker processes that die with the process that started them, so a command killed outright
(kill -9, the OOM killer) leaves no workers behind.

A process pool's workers otherwise outlive their parent: each holds both ends of the pool's pipes,
so it never sees them close, and waits for its next task for ever. On Linux the kernel kills them
(`prctl(PR_SET_PDEATHSIG)`); elsewhere a thread in each worker polls for a new parent.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 1.0


def die_with_parent(parent_pid: int) -> None:
    """Called first thing in a worker (a pool's `initializer`, with the pool owner's pid): kill this
    process when `parent_pid` exits, or now if it already has.

    The kernel sends the signal when the thread that forked the worker ends, so the pool must be
    started by a thread that lives as long as the pool (a pool in a `with` block is). It arms only
    for a parent alive at the call, hence the check afterwards."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    else:
        threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), name="parent-watch", daemon=True).start()
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGKILL)
