"""One session: one client's stream, one model on the server's device, freed when the stream ends.

Two threads share the work, so the bytes of the next batch arrive while the device computes the
step before it (what a client with several steps in flight relies on):

- the reader takes the client's messages as they arrive, joins tensor chunks, checks every header
  against the workload's batch layout before accepting its bytes, and queues complete commands
  (a batch, a step, a state ...);
- the session's handler thread runs the commands in order on the device and answers: the step's
  loss and its time on the server (synced at both ends), states as tensors plus JSON.

Whatever a client does wrong (a malformed or oversized message, a dtype off the allow-list, a batch
of another shape, an unknown workload or batch, more bytes than its memory limits allow) ends its
own session with a gRPC status that says what; so does a failure of the reader itself, which
would otherwise end the stream with an OK that says nothing. The server and the other sessions go
on. A client that disconnects, or whose connection dies, ends its session the same way, and the
model and batches are freed; so does a client that asks for no work for `--idle-timeout-s` (no
step, no batch or state arriving or moving: barriers and releases alone do not keep a slot), which
ends with DEADLINE_EXCEEDED and frees its slot, and one that reads no reply for as long. Its size
is checked, its batch layout made and its model counted on the meta device, within the check's
time limit (stopped when the client leaves); its model (with the largest optimizer state) counts
against the server's memory budget from then on, before it is built, and one sample of its batch
must fit beside it; its activations count after its first step where the device measures memory
(`memory.py`).
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import grpc
import torch

from trainspeed.errors import UsageError
from trainspeed.serve.batches import MAX_RESIDENT_BATCHES, BatchAssembly, BatchLayout
from trainspeed.serve.host import DeviceHost
from trainspeed.serve.memory import SessionMemory, StateLimit, model_bytes, planned_model_bytes
from trainspeed.serve.refusal import Refusal
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.client import OUT_OF_MEMORY_PREFIX
from trainspeed.wire.state import decode_state, encode_state
from trainspeed.wire.tensors import TensorAssembler, WireError, check_header, single_chunk, tensor_chunks
from trainspeed.workloads import resolve_size
from trainspeed.workloads.base import Trainable, Workload
from trainspeed.workloads.meta import CheckLimits, CheckStopped, check_limits
from trainspeed.workloads.named.sizing import clipped


@dataclass(frozen=True)
class Command:
    kind: str
    payload: Any = None


END = Command("end")


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


WORK_MESSAGES = frozenset({"open", "batch_tensor", "state_tensor"})
"""Messages whose arrival restarts a session's idle clock: the bytes of a model's inputs or state."""
WORK_COMMANDS = frozenset({"open", "batch", "step", "set_state", "get_state"})
"""Commands whose end restarts it: the device built, stepped or moved the session's model. A
barrier or a release does neither, so a client that only sends those (a barrier every few seconds)
holds its slot for no more than the idle timeout."""


class Activity:
    """When the session last did work: its model was built, stepped or its state moved, or bytes of
    a batch or a state arrived and were read (the reading is the server's work, however long a
    loaded machine takes over it). Messages that ask for nothing (barriers, releases) do not count.

    A step that computes for minutes is not idleness: the clock restarts when it finishes."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self._working = 0
        """Work under way in the reader thread (a message being read): no idleness while it lasts."""
        self._lock = threading.Lock()

    def touch(self) -> None:
        self._last = time.monotonic()

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """The server works for the session (reads what a client sent): the clock restarts when it ends."""
        with self._lock:
            self._working += 1
        try:
            yield
        finally:
            with self._lock:
                self._working -= 1
            self.touch()

    def idle_left_s(self, timeout_s: float) -> float:
        if self._working:
            return timeout_s
        return timeout_s - (time.monotonic() - self._last)


