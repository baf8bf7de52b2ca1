"""What the tensors a client sends may occupy on the server: per session, and all sessions together.

Every tensor announces its size in its header, so the reader checks it against these limits before
it accepts a byte of it:

- a session's batches are its workload's batch layout at the session's batch size, exactly
  (`batches.py`), and it holds at most `MAX_RESIDENT_BATCHES` of them;
- a state a session sends (a resume's checkpoint) cannot be larger than the state its model can
  have: the model's state when it was built, plus `OPTIMIZER_STATE_FACTOR` times the bytes of the
  parameters its optimizers update (Adam with amsgrad, the largest of torch's, keeps three tensors
  per parameter), plus a margin; and it has at most as many tensors, counted the same way;
- everything every session holds stays within the server's budget, `--memory-budget-gib`: its
  batches and the states being received, its model with the largest optimizer state it can have
  (`model_bytes`, counted on a build on the meta device and taken when the client opens the
  session, before anything is built; one sample of its batch must fit beside it), and its
  activations where the device measures its memory (taken after the session's first step).

Beyond a limit the client's session ends with RESOURCE_EXHAUSTED naming it; the server serves on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.state import nested_tensors
from trainspeed.wire.tensors import WireError
from trainspeed.workloads.base import Trainable, Workload, setup_optimizers
from trainspeed.workloads.meta import BuildFailed, build_on_meta

OPTIMIZER_STATE_FACTOR = 3
OPTIMIZER_TENSORS_PER_PARAMETER = 4
"""Adam with amsgrad: exp_avg, exp_avg_sq, max_exp_avg_sq and its step count."""
STATE_MARGIN_BYTES = 1 << 20
STATE_MARGIN_TENSORS = 64


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


@dataclass(frozen=True)
class StateLimit:
    """The largest state a session's model can have, in bytes and in tensors."""

    nbytes: int
    tensors: int

    @classmethod
    def of(cls, trainable: Trainable) -> "StateLimit":
        built = list(nested_tensors(trainable.state_dict()))
        return cls(nbytes=model_bytes(trainable) + STATE_MARGIN_BYTES,
                   tensors=len(built) + OPTIMIZER_TENSORS_PER_PARAMETER * len(_updated(trainable)) + STATE_MARGIN_TENSORS)


def _updated(trainable: Trainable) -> list[torch.Tensor]:
    return list({id(p): p for optimizer in trainable.optimizers.values()
                 for group in optimizer.param_groups for p in group["params"]}.values())


def planned_model_bytes(workload: Workload, size: str, seed: int) -> int | None:
    """`model_bytes` of the workload's model at `size`, counted on a build on the meta device (no
    memory), so a model that does not fit is refused before it is built; None where the workload
    cannot be built on meta (its bytes are then taken once it is built). CheckStopped past the
    check's time limit."""

    def build() -> Trainable:
        trainable = workload.build(size, seed)
        setup_optimizers(trainable, fused=False)
        return trainable

    try:
        return model_bytes(build_on_meta(build))
    except BuildFailed:
        return None


def model_bytes(trainable: Trainable) -> int:
    """The memory a session's model holds at most: its state when built (weights, buffers) and the
    largest optimizer state torch keeps for the parameters it updates. It counts against the
    server's budget from the moment the model is built, as the client's tensors do."""
    built = sum(map(_nbytes, nested_tensors(trainable.state_dict())))
    return built + OPTIMIZER_STATE_FACTOR * sum(map(_nbytes, _updated(trainable)))


