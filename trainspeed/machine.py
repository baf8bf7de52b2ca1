"""The machine a measurement ran on, recorded in every row: a CPU number means little without the
cores the process could use and how busy the machine was while it ran.

A row's `machine` is captured when its measurement starts and completed when it ends (the load
average at both ends), so a reader can tell a quiet machine from one shared with other jobs: the
load average above the cores the process could use means other work competed for them.

Every kind of row carries one, and the report reads them, so this module imports no torch: torch's
thread counts are read from torch when the process has imported it (a process that measures has),
and its version from the installed package otherwise.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import socket
import sys
from dataclasses import dataclass, field
from functools import cache

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS", "PJRT_DEVICE")
"""Environment variables that set how many threads the math libraries (and XLA's CPU client) start."""


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@cache
def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _torch_threads() -> tuple[int | None, int | None]:
    """torch's intra- and inter-op thread counts, where this process uses torch (None, None where not)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, None
    return torch.get_num_threads(), torch.get_num_interop_threads()


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    return torch.__version__ if torch is not None else _version("torch")


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class Machine:
    """Fields are None only in rows converted from files written before rows recorded them."""

    hostname: str | None
    cpu_model: str | None
    cores_total: int | None
    """Every CPU the machine has (`os.cpu_count`)."""
    cores_usable: int | None
    """The CPUs this process could run on (`os.sched_getaffinity`)."""
    load_average_start: float | None
    """The 1-minute load average when the measurement started."""
    load_average_end: float | None
    torch_threads: int | None
    torch_interop_threads: int | None
    python_version: str | None
    torch_version: str | None
    torch_xla_version: str | None
    thread_variables: dict[str, str] = field(default_factory=dict)
    """The `THREAD_VARIABLES` that were set, as they were."""
    note: str | None = None
    """What is known of the machine beyond what was recorded (rows converted from older files)."""

    @classmethod
    def at_start(cls) -> "Machine":
        threads, interop_threads = _torch_threads()
        return cls(
            hostname=socket.gethostname(), cpu_model=cpu_model_name(), cores_total=os.cpu_count(),
            cores_usable=_usable_cores(), load_average_start=_load_average(), load_average_end=None,
            torch_threads=threads, torch_interop_threads=interop_threads,
            python_version=platform.python_version(), torch_version=_torch_version(),
            torch_xla_version=_version("torch_xla"),
            thread_variables={name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
        )

    def at_end(self) -> "Machine":
        """This machine with the load average now, and the thread counts now (a measurement may set
        them after it started; a process that imported torch since the start has them now)."""
        threads, interop_threads = _torch_threads()
        return dataclasses.replace(self, load_average_end=_load_average(),
                                   torch_threads=threads if threads is not None else self.torch_threads,
                                   torch_interop_threads=interop_threads if interop_threads is not None
                                   else self.torch_interop_threads)

    @property
    def peak_load(self) -> float | None:
        loads = [load for load in (self.load_average_start, self.load_average_end) if load is not None]
        return max(loads) if loads else None

    @property
    def shared(self) -> bool | None:
        """True when the load average exceeded the cores this process could use (None: not recorded)."""
        cores = self.cores_usable or self.cores_total
        if self.peak_load is None or cores is None:
            return None
        return self.peak_load > cores