class StalledReplies:
    """Cancels the call once a reply has waited `timeout_s` to be sent: a client that stops reading
    its replies (HTTP/2 flow control then holds the send) would otherwise hold its slot for ever.
    A cancelled call's client learns nothing more; it was not listening."""

    def __init__(self, context: grpc.ServicerContext, timeout_s: float, log: Callable[[str], None]) -> None:
        self.context = context
        self.timeout_s = timeout_s
        self.log = log
        self._since: float | None = None
        self._ended = threading.Event()
        threading.Thread(target=self._watch, daemon=True, name=f"trainspeed-serve-replies-{context.peer()}").start()

    def sending(self) -> None:
        self._since = time.monotonic()

    def sent(self) -> None:
        self._since = None

    def end(self) -> None:
        self._ended.set()

    def _watch(self) -> None:
        while not self._ended.wait(self.timeout_s / 4):
            since = self._since
            if since is not None and time.monotonic() - since > self.timeout_s:
                self.log(f"session {self.context.peer()}: a reply waited {self.timeout_s:g} s to be sent (the client "
                         "reads none); the call is cancelled and its slot freed")
                self.context.cancel()
                return


class RequestReader:
    """Turns the client's messages into checked commands (runs in the reader thread)."""

    def __init__(self, host: DeviceHost, memory: SessionMemory, client_gone: Callable[[], bool] = lambda: False) -> None:
        self.host = host
        self.memory = memory
        self.client_gone = client_gone
        """True once the client's call has ended: a size check still running for it stops."""
        self.layout: BatchLayout | None = None
        self.assembly: BatchAssembly | None = None
        self.resident: dict[int, int] = {}
        """Batches uploaded and not released: id -> bytes."""
        self.state_assembler = TensorAssembler()
        self.state_tensors: list[torch.Tensor] = []
        self.state_nbytes = 0

    def handle(self, message: pb.ClientMessage) -> Iterator[Command]:
        kind = message.WhichOneof("kind")
        if kind is None:
            raise WireError("an empty message")
        if kind == "open":
            yield self._open(message.open)
            return
        if self.layout is None:
            raise Refusal(grpc.StatusCode.FAILED_PRECONDITION, f"the first message of a session must be open, not {kind}")
        if kind == "batch_tensor":
            self._batch_tensor(message.batch_tensor)
        elif kind == "batch_end":
            yield self._batch_end(message.batch_end.batch_id)
        elif kind == "release":
            self.memory.releasing(self.resident.pop(message.release.batch_id, 0))
            yield Command("release", message.release.batch_id)
        elif kind == "state_tensor":
            self._state_tensor(message.state_tensor.chunk)
        elif kind == "set_state":
            if not self.state_assembler.idle:
                raise WireError("set_state before the state's last tensor ended")
            payload = (message.set_state, self.state_tensors, self.state_nbytes)
            self.state_tensors, self.state_nbytes = [], 0
            yield Command("set_state", payload)
        else:  # step, barrier, get_state: run in order by the handler
            yield Command(kind, getattr(message, kind))

    def _open(self, request: pb.Open) -> Command:
        if self.layout is not None:
            raise Refusal(grpc.StatusCode.FAILED_PRECONDITION, "a session opens once")
        if request.target != self.host.target_name:
            raise Refusal(grpc.StatusCode.FAILED_PRECONDITION,
                          f"this server serves {self.host.target_name}, not {request.target}")
        workload = self.host.workloads.open(request.workload, request.workload_sha256)
        if request.batch_size < 0:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"batch size {request.batch_size} is negative")
        what = f"the {request.workload} {clipped(request.size)} model with its optimizer state"
        # Everything below runs on the meta device: this process's memory belongs to the budget, so
        # nothing of the client's size runs on the host (CheckLimits.host_max_bytes 0).
        with check_limits(CheckLimits(host_max_bytes=0, cancelled=self.client_gone)):
            try:
                resolve_size(workload, request.size)
                layout = BatchLayout.of(workload, request.size, request.batch_size or None)
                with self.host.lock:  # building draws from the process's RNG, which steps share
                    planned = planned_model_bytes(workload, request.size, request.seed)
            except UsageError as refused:
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, str(refused)) from None
            except CheckStopped as stopped:
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"counting {what} stopped: {stopped}") from None
        reserved = planned or 0
        self.memory.take(reserved, what)
        samples = request.batch_size or 1
        self.memory.budget.check_fits(layout.sample_nbytes() * samples, f"a batch of {samples} sample(s) of "
                                      f"{request.workload} {clipped(request.size)} beside its model")
        self.layout = layout
        return Command("open", (request, workload, reserved))

    def _batch_tensor(self, message: pb.BatchTensor) -> None:
        if self.assembly is None:
            if message.batch_id in self.resident:
                raise WireError(f"batch {message.batch_id} was sent before and is still held")
            if len(self.resident) >= MAX_RESIDENT_BATCHES:
                raise WireError(f"more than {MAX_RESIDENT_BATCHES} batches held at once; release some", too_large=True)
            self.assembly = BatchAssembly(message.batch_id, self.layout, self.memory)
        elif self.assembly.batch_id != message.batch_id:
            raise WireError(f"batch {message.batch_id} started before batch {self.assembly.batch_id} ended")
        self.assembly.add(message.chunk)

    def _batch_end(self, batch_id: int) -> Command:
        if self.assembly is None or self.assembly.batch_id != batch_id:
            raise WireError(f"batch_end for batch {batch_id}, which is not being sent")
        tensors = self.assembly.finish()
        payload = (batch_id, tensors, self.assembly.nbytes)
        self.resident[batch_id] = self.assembly.nbytes
        self.assembly = None
        return Command("batch", payload)

    def _state_tensor(self, chunk: pb.TensorChunk) -> None:
        if chunk.HasField("header"):
            check_header(chunk.header, self.state_assembler.max_bytes)  # a header that lies takes nothing
            self.memory.take_state(chunk.header)
            self.state_nbytes += chunk.header.nbytes
        received = self.state_assembler.add(chunk)
        if received is not None:
            self.state_tensors.append(received[1])


