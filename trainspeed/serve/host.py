"""The device a server holds and what its sessions share: the target, one lock, the session count,
the workloads it builds and the memory budget for client tensors.

Every operation that runs on the device (building a model, a step, a sync, moving a state) holds
the lock, so sessions of several clients take turns on the device instead of sharing it at once,
and each step's time on the server is that step's alone. Receiving and checking bytes happens
outside the lock, so one client's upload never waits for another's step.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator, TextIO

import grpc
import torch

from trainspeed.bench.peak import measure_peak_tflops
from trainspeed.serve.memory import MemoryBudget
from trainspeed.serve.refusal import Refusal
from trainspeed.serve.workloads import WorkloadList
from trainspeed.targets.base import Target
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.limits import CHUNK_BYTES, MAX_MESSAGE_BYTES


@dataclass
class DeviceHost:
    target: Target
    max_sessions: int
    workloads: WorkloadList
    memory: MemoryBudget
    idle_timeout_s: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    live_sessions: int = 0
    _count_lock: threading.Lock = field(default_factory=threading.Lock)
    _peak_tflops: float | None = None
    log_to: TextIO | None = None
    """Where the server's lines go: stderr (None), as `trainspeed serve` prints them, or the stream of
    a program that runs the server in its own process and keeps its stderr for itself."""
    _readers: set[threading.Thread] = field(default_factory=set)
    """Sessions' reader threads still running: a reader may be checking a client's size, in torch,
    when the server stops, and the process must not end under it."""

    def log(self, line: str) -> None:
        """One line of what the server does, `trainspeed serve: LINE`, whichever thread does it."""
        print(f"trainspeed serve: {line}", file=self.log_to or sys.stderr, flush=True)

    def start_reader(self, reader: threading.Thread) -> None:
        with self._count_lock:
            self._readers = {thread for thread in self._readers if thread.is_alive()} | {reader}
        reader.start()

    def join_readers(self, timeout_s: float) -> None:
        """Wait for the readers of ended sessions (their calls are cancelled, so a size check they
        run stops within a few ops), at most `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s
        with self._count_lock:
            readers = list(self._readers)
        for reader in readers:
            reader.join(max(0.0, deadline - time.monotonic()))

    @property
    def target_name(self) -> str:
        return str(self.target)

    @contextlib.contextmanager
    def session_slot(self) -> Iterator[bool]:
        """Hold one of `max_sessions` slots for a stream; yields whether it is the only session."""
        with self._count_lock:
            if self.live_sessions >= self.max_sessions:
                raise Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"server busy: it holds {self.live_sessions} sessions, its --max-sessions")
            self.live_sessions += 1
            alone = self.live_sessions == 1
        try:
            yield alone
        finally:
            with self._count_lock:
                self.live_sessions -= 1

    def describe(self) -> pb.ServerInfo:
        return pb.ServerInfo(
            target=self.target_name,
            device_name=self.target.device_name(),
            torch_version=torch.__version__,
            threads=torch.get_num_threads(),
            max_message_bytes=MAX_MESSAGE_BYTES,
            chunk_bytes=CHUNK_BYTES,
            live_sessions=self.live_sessions,
            workloads=self.workloads.describe(),
            idle_timeout_s=self.idle_timeout_s,
            memory_budget_bytes=self.memory.limit_bytes,
        )

    def peak_tflops(self) -> float:
        """The device's peak, measured once (the bench's probe, on this device, holding the lock)."""
        with self.lock:
            if self._peak_tflops is None:
                self._peak_tflops = measure_peak_tflops(self.target)
            return self._peak_tflops
