"""The run directory's lock: one run at a time, released the moment its holder dies.

The lock is a POSIX record lock (`fcntl.lockf`) on `RUN_DIR/.lock`, not a `flock`. The difference
matters because a rank's loader workers are forked, not started: a forked child shares its
parent's `flock` (it belongs to the open file) and kept a killed run's directory locked until the
last orphaned worker noticed and exited, while a record lock belongs to the process that took it,
is never inherited across fork, and the kernel drops it when that process dies, however it dies.
The descriptor is opened close-on-exec, so no started child holds it open either.

The holder writes who it is (pid, the process's start time, host, since when) into the file. A
refused run names the holder from that record when the record describes a live process; a record
whose pid is gone, or is now another process (its start time differs), is stale and is not
believed: the message then says only that another process holds the lock.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import psutil

from trainspeed.errors import UsageError
from trainspeed.user_json import loads

LOCK_FILE = ".lock"
RECORD_MAX_BYTES = 4096


@dataclass(frozen=True)
class LockHolder:
    pid: int
    start_time: float
    """The process's start time (seconds since the epoch, as psutil reports it)."""
    host: str
    since: str

    @classmethod
    def this_process(cls) -> "LockHolder":
        return cls(pid=os.getpid(), start_time=psutil.Process().create_time(), host=socket.gethostname(),
                   since=datetime.datetime.now().isoformat(timespec="seconds"))

    @classmethod
    def parse(cls, text: str) -> "LockHolder | None":
        try:
            raw = loads(text)
            return cls(pid=int(raw["pid"]), start_time=float(raw["start_time"]), host=str(raw["host"]),
                       since=str(raw["since"]))
        except (ValueError, TypeError, KeyError):  # JSONRefused is a ValueError
            return None

    def is_running(self) -> bool:
        """Whether the recorded process still runs (on another host: assumed, it cannot be seen)."""
        if self.host != socket.gethostname():
            return True
        try:
            return psutil.Process(self.pid).create_time() == self.start_time
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return False
        except psutil.AccessDenied:
            return True

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.since}"


@contextlib.contextmanager
def hold_run_lock(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir`'s lock for the block; UsageError naming the holder when another run has it."""
    fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise UsageError(f"train: run directory {run_dir} is in use by {_holder_of(fd)}; "
                             "wait for that run or choose another --out") from None
        _write_record(fd, json.dumps(asdict(LockHolder.this_process())) + "\n")
        try:
            yield
        finally:
            _write_record(fd, "")  # nobody holds it now
    finally:
        os.close(fd)  # releases the lock


def _holder_of(fd: int) -> str:
    holder = LockHolder.parse(os.pread(fd, RECORD_MAX_BYTES, 0).decode("utf-8", errors="replace"))
    if holder is None or not holder.is_running():
        return "another process (its record is stale or not written yet)"
    return holder.describe()


def _write_record(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode("utf-8"), 0)
