"""A model checked or counted without its memory: built on the meta device, run there within a time
budget, and on the host only when it is small.

A size check (does the model build and run at this size?) and a FLOP count (torch's formulas over
a training step) need shapes, not values, so both run on the meta device, where a tensor has a
shape and no storage. Three things keep that from being free, and this module bounds each:

- time: meta kernels are Python, so a step of a 2,000-layer model takes most of a minute. Every op
  dispatched checks a deadline (`CheckLimits.time_s` of CPU time) and whether whoever asked is
  still waiting (`CheckLimits.cancelled`: a server's client that left), and stops the run
  (`CheckStopped`);
- builders that read values: a builder that computes its widths with torch ops and reads them
  (torchvision's RegNet) cannot run under the meta device. It is built again with its tensors on
  the host and every parameter and buffer moved to meta as it is registered (`build_on_meta`);
- ops meta cannot run (a `.item()`, a kernel with no meta implementation): those run again on the
  host, but only a model of at most `HOST_MAX_PARAMETERS` parameters, and only within
  `CheckLimits.host_max_bytes` and `HOST_MAX_OP_FLOPS` an op: every op's outputs are sized and its
  FLOPs counted on meta before the host runs it (`HostRun`). A run beyond either is not made on
  the host (`Ran.host_skipped` says why).

Meta also checks less than a device does in two places, which `MetaRun` fills in: its
`_grouped_mm` refuses float32 (a restriction of the CUDA kernel; the host runs it), and it looks up
no values, so an index into an empty table (an embedding of 0 rows) passes on meta and fails at
the first step everywhere else.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, TypeVar

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map_only

from trainspeed.workloads.dispatch_modes import SerialDispatchMode
from trainspeed.workloads.flop_formulas import flop_formula
from trainspeed.workloads.math_attention import MathAttention

CHECK_TIME_S = 30.0
"""The CPU time a check may take in its thread (a forward pass of a 256-layer model on meta takes
about 8 s). CPU time, not wall time: a loaded machine makes a check wait, not a larger one."""
HOST_MAX_PARAMETERS = 100_000_000
"""The largest model run on the host where meta cannot run it (400 MB of float32)."""
HOST_MAX_BYTES = 2 << 30
"""What the tensors of a run on the host may hold at once, its model's included."""
HOST_MAX_OP_FLOPS = 1e11
"""The most one op of a run on the host may compute (seconds of a CPU core): the deadline is looked
at between ops, so one op's time must be bounded by itself. Attention runs as its matmuls on the
host (the math backend), which torch's formulas count."""
CANCEL_POLL_OPS = 64
"""Ops between two looks at `CheckLimits.cancelled` (it may cost a call into gRPC)."""
SWEEP_OPS = 64
"""Ops of a host run between two looks at which of its storages are still held."""

M = TypeVar("M")
R = TypeVar("R")


@dataclass(frozen=True)
class CheckLimits:
    """What a check or count may take: time, host memory, and how long anyone waits for it."""

    time_s: float = CHECK_TIME_S
    host_max_bytes: int = HOST_MAX_BYTES
    """0: never run on the host (a server, whose memory belongs to its budget)."""
    cancelled: Callable[[], bool] | None = None
    """True once nobody waits for the answer any more."""


_LIMITS: contextvars.ContextVar[CheckLimits] = contextvars.ContextVar("trainspeed_check_limits", default=CheckLimits())


def current_limits() -> CheckLimits:
    return _LIMITS.get()


@contextlib.contextmanager
def check_limits(limits: CheckLimits) -> Iterator[None]:
    """Checks and counts in this thread run within `limits` (default: `CheckLimits()`)."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


class CheckStopped(Exception):
    """The run went past its time limit (`timed_out`), or the one it ran for stopped waiting."""

    def __init__(self, reason: str, timed_out: bool) -> None:
        super().__init__(reason)
        self.timed_out = timed_out


class TooLargeForHost(Exception):
    """A run on the host would hold more bytes, or one op compute more FLOPs, than its limits;
    nothing of that size was allocated or computed."""


class IndexOutOfRange(IndexError):
    """An index into a table of 0 rows: it fails on every device, and meta, which looks up no
    values, is told so here."""


class BuildFailed(Exception):
    """The model cannot be built (its builder raised); `__cause__` is the builder's error."""


@dataclass
class Deadline:
    limits: CheckLimits
    started: float
    ops: int = 0
    stopped: CheckStopped | None = None
    """Why the run stopped; once set, every later op raises it again (a library that catches the
    first exception does not get to run on)."""

    @classmethod
    def start(cls) -> "Deadline":
        return cls(_LIMITS.get(), time.thread_time())

    def check(self) -> None:
        if self.stopped is None:
            self.ops += 1
            if time.thread_time() - self.started > self.limits.time_s:
                self.stopped = CheckStopped(f"it ran past its limit of {self.limits.time_s:g} s of CPU time",
                                            timed_out=True)
            elif (self.limits.cancelled is not None and self.ops % CANCEL_POLL_OPS == 0
                  and self.limits.cancelled()):
                self.stopped = CheckStopped("nobody waits for it any more", timed_out=False)
        self.raise_if_stopped()

    def raise_if_stopped(self) -> None:
        if self.stopped is not None:
            raise CheckStopped(str(self.stopped), self.stopped.timed_out)


