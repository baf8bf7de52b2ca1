"""The client of `trainspeed serve`: a connection per server, a session per model.

A `Connection` is one gRPC channel. Its first call (`describe`) tells at once whether a server
answers, accepts the token and serves the target the client names, so a wrong address, token or
target is one line before anything runs.

A `Session` is one bidirectional stream, and one model on the server for as long as it lasts:
it opens with the workload, size and seed, then sends batches (raw tensors in 1 MiB chunks) and
steps, and receives each step's loss and the server's own step time. Messages are queued and a
gRPC thread sends them, so an upload or a step returns before its bytes have left; `in_flight`
bounds how many steps may be sent ahead of their results:

- `in_flight = 1` (the default) is the study's synchronous client: a step waits for its result,
  so the next batch starts to cross only when the server is idle again;
- `in_flight = N > 1` returns from a step while up to N - 1 earlier ones are still out, so the
  next batch crosses while the server computes; the loss tensor a step returns is filled in when
  its result arrives, which `sync` waits for.

A reader thread moves replies into a queue, so every wait has a deadline; a broken stream (the
server died, the link broke) or a missing reply raises DeviceLost, and a refusal of the server
raises RemoteError with its gRPC status.
"""

from __future__ import annotations

import itertools
import math
import queue
import statistics
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import grpc
import torch

from trainspeed.errors import DeviceLost, ServerRefused, UsageError
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire import remote_pb2_grpc as pb_grpc
from trainspeed.wire.address import Address
from trainspeed.wire.credentials import TLS_CA_VARIABLE, TOKEN_FILE_VARIABLE, ClientCredentials
from trainspeed.wire.limits import CLIENT_OPTIONS, CONNECT_TIMEOUT_S, REPLY_TIMEOUT_S
from trainspeed.wire.pacing import Pacer
from trainspeed.wire.state import decode_state, encode_state
from trainspeed.wire.tensors import TensorAssembler, decode_single, tensor_chunks

LOST_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED)
"""Statuses that mean the server or the link went away, not that the server refused something."""
OUT_OF_MEMORY_PREFIX = "out of memory"
"""How the server's RESOURCE_EXHAUSTED details begin when a step ran out of device memory."""
CLOSE_WAIT_S = 5.0
_END = object()


class RemoteError(ServerRefused):
    """The server refused a request or a step failed there; `code` is the gRPC status."""

    def __init__(self, message: str, code: grpc.StatusCode) -> None:
        super().__init__(message)
        self.code = code


class RemoteOutOfMemory(RemoteError):
    """A step ran out of memory on the server's device (the bench records an `oom` row)."""


def failure(address: Address, error: grpc.RpcError, during: str) -> Exception:
    """The exception a failed call becomes: DeviceLost, RemoteOutOfMemory or RemoteError."""
    code, details = error.code(), error.details() or ""
    if code in LOST_CODES:
        return DeviceLost(f"remote server {address} went away during {during} ({code.name}: {details})")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and details.startswith(OUT_OF_MEMORY_PREFIX):
        return RemoteOutOfMemory(f"remote server {address}: {details}", code)
    return RemoteError(f"remote server {address} refused {during}: {code.name}: {details}", code)