def read_requests(requests: Iterable[pb.ClientMessage], commands: "queue.Queue[Command]", reader: RequestReader,
                  activity: Activity) -> None:
    """The reader thread: commands in order, then `end`, or a refusal that ends the session."""
    try:
        for message in requests:
            # reading a work message is the server's work (an open counts the model on the meta device)
            with activity.working() if message.WhichOneof("kind") in WORK_MESSAGES else contextlib.nullcontext():
                for command in reader.handle(message):
                    commands.put(command)
    except grpc.RpcError:
        pass  # the stream ended under the reader: the client went away, sent too large a message, or the call ended
    except WireError as error:
        code = grpc.StatusCode.RESOURCE_EXHAUSTED if error.too_large else grpc.StatusCode.INVALID_ARGUMENT
        commands.put(Command("refuse", Refusal(code, str(error))))
    except Refusal as refusal:
        commands.put(Command("refuse", refusal))
    except UsageError as error:  # the workload refused the open request
        commands.put(Command("refuse", Refusal(grpc.StatusCode.INVALID_ARGUMENT, str(error))))
    except Exception as error:  # noqa: BLE001 - any other failure here must reach the client, not end the stream OK
        reader.host.log(f"reading a client's message failed: {_first_line(error)}")
        commands.put(Command("refuse", Refusal(grpc.StatusCode.INTERNAL,
                                               f"the server failed reading the client's message: {_first_line(error)}")))
    commands.put(END)