def _is_float(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


class MetaRun(SerialDispatchMode):
    """Every op of a meta run: within the deadline, with the two checks meta lacks."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.deadline.check()
        kwargs = kwargs or {}
        packet = getattr(func, "_overloadpacket", None)
        if packet is torch.ops.aten._grouped_mm and any(_is_float(a) and a.dtype != torch.bfloat16 for a in args[:2]):
            dtype = args[0].dtype
            cast = [a.to(torch.bfloat16) if _is_float(a) else a for a in args]
            return func(*cast, **kwargs).to(dtype)
        if packet in (torch.ops.aten.embedding, torch.ops.aten.index_select):
            table, index = (args[0], args[1]) if packet is torch.ops.aten.embedding else (args[0], args[2])
            dim = 0 if packet is torch.ops.aten.embedding else args[1]
            if table.dim() and table.shape[dim] == 0 and index.numel():
                raise IndexOutOfRange(f"{packet.__name__} looks up a table of 0 rows")
        return func(*args, **kwargs)


def _aliases(func: Any) -> bool:
    """An op that returns (a view of) an input: it allocates nothing."""
    return any(ret.alias_info is not None for ret in func._schema.returns)


def _on_meta(value: Any) -> Any:
    return value.to("meta") if value.device.type != "meta" else value


class HostRun(SerialDispatchMode):
    """Every op of a host run, within the deadline, `limit_bytes` of live tensor storage and
    HOST_MAX_OP_FLOPS an op: each op's outputs are sized and its FLOPs counted on meta before the
    host runs it (an op meta cannot size runs and is counted after), and storages are counted while
    anything but this mode holds them (looked at every SWEEP_OPS ops, and whenever near the limit,
    so a storage the run has dropped is not held for long)."""

    def __init__(self, deadline: Deadline, limit_bytes: int) -> None:
        super().__init__()
        self.deadline = deadline
        self.limit_bytes = limit_bytes
        self.held_bytes = 0
        self._storages: dict[int, torch.UntypedStorage] = {}
        self._ops = 0

    def _sweep(self) -> None:
        for key, storage in list(self._storages.items()):
            if torch._C._storage_Use_Count(storage._cdata) <= 1:  # only this mode holds it
                self.held_bytes -= storage.nbytes()
                del self._storages[key]

    def _planned(self, func: Any, args: tuple, kwargs: dict) -> tuple[int, float] | None:
        """The bytes of the op's outputs and its FLOPs (`flop_formulas.flop_formula`, where there is
        one), from a run on meta; None where meta cannot run it."""
        meta_kwargs = {**kwargs, "device": torch.device("meta")} if "device" in kwargs else dict(kwargs)
        meta_kwargs.pop("pin_memory", None)
        meta_args, meta_kwargs = tree_map_only(torch.Tensor, _on_meta, (args, meta_kwargs))
        try:
            out = func(*meta_args, **meta_kwargs)
        except Exception:  # noqa: BLE001 - meta cannot size this op: it runs and is counted after
            return None
        nbytes = sum(t.numel() * t.element_size() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
        formula = flop_formula(func)
        return nbytes, float(formula(*meta_args, **meta_kwargs, out_val=out)) if formula is not None else 0.0

    def _refuse_beyond(self, nbytes: int) -> None:
        if self.held_bytes + nbytes > self.limit_bytes:
            self._sweep()  # the count may include storages freed since the last look
        if self.held_bytes + nbytes > self.limit_bytes:
            raise TooLargeForHost(f"it would hold more than {self.limit_bytes / 2**20:,.0f} MiB on the host")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.deadline.check()
        kwargs = kwargs or {}
        self._ops += 1
        if self._ops % SWEEP_OPS == 0:
            self._sweep()
        if not _aliases(func):
            planned = self._planned(func, args, kwargs)
            if planned is not None:
                nbytes, flops = planned
                if flops > HOST_MAX_OP_FLOPS:  # one op runs to its end: no deadline stops it
                    raise TooLargeForHost(f"one of its ops would compute {flops:.2g} FLOPs on the host, more than "
                                          f"{HOST_MAX_OP_FLOPS:.0g}")
                self._refuse_beyond(nbytes)
        out = func(*args, **kwargs)
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self._storages:
                    self._storages[key] = storage
                    self.held_bytes += storage.nbytes()
        self._refuse_beyond(0)
        return out


@contextlib.contextmanager
def _parameters_moved_to_meta() -> Iterator[None]:
    """Parameters and buffers registered in this thread are moved to meta as they are registered."""
    from torch.nn.modules import module as module_module

    owner = threading.get_ident()

    def parameter(module: nn.Module, name: str, value: Any) -> Any:
        if threading.get_ident() == owner and isinstance(value, nn.Parameter) and value.device.type != "meta":
            return nn.Parameter(value.to("meta"), requires_grad=value.requires_grad)
        return None

    def buffer(module: nn.Module, name: str, value: Any) -> Any:
        if threading.get_ident() == owner and isinstance(value, torch.Tensor) and value.device.type != "meta":
            return value.to("meta")
        return None

    handles = [module_module.register_module_parameter_registration_hook(parameter),
               module_module.register_module_buffer_registration_hook(buffer)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _reads_values(error: BaseException) -> bool:
    text = str(error)
    return "meta tensor" in text or "meta tensors" in text


def build_on_meta(build: Callable[[], M], deadline: Deadline | None = None) -> M:
    """`build()` with its parameters and buffers on meta (nothing allocated, no initialisation
    computed), within the deadline. BuildFailed when the builder raises; CheckStopped past the
    deadline."""
    deadline = deadline or Deadline.start()
    try:
        with torch.device("meta"), MetaRun(deadline):
            return build()
    except CheckStopped:
        raise
    except Exception as error:  # noqa: BLE001 - the builder's own failure, unless it read a value
        deadline.raise_if_stopped()
        if not _reads_values(error):
            raise BuildFailed(str(error)) from error
    try:
        with _parameters_moved_to_meta(), MetaRun(deadline):
            built = build()
    except CheckStopped:
        raise
    except Exception as error:  # noqa: BLE001 - the builder's own failure
        deadline.raise_if_stopped()
        raise BuildFailed(str(error)) from error
    for network in _modules(built):
        network.to("meta")
    return built


def _modules(built: Any) -> list[nn.Module]:
    if isinstance(built, nn.Module):
        return [built]
    return list(getattr(built, "networks", {}).values())


def device_of(built: Any) -> torch.device:
    """Where a module's (or a Trainable's) parameters are: where `run` makes its inputs."""
    return next((p.device for network in _modules(built) for p in network.parameters()), torch.device("cpu"))


def parameter_count(built: Any) -> int:
    """Parameters of a module, or of a Trainable's networks."""
    return sum(p.numel() for network in _modules(built) for p in network.parameters())