class Connection:
    """One channel to one server, with the client's credentials."""

    def __init__(self, address: Address, credentials: ClientCredentials) -> None:
        self.address = address
        self.credentials = credentials
        if credentials.tls_ca is not None:
            tls = grpc.ssl_channel_credentials(root_certificates=credentials.tls_ca)
            self.channel = grpc.secure_channel(str(address), tls, options=CLIENT_OPTIONS)
        else:
            self.channel = grpc.insecure_channel(str(address), options=CLIENT_OPTIONS)
        self.stub = pb_grpc.TrainerStub(self.channel)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return self.credentials.metadata

    def describe(self, timeout_s: float = CONNECT_TIMEOUT_S) -> pb.ServerInfo:
        """The server's description; UsageError in one line when none answers or it refuses us."""
        try:
            return self.stub.Describe(pb.DescribeRequest(), timeout=timeout_s, metadata=self.metadata)
        except grpc.RpcError as error:
            raise UsageError(self._describe_failure(error)) from None

    def _describe_failure(self, error: grpc.RpcError) -> str:
        code, details = error.code(), error.details() or ""
        where = f"remote server {self.address}"
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return f"{where} refused this client ({details}); set {TOKEN_FILE_VARIABLE} to a file holding its token"
        if code == grpc.StatusCode.UNAVAILABLE:
            tls = (f"; if it speaks TLS, set {TLS_CA_VARIABLE}" if self.credentials.tls_ca is None
                   else f"; check that it speaks TLS with a certificate {TLS_CA_VARIABLE} signed")
            return (f"no trainspeed server answers at {self.address} ({details}); start one there with "
                    f"`trainspeed serve --listen {self.address} --target ...`{tls}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"{where} did not answer within {CONNECT_TIMEOUT_S:.0f} s"
        return f"{where}: {code.name}: {details}"

    def measure_peak(self, timeout_s: float = REPLY_TIMEOUT_S) -> float:
        try:
            return self.stub.MeasurePeak(pb.PeakRequest(), timeout=timeout_s, metadata=self.metadata).tflops
        except grpc.RpcError as error:
            raise failure(self.address, error, "the peak probe") from None

    def close(self) -> None:
        self.channel.close()


@dataclass(frozen=True)
class TimedWindow:
    """Steps `first` to `last` (exclusive) of a session, timed by the client from a synced start
    to a synced end (`started_s`, `ended_s`: the client's perf_counter)."""

    first: int
    last: int
    started_s: float
    ended_s: float

    @property
    def steps(self) -> int:
        return self.last - self.first


@dataclass
class SessionStats:
    """Per-step measurements of one session, reported as medians.

    Where the caller times windows of steps (`start_windows`; each `sync` ends one), the medians
    cover the steps of those windows only, and the server's time is summed per window: the
    server's and the client's step times then cover the same steps, so the wire time (client step
    minus server step) cannot come out negative because the server's median included steps the
    client's did not. Without windows (training), they cover every step of the session."""

    bytes_sent: list[int] = field(default_factory=list)
    """Per step: its batch upload (when one preceded it) and the step message."""
    bytes_received: list[int] = field(default_factory=list)
    server_step_s: list[float] = field(default_factory=list)
    compile_count: int = 0
    peak_memory_bytes: int | None = None
    windows: list[TimedWindow] | None = None
    _window_start: tuple[int, float] | None = None

    def start_windows(self) -> None:
        """Time windows from now on, forgetting any timed before (the caller starts them over)."""
        self.windows = []
        self._window_start = (len(self.server_step_s), time.perf_counter())

    def end_window(self) -> None:
        """Every step sent so far has its result: the window open since the last sync ends here."""
        if self._window_start is None or self.windows is None:
            return
        (first, started), now, last = self._window_start, time.perf_counter(), len(self.server_step_s)
        if last > first:
            self.windows.append(TimedWindow(first, last, started, now))
        self._window_start = (last, now)

    def medians(self) -> dict[str, Any]:
        windows = self.windows or None
        steps = [i for w in windows for i in range(w.first, w.last)] if windows else range(len(self.server_step_s))
        sent, received = [self.bytes_sent[i] for i in steps], [self.bytes_received[i] for i in steps]
        fields: dict[str, Any] = {
            "bytes_sent_per_step": int(statistics.median(sent)) if sent else None,
            "bytes_received_per_step": int(statistics.median(received)) if received else None,
            "server_step_s": statistics.median(self.server_step_s) if self.server_step_s else None,
            "server_window_s": None,
            "wire_time_suspect": None,
        }
        if windows:
            server_window_s = [math.fsum(self.server_step_s[w.first:w.last]) for w in windows]
            server_step_s = statistics.median(s / w.steps for s, w in zip(server_window_s, windows))
            client_step_s = statistics.median((w.ended_s - w.started_s) / w.steps for w in windows)
            fields.update(server_window_s=server_window_s, server_step_s=server_step_s,
                          wire_time_suspect=server_step_s > client_step_s)
        return fields


def _requests(outbox: "queue.SimpleQueue[pb.ClientMessage | None]", pacer: Pacer | None) -> Iterator[pb.ClientMessage]:
    """What gRPC sends, in order, until the session closes (a free function: the stream must not
    keep the Session alive, whose collection is what closes it)."""
    while True:
        message = outbox.get()
        if message is None:
            return
        if pacer is not None:
            pacer.before_send(message.ByteSize())
        yield message


def _read(call: Any, inbox: queue.SimpleQueue) -> None:
    """Move every reply into the inbox, then the end or the error that stopped the stream."""
    try:
        for message in call:
            inbox.put((time.monotonic(), message))
        inbox.put((time.monotonic(), _END))
    except grpc.RpcError as error:
        inbox.put((time.monotonic(), error))


def _close(outbox: queue.SimpleQueue, call: Any, reader: threading.Thread) -> None:
    """End the request stream (the server frees the model) and wait briefly for the server to end it."""
    outbox.put(None)
    reader.join(CLOSE_WAIT_S)
    if reader.is_alive():
        call.cancel()


class RemoteBatch:
    """A batch the server holds; freed there when this handle is collected."""

    def __init__(self, session: "Session", batch_id: int, nbytes: int) -> None:
        self.session = session
        self.batch_id = batch_id
        self.nbytes = nbytes
        release = pb.ClientMessage(release=pb.Release(batch_id=batch_id))
        weakref.finalize(self, session.outbox.put, release)


class Session:
    """One model on the server, driven over one stream (see the module docstring)."""

    def __init__(
        self,
        connection: Connection,
        request: pb.Open,
        in_flight: int = 1,
        pacer: Pacer | None = None,
        reply_timeout_s: float = REPLY_TIMEOUT_S,
    ) -> None:
        self.address = connection.address
        self.in_flight = in_flight
        self.pacer = pacer
        self.reply_timeout_s = reply_timeout_s
        self.stats = SessionStats()
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._ids = itertools.count(1)
        self._outstanding: deque[tuple[int, torch.Tensor]] = deque()
        self._unconfirmed = False
        """Something was sent after the last step that no reply has confirmed yet (an upload)."""
        self._pending_bytes = 0
        self._steps_sent = 0
        self._broken: Exception | None = None
        self._call = connection.stub.Session(_requests(self.outbox, pacer), metadata=connection.metadata)
        self._reader = threading.Thread(target=_read, args=(self._call, self._inbox), daemon=True,
                                         name=f"trainspeed-remote-{self.address}")
        self._reader.start()
        self._finalizer = weakref.finalize(self, _close, self.outbox, self._call, self._reader)
        self._send(pb.ClientMessage(open=request))
        self.opened = self._next("opening a session").opened

    # --- sending and receiving ------------------------------------------------------------------
    def _send(self, message: pb.ClientMessage) -> int:
        self._raise_if_broken()
        self.outbox.put(message)
        return message.ByteSize()

    def _raise_if_broken(self) -> None:
        if self._broken is not None:
            raise self._broken

    @property
    def broken(self) -> bool:
        """The stream failed (the failure was raised to whoever waited); nothing runs here any more."""
        return self._broken is not None

    def _next(self, during: str) -> pb.ServerMessage:
        """The next reply; DeviceLost or RemoteError when there is none (and for every later call)."""
        self._raise_if_broken()
        try:
            arrived_at, item = self._inbox.get(timeout=self.reply_timeout_s)
        except queue.Empty:
            self._call.cancel()
            item, arrived_at = None, time.monotonic()
            self._broken = DeviceLost(
                f"remote server {self.address} sent no reply within {self.reply_timeout_s:.0f} s during {during}"
            )
        if self.pacer is not None:
            self.pacer.hold_reply(arrived_at)
        if item is _END:
            self._broken = DeviceLost(f"remote server {self.address} ended the session during {during}")
        elif isinstance(item, grpc.RpcError):
            self._broken = failure(self.address, item, during)
        self._raise_if_broken()
        kind = item.WhichOneof("kind")
        if kind == "step_done":
            self._finish_step(item)
        return item

    def _finish_step(self, message: pb.ServerMessage) -> None:
        done = message.step_done
        seq, loss = self._outstanding.popleft()
        if seq != done.seq:
            raise RuntimeError(f"remote server {self.address} answered step {done.seq}, step {seq} was next")
        loss.copy_(decode_single(done.loss))
        self.stats.bytes_received.append(message.ByteSize())
        self.stats.server_step_s.append(done.server_step_s)
        self.stats.compile_count = done.compile_count
        self.stats.peak_memory_bytes = done.peak_memory_bytes if done.peak_memory_bytes >= 0 else None
        self._unconfirmed = False

    def _wait_for(self, kind: str, seq: int, during: str) -> pb.ServerMessage:
        """Replies up to the one of `kind` answering `seq` (step results before it are taken in)."""
        while True:
            message = self._next(during)
            if message.WhichOneof("kind") == kind and getattr(message, kind).seq == seq:
                return message
            if message.WhichOneof("kind") != "step_done":
                raise RuntimeError(f"remote server {self.address}: unexpected {message.WhichOneof('kind')} during {during}")

    def _drain_steps(self, keep: int, during: str) -> None:
        while len(self._outstanding) > keep:
            message = self._next(during)
            if message.WhichOneof("kind") != "step_done":
                raise RuntimeError(f"remote server {self.address}: unexpected {message.WhichOneof('kind')} during {during}")

    # --- what a target does -----------------------------------------------------------------------
    def upload(self, batch: Mapping[str, torch.Tensor]) -> RemoteBatch:
        """Queue a batch for the server, which keeps it until the handle is collected."""
        batch_id = next(self._ids)
        nbytes = 0
        for name, tensor in batch.items():
            for chunk in tensor_chunks(name, tensor):
                nbytes += self._send(pb.ClientMessage(batch_tensor=pb.BatchTensor(batch_id=batch_id, chunk=chunk)))
        nbytes += self._send(pb.ClientMessage(batch_end=pb.BatchEnd(batch_id=batch_id)))
        self._pending_bytes += nbytes
        self._unconfirmed = True
        return RemoteBatch(self, batch_id, nbytes)

    def step(self, batch: RemoteBatch, learning_rates: Mapping[str, list[float]]) -> torch.Tensor:
        """Send one step on a batch the server holds; its loss, filled in when the result arrives
        (before returning with in_flight = 1)."""
        if batch.session is not self:
            raise ValueError("this batch was uploaded in another session (build the trainable, then move its batches)")
        seq = next(self._ids)
        self._steps_sent += 1
        step = pb.Step(seq=seq, batch_id=batch.batch_id, learning_rates=[
            pb.LearningRates(optimizer=name, lr=lrs) for name, lrs in learning_rates.items()
        ])
        sent = self._send(pb.ClientMessage(step=step))
        self.stats.bytes_sent.append(self._pending_bytes + sent)
        self._pending_bytes = 0
        loss = torch.full((), float("nan"))
        self._outstanding.append((seq, loss))
        self._drain_steps(self.in_flight - 1, f"step {self._steps_sent} of its session")
        return loss

    def sync(self) -> None:
        """Wait until everything sent so far has run on the server (this ends a timed window)."""
        self._drain_steps(0, "a sync")
        if self._unconfirmed:
            seq = next(self._ids)
            self._send(pb.ClientMessage(barrier=pb.Barrier(seq=seq)))
            self._wait_for("done", seq, "a sync")
            self._unconfirmed = False
        self.stats.end_window()

    def get_state(self, part: int) -> Any:
        """A state of the server (its Trainable's or its RNGs'), as nested host tensors and values."""
        self._drain_steps(0, "fetching a state")
        seq = next(self._ids)
        self._send(pb.ClientMessage(get_state=pb.GetState(seq=seq, part=part)))
        assembler, tensors = TensorAssembler(), []
        while True:
            message = self._next("fetching a state")
            kind = message.WhichOneof("kind")
            if kind == "state_tensor":
                received = assembler.add(message.state_tensor.chunk)
                if received is not None:
                    tensors.append(received[1])
            elif kind == "state_done" and message.state_done.seq == seq:
                return decode_state(message.state_done.skeleton, tensors)
            else:
                raise RuntimeError(f"remote server {self.address}: unexpected {kind} while fetching a state")

    def set_state(self, part: int, state: Any) -> None:
        """Load a state (as `get_state` returned it) into the server's Trainable or RNGs."""
        self._drain_steps(0, "sending a state")
        skeleton, tensors = encode_state(state)
        for index, tensor in enumerate(tensors):
            for chunk in tensor_chunks(str(index), tensor):
                self._send(pb.ClientMessage(state_tensor=pb.StateTensor(chunk=chunk)))
        seq = next(self._ids)
        self._send(pb.ClientMessage(set_state=pb.SetState(seq=seq, part=part, skeleton=skeleton)))
        self._wait_for("done", seq, "sending a state")

    def close(self) -> None:
        """End the session now (it also ends when the session is collected)."""
        self._finalizer()