class DeviceSession:
    """What one session holds on the device, and the commands that run there."""

    def __init__(self, host: DeviceHost, peer: str, memory: SessionMemory) -> None:
        self.host = host
        self.peer = peer
        self.memory = memory
        self.trainable: Trainable | None = None
        self.batches: dict[int, tuple[Any, int]] = {}
        """Batch id -> (the batch on the device, the bytes it holds of the session's memory)."""
        self.steps = 0

    def run(self, command: Command) -> Iterator[pb.ServerMessage]:
        handler = getattr(self, f"_{command.kind}")
        yield from handler(command.payload) or ()

    def _open(self, payload: tuple[pb.Open, Workload, int]) -> Iterator[pb.ServerMessage]:
        request, workload, reserved = payload
        target = self.host.target
        with self.host.lock:
            try:
                self.trainable = target.build(workload, request.size, request.seed)
            except Exception as error:  # noqa: BLE001 - a build that fails ends only the client's own session
                raise self._step_failure(error, "building the model") from None
        built = model_bytes(self.trainable)  # the meta build's count was taken at open; the built one holds
        if built > reserved:
            self.memory.take(built - reserved, f"the {request.workload} {clipped(request.size)} model with its "
                             "optimizer state")
        else:
            self.memory.give_back(reserved - built)
        self.memory.set_state_limit(StateLimit.of(self.trainable))
        optimizers = [pb.OptimizerGroups(optimizer=name, lr=[float(g["lr"]) for g in optimizer.param_groups])
                      for name, optimizer in self.trainable.optimizers.items()]
        self.host.log(f"session {self.peer}: {request.workload} {request.size} seed {request.seed} built on {target}")
        yield pb.ServerMessage(opened=pb.Opened(target=self.host.target_name, device_name=target.device_name(),
                                                parameter_count=self.trainable.parameter_count(), optimizers=optimizers))

    def _batch(self, payload: tuple[int, dict[str, torch.Tensor], int]) -> None:
        batch_id, tensors, nbytes = payload
        with self.host.lock:
            self.batches[batch_id] = (self.host.target.move_batch(tensors), nbytes)

    def _release(self, batch_id: int) -> None:
        _, nbytes = self.batches.pop(batch_id, (None, 0))
        self.memory.give_back(nbytes, released=True)

    def _set_learning_rates(self, rates: Iterable[pb.LearningRates]) -> None:
        for entry in rates:
            optimizer = self.trainable.optimizers.get(entry.optimizer)
            if optimizer is None or len(entry.lr) != len(optimizer.param_groups):
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT,
                              f"learning rates for {entry.optimizer!r} do not fit the model's optimizers")
            if not all(math.isfinite(lr) and lr >= 0 for lr in entry.lr):
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"learning rates {list(entry.lr)} are not finite and >= 0")
            for group, lr in zip(optimizer.param_groups, entry.lr):
                group["lr"] = lr

    def _step(self, step: pb.Step) -> Iterator[pb.ServerMessage]:
        batch, _ = self.batches.get(step.batch_id, (None, 0))
        if batch is None:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"step {self.steps + 1}: no batch {step.batch_id} on the server")
        self._set_learning_rates(step.learning_rates)
        target = self.host.target
        with self.host.lock:
            in_use = target.memory_in_use_bytes() if self.steps == 0 else None
            if in_use is not None:
                target.reset_peak_memory()  # this step's own peak, read below
            try:
                target.sync()
                started = time.perf_counter()
                loss = target.run_step(self.trainable, batch)
                target.sync()
                step_s = time.perf_counter() - started
                loss = loss.detach().to("cpu")
            except Exception as error:  # noqa: BLE001 - a failed step ends only the client's own session
                raise self._step_failure(error, f"step {self.steps + 1}") from None
            compiles, peak = target.compile_count(), target.peak_memory_bytes()
        if in_use is not None and peak is not None:
            self.memory.take(max(0, peak - in_use), "the activations of the client's step (its peak above the memory "
                             "in use before it)")
        self.steps += 1
        yield pb.ServerMessage(step_done=pb.StepDone(
            seq=step.seq, loss=single_chunk("loss", loss), server_step_s=step_s, compile_count=compiles,
            peak_memory_bytes=-1 if peak is None else peak,
        ))

    def _step_failure(self, error: BaseException, during: str) -> Refusal:
        if self.host.target.is_oom(error):
            return Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{OUT_OF_MEMORY_PREFIX} on the server during {during}: "
                           f"{_first_line(error)}")
        self.host.log(f"session {self.peer}: {during} failed: {_first_line(error)}")
        return Refusal(grpc.StatusCode.INTERNAL, f"{during} failed on the server: {_first_line(error)}")

    def _barrier(self, barrier: pb.Barrier) -> Iterator[pb.ServerMessage]:
        with self.host.lock:
            self.host.target.sync()
        yield pb.ServerMessage(done=pb.Done(seq=barrier.seq))

    def _state_of(self, part: int) -> Any:
        if part == pb.TRAINABLE:
            return self.trainable.state_dict()
        if part == pb.RNG:
            return {"torch": torch.get_rng_state(), "device": self.host.target.device_rng_state()}
        raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"unknown state part {part}")

    def _get_state(self, request: pb.GetState) -> Iterator[pb.ServerMessage]:
        with self.host.lock:
            skeleton, tensors = encode_state(self._state_of(request.part))
        for index, tensor in enumerate(tensors):
            for chunk in tensor_chunks(str(index), tensor):
                yield pb.ServerMessage(state_tensor=pb.StateTensor(chunk=chunk))
        yield pb.ServerMessage(state_done=pb.StateDone(seq=request.seq, skeleton=skeleton))

    def _set_state(self, payload: tuple[pb.SetState, list[torch.Tensor], int]) -> Iterator[pb.ServerMessage]:
        request, tensors, nbytes = payload
        count = len(tensors)
        try:
            self._load_state(request, decode_state(request.skeleton, tensors))
        finally:
            tensors.clear()  # loading copied them into the model
            self.memory.give_back_state(nbytes, count)
        yield pb.ServerMessage(done=pb.Done(seq=request.seq))

    def _load_state(self, request: pb.SetState, state: Any) -> None:
        with self.host.lock:
            try:
                if request.part == pb.TRAINABLE:
                    self.trainable.load_state_dict(state)
                elif request.part == pb.RNG:
                    torch.set_rng_state(state["torch"])
                    if state["device"] is not None:
                        self.host.target.set_device_rng_state(state["device"])
                else:
                    raise ValueError(f"unknown state part {request.part}")
            except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as error:
                raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, f"the state does not fit: {_first_line(error)}") from None

    def free(self) -> None:
        self.batches.clear()
        self.trainable = None
        with self.host.lock:
            self.host.target.free_memory()
        self.host.log(f"session {self.peer}: ended after {self.steps} steps; its model is freed")