@dataclass(frozen=True)
class Ran(Generic[R]):
    result: R | None
    device: str | None
    """"meta", "cpu", or None when it ran nowhere."""
    parameters: int
    meta_error: BaseException | None = None
    """Why it could not run on meta, when it did not."""
    host_skipped: str | None = None
    """Why it was not run on the host, when meta could not run it either."""


def run_without_memory(build: Callable[[], M], run: Callable[[M], R]) -> Ran[R]:
    """`run(build())` on meta; where meta cannot run it, on the host if the model is small enough
    and the run stays within its bytes, FLOPs and time; else not at all (`Ran.host_skipped`).
    BuildFailed when the builder raises; CheckStopped when building or running on meta goes past
    the time limit (the size asks too much to be checked); the host's error when the host run
    raises (the model cannot run, wherever it runs). The host run has a time limit of its own,
    and one past it is not made rather than refused: a slow host says nothing about the size.

    `run` makes its inputs where the model is (`device_of`); the meta device is not the default
    while it runs, since code that makes a host tensor to read it (an optimizer's step count) would
    make a meta one."""
    deadline = Deadline.start()
    built = build_on_meta(build, deadline)
    parameters = parameter_count(built)
    try:
        with MetaRun(deadline):
            result = run(built)
        deadline.raise_if_stopped()
        return Ran(result, "meta", parameters)
    except (CheckStopped, IndexOutOfRange):
        raise
    except Exception as error:  # noqa: BLE001 - meta's refusal is not the model's; the host decides
        deadline.raise_if_stopped()
        meta_error = error
    del built
    limit_bytes = deadline.limits.host_max_bytes
    if parameters > HOST_MAX_PARAMETERS:
        return Ran(None, None, parameters, meta_error, f"at {parameters / 1e6:,.0f}M parameters it is larger than the "
                   f"{HOST_MAX_PARAMETERS / 1e6:,.0f}M a run on the host builds")
    if limit_bytes <= 0:
        return Ran(None, None, parameters, meta_error, "nothing runs on this process's host")
    host_deadline = Deadline.start()
    try:
        with HostRun(host_deadline, limit_bytes), MathAttention():
            result = run(build())
        host_deadline.raise_if_stopped()
    except (TooLargeForHost, CheckStopped) as error:
        return Ran(None, None, parameters, meta_error, str(error))
    except Exception:
        host_deadline.raise_if_stopped()
        raise
    return Ran(result, "cpu", parameters, meta_error)