class MemoryBudget:
    """Bytes the whole server holds for its clients (their tensors, models and activations);
    shared by every session's reader and handler."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.held_bytes = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int, what: str) -> None:
        with self._lock:
            self._refuse_beyond(nbytes, what)
            self.held_bytes += nbytes

    def check_fits(self, nbytes: int, what: str) -> None:
        """WireError (too large) unless `nbytes` more would fit now; takes nothing."""
        with self._lock:
            self._refuse_beyond(nbytes, what)

    def _refuse_beyond(self, nbytes: int, what: str) -> None:
        if self.held_bytes + nbytes > self.limit_bytes:
            raise WireError(f"{what} ({_mib(nbytes)}) does not fit the server's memory budget for client tensors "
                            f"and models ({_mib(self.limit_bytes)}, its --memory-budget-gib): its sessions hold "
                            f"{_mib(self.held_bytes)}", too_large=True)

    def give_back(self, nbytes: int) -> None:
        with self._lock:
            self.held_bytes -= nbytes


class SessionMemory:
    """One session's part of the budget, and the limit of the state it may send.

    The reader takes bytes as headers arrive; the handler gives them back when it drops a batch or
    has loaded a state; `close` gives back whatever is left when the session ends. The reader runs
    ahead of the handler: a batch the client has released may still be held until the handler
    reaches the release, so a tensor that does not fit waits for the session's own releases
    before it is refused (other sessions' bytes it does not wait for). The state limit is known
    once the handler has built the model, so a reader that meets a state tensor before then waits
    for it."""

    def __init__(self, budget: MemoryBudget) -> None:
        self.budget = budget
        self.held_bytes = 0
        self.state_bytes = 0
        self.state_tensors = 0
        self._releasing_bytes = 0
        self._state_limit: StateLimit | None = None
        self._limit_known = threading.Event()
        self._closed = False
        self._changed = threading.Condition()

    def take(self, nbytes: int, what: str) -> None:
        with self._changed:
            while True:
                if self._closed:
                    raise WireError("the session has ended")
                try:
                    self.budget.take(nbytes, what)
                    break
                except WireError:
                    if self._releasing_bytes <= 0:
                        raise
                    self._changed.wait()
            self.held_bytes += nbytes

    def releasing(self, nbytes: int) -> None:
        """The client released a batch of `nbytes` that the handler has yet to drop."""
        with self._changed:
            self._releasing_bytes += nbytes

    def give_back(self, nbytes: int, released: bool = False) -> None:
        """`released`: the bytes of a batch announced by `releasing`."""
        with self._changed:
            if released:
                self._releasing_bytes -= nbytes
            if not self._closed:
                self.budget.give_back(nbytes)
                self.held_bytes -= nbytes
            self._changed.notify_all()

    def set_state_limit(self, limit: StateLimit) -> None:
        self._state_limit = limit
        self._limit_known.set()

    def take_state(self, header: pb.TensorHeader) -> None:
        """Take a state tensor's bytes, within the state limit of the session's model."""
        self._limit_known.wait()
        limit = self._state_limit
        if limit is None:
            raise WireError("the session ended before its model was built")
        if self.state_tensors + 1 > limit.tensors:
            raise WireError(f"a state of more than {limit.tensors} tensors, the most the client's model can have",
                            too_large=True)
        if self.state_bytes + header.nbytes > limit.nbytes:
            raise WireError(f"state tensor {header.name!r} ({_mib(header.nbytes)}) would make the state "
                            f"{_mib(self.state_bytes + header.nbytes)}, more than the {_mib(limit.nbytes)} the "
                            f"client's model can have (its state when built, {OPTIMIZER_STATE_FACTOR} x its "
                            f"optimized parameters, {_mib(STATE_MARGIN_BYTES)})", too_large=True)
        self.take(header.nbytes, f"state tensor {header.name!r}")
        with self._changed:
            self.state_bytes += header.nbytes
            self.state_tensors += 1

    def give_back_state(self, nbytes: int, tensors: int) -> None:
        self.give_back(nbytes)
        with self._changed:
            self.state_bytes -= nbytes
            self.state_tensors -= tensors

    def close(self) -> None:
        with self._changed:
            if not self._closed:
                self.budget.give_back(self.held_bytes)
                self.held_bytes = 0
                self._closed = True
            self._changed.notify_all()
        self._limit_known.set()