def _next_command(commands: "queue.Queue[Command]", activity: Activity, timeout_s: float) -> Command:
    """The next command; a Refusal once the session has been idle for `timeout_s`."""
    while True:
        left_s = activity.idle_left_s(timeout_s)
        if left_s <= 0:
            raise Refusal(grpc.StatusCode.DEADLINE_EXCEEDED,
                          f"the client's session sent nothing to compute for {timeout_s:g} s (no step, batch or state; "
                          "this server's --idle-timeout-s); the server ended it and freed its slot")
        try:
            return commands.get(timeout=left_s)
        except queue.Empty:
            continue


def serve_session(host: DeviceHost, requests: Iterable[pb.ClientMessage], context: grpc.ServicerContext) -> Iterator[pb.ServerMessage]:
    """The Session RPC: hold a slot, read in one thread, run on the device in this one."""
    commands: "queue.Queue[Command]" = queue.Queue()
    context.add_callback(lambda: commands.put(END))
    memory = SessionMemory(host.memory)
    activity = Activity()
    try:
        with host.session_slot() as alone:
            if alone:  # the device's counters are the process's: restart them only when no one else uses them
                with host.lock:
                    host.target.reset_compilation()
                    host.target.reset_peak_memory()
            activity.touch()  # the server's own set-up (its slot, the counters' reset) is no idleness of the client's
            reader = RequestReader(host, memory, client_gone=lambda: not context.is_active())
            host.start_reader(threading.Thread(target=read_requests, args=(requests, commands, reader, activity),
                                               daemon=True, name=f"trainspeed-serve-reader-{context.peer()}"))
            session = DeviceSession(host, context.peer(), memory)
            replies = StalledReplies(context, host.idle_timeout_s, host.log)
            try:
                while True:
                    command = _next_command(commands, activity, host.idle_timeout_s)
                    if command is END:
                        return
                    if command.kind == "refuse":
                        raise command.payload
                    for reply in session.run(command):
                        replies.sending()
                        yield reply  # gRPC sends it before it asks for the next
                        replies.sent()
                    if command.kind in WORK_COMMANDS:
                        activity.touch()
            finally:
                replies.end()
                session.free()
                memory.close()
    except Refusal as refusal:
        host.log(f"session {context.peer()}: refused: {refusal.code.name}: {refusal.details}")
        context.abort(refusal.code, refusal.details)
    except WireError as error:
        code = grpc.StatusCode.RESOURCE_EXHAUSTED if error.too_large else grpc.StatusCode.INVALID_ARGUMENT
        context.abort(code, str(error))
