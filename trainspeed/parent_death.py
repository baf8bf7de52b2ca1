"""Worker processes that die with the process that started them, so a command killed outright
(kill -9, the OOM killer) leaves no workers behind.

A process pool's workers otherwise outlive their parent: each holds both ends of the pool's pipes,
so it never sees them close, and waits for its next task for ever. On Linux the kernel kills them
(`prctl(PR_SET_PDEATHSIG)`); elsewhere a thread in each worker polls for a new parent.

A worker a fork server started (`trainspeed.child_start`: once JAX has started in the process that
wants it) has the server for its parent, not that process, and the server lives on while any of
its children do; a thread in such a worker waits for the process it was started for to end.
"""

from __future__ import annotations

import ctypes
import os
import select
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
    if started_by_fork_server():
        die_with_owner(parent_pid)
        return
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


def started_by_fork_server() -> bool:
    """Whether this process is a child a `multiprocessing` fork server forked."""
    try:
        from multiprocessing import forkserver
    except ImportError:  # a platform without fork servers
        return False
    return forkserver._forkserver.get_inherited_fds() is not None


def die_with_owner(owner_pid: int) -> None:
    """Kill this process when `owner_pid`, the process it was started for but that is not its
    parent (a fork server is), ends; now if it has. A thread waits on the owner's pidfd (Linux),
    which is ready once the owner has exited; elsewhere it polls every second."""
    try:
        owner = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGKILL)
    except (AttributeError, OSError):  # no pidfd here: poll
        threading.Thread(target=_exit_when_gone, args=(owner_pid,), name="owner-watch", daemon=True).start()
    else:
        threading.Thread(target=_exit_when_ready, args=(owner,), name="owner-watch", daemon=True).start()


def _exit_when_ready(pidfd: int) -> None:
    select.select([pidfd], [], [])
    os.kill(os.getpid(), signal.SIGKILL)


def _exit_when_gone(pid: int) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        except PermissionError:
            pass
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGKILL)
