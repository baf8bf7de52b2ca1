"""XLA devices through torch_xla (TPU cores, GPUs, or the PJRT CPU client): lazy tensors.

Operations are recorded into a graph and run only when the graph is cut (`torch_xla.sync()`,
the study's mark_step after the optimizer step). Timing must then also wait for the device
(`wait_device_ops`), or it measures tracing and dispatch only.

Data parallelism uses torch_xla's SPMD mode: one process traces the step once for the whole host;
parameters stay replicated, every batch tensor is split along its first dimension over a 1-D
"data" mesh, and the compiler inserts the gradient all-reduce. It is the recommended way to drive
all the cores of a TPU host (the study used one process per core with the older multi-process
API). On CPU (no TPU) the PJRT CPU client provides `CPU_NUM_DEVICES` virtual devices, so the same
code path runs and is tested without an accelerator.

A step is well ported when its graph runs whole on the device: torch_xla runs an op it cannot
lower on the host (an "aten fallback", counted as `aten::NAME`), which copies the tensors there and
back and cuts the graph; a shape that changes from step to step recompiles; `.item()` and the like
wait for the device and copy to the host. The bench's timed windows count all three
(`PortStats`, the rows' `xla_*` fields) from torch_xla's own counters, read before and after; the
counters are never cleared, since `compile_count` and other readers use their totals.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch

from trainspeed.errors import UsageError
from trainspeed.targets import host_memory
from trainspeed.targets.base import BatchPlacer, Target, is_host_oom
from trainspeed.targets.host_memory import HostMemoryPeak
from trainspeed.workloads.base import Batch, Trainable, Workload

XLA_OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory")
FALLBACK_PREFIX = "aten::"
"""torch_xla counts an op it runs on the host as `aten::NAME` (a lowered one as `xla::NAME`)."""


def _xla_modules():
    """torch_xla is optional and heavy: import it only when an XLA target is used."""
    os.environ.setdefault("PJRT_DEVICE", _default_pjrt_device())
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    return torch_xla, xm, met


def _default_pjrt_device() -> str:
    """TPU where libtpu is installed, else the CPU client, so `xla:*` always means something."""
    return "TPU" if importlib.util.find_spec("libtpu") is not None else "CPU"


@dataclass(frozen=True)
class XlaCounters:
    """torch_xla's process-wide totals so far: fallbacks per op, compilations, device-to-host
    transfers. Two readings bracket some steps; their difference is what those steps did."""

    fallback_ops: dict[str, int]
    compiles: int
    device_to_host: int


def read_counters() -> XlaCounters:
    """The totals now (torch_xla keeps them per process; nothing is reset)."""
    _, _, met = _xla_modules()
    fallbacks = {}
    for name in met.counter_names():
        if name.startswith(FALLBACK_PREFIX):
            fallbacks[name] = int(met.counter_value(name) or 0)
    return XlaCounters(fallbacks, _metric_count(met, "CompileTime"), _metric_count(met, "TransferFromDeviceTime"))


def _metric_count(met: Any, name: str) -> int:
    """How many samples a torch_xla metric holds (one per compilation, one per transfer)."""
    data = met.metric_data(name)
    return int(data[0]) if data else 0


@dataclass(frozen=True)
class PortStats:
    """What a number of steps did that a well-ported step does not: ops run on the host (per step),
    compilations (in all), device-to-host transfers (per step)."""

    steps: int
    fallback_ops: dict[str, float]
    """aten op name -> how often it fell back per step; only ops that did."""
    compiles: int
    device_to_host_per_step: float

    @classmethod
    def between(cls, before: XlaCounters, after: XlaCounters, steps: int) -> "PortStats":
        per = max(steps, 1)
        fallbacks = {name: (count - before.fallback_ops.get(name, 0)) / per
                     for name, count in sorted(after.fallback_ops.items())}
        return cls(steps=steps, fallback_ops={name: n for name, n in fallbacks.items() if n > 0},
                   compiles=after.compiles - before.compiles,
                   device_to_host_per_step=(after.device_to_host - before.device_to_host) / per)

    def row_fields(self) -> dict[str, Any]:
        return {"xla_fallback_ops": dict(self.fallback_ops), "xla_compiles_in_window": self.compiles,
                "xla_device_to_host_per_step": self.device_to_host_per_step}


class XlaTarget(Target):
    device_type = "xla"
    modes = ("lazy",)
    precisions = ("fp32", "bf16")
    data_parallel = "spmd"
    supports_multi_node = False
    peak_probe_max_size = 1024

    def __init__(self, spec) -> None:
        super().__init__(spec)
        self._window_start: XlaCounters | None = None
        self._host_memory = HostMemoryPeak()
        self.port_stats: PortStats | None = None
        """What the last kept timed windows did (None until a configuration's windows ended)."""
        if self.unavailable_reason() is None:
            # Register the XLA device before any backward pass in this process: autograd sizes
            # its per-device queues at the first backward and cannot grow them afterwards.
            _ = self.device

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if importlib.util.find_spec("torch_xla") is None:
            return (
                f"torch_xla is not installed: pip install torch_xla=={torch.__version__.split('+')[0]} "
                "(its version must match torch's)"
            )
        return None

    @property
    def device(self) -> torch.device:
        torch_xla, _, _ = _xla_modules()
        return torch_xla.device()

    def device_name(self) -> str:
        _, xm, _ = _xla_modules()
        return f"XLA {xm.xla_device_hw(self.device)} (PJRT_DEVICE={os.environ.get('PJRT_DEVICE')})"

    def after_step(self) -> None:
        """Cut the lazy graph after the optimizer step, so one step is one compiled graph."""
        torch_xla, _, _ = _xla_modules()
        torch_xla.sync()

    def sync(self) -> None:
        _, xm, _ = _xla_modules()
        xm.wait_device_ops()

    def _device_is_host(self) -> bool:
        """The PJRT CPU client keeps the device's buffers in this process's memory."""
        return os.environ.get("PJRT_DEVICE", _default_pjrt_device()) == "CPU"

    def reset_peak_memory(self) -> None:
        if self._device_is_host():
            self._host_memory.reset()

    def peak_memory_bytes(self) -> int | None:
        """The device's peak where PJRT reports one (TPU); on the CPU client, which reports none,
        the growth of this process's resident memory, which holds the device's buffers."""
        if self._device_is_host():
            return self._host_memory.peak_growth_bytes()
        _, xm, _ = _xla_modules()
        try:
            info = xm.get_memory_info(self.device)
        except (RuntimeError, NotImplementedError):
            return None
        peak = info.get("peak_bytes_used") if isinstance(info, dict) else None
        return int(peak) if peak else None

    def is_oom(self, error: BaseException) -> bool:
        return is_host_oom(error) or any(m in str(error) for m in XLA_OOM_MARKERS)

    def compile_count(self) -> int:
        _, _, met = _xla_modules()
        return _metric_count(met, "CompileTime")

    def build(self, workload: Workload, size: str, seed: int) -> Trainable:
        """A fresh configuration: the last one's window counts no longer describe it."""
        self._window_start, self.port_stats = None, None
        return super().build(workload, size, seed)

    def start_timed_windows(self) -> None:
        self._window_start, self.port_stats = read_counters(), None

    def end_timed_windows(self, steps: int) -> None:
        if self._window_start is not None:
            self.port_stats = PortStats.between(self._window_start, read_counters(), steps)

    def row_fields(self) -> dict[str, Any]:
        memory = {"peak_memory_source": host_memory.SOURCE if self._device_is_host() else "xla get_memory_info"}
        return {**memory, **(self.port_stats.row_fields() if self.port_stats is not None else {})}

    def activation_checkpoint(self, function: Callable[..., torch.Tensor], *args: torch.Tensor) -> torch.Tensor:
        """torch_xla's checkpoint: the compiler would otherwise merge the recomputation back into
        the forward pass; its optimisation barriers keep them apart (reentrant is its only mode)."""
        import torch_xla.utils.checkpoint as xla_checkpoint

        return xla_checkpoint.checkpoint(function, *args, use_reentrant=True)

    def device_rng_state(self) -> int:
        _, xm, _ = _xla_modules()
        return int(xm.get_rng_state(self.device))

    def set_device_rng_state(self, state: int) -> None:
        _, xm, _ = _xla_modules()
        xm.set_rng_state(int(state), self.device)

    @classmethod
    def start_spmd(cls, requested_devices: int) -> int:
        if os.environ.get("PJRT_DEVICE", _default_pjrt_device()) == "CPU":
            os.environ["CPU_NUM_DEVICES"] = str(requested_devices)
        _xla_modules()
        import torch_xla.runtime as xr

        xr.use_spmd()
        devices = xr.global_runtime_device_count()
        if devices != requested_devices:
            raise UsageError(
                f"train: --nproc {requested_devices}, but this host has {devices} XLA devices; use --nproc {devices}"
            )
        return devices

    def spmd_placer(self, devices: int) -> BatchPlacer:
        _, xm, _ = _xla_modules()
        import torch_xla.distributed.spmd as xs

        mesh = xs.Mesh(list(range(devices)), (devices,), ("data",))
        device = self.device

        def place(batch: Batch) -> Batch:
            placed = {}
            for key, tensor in batch.items():
                spec = xs.ShardingSpec(mesh, ("data",) + (None,) * (tensor.dim() - 1))
                (placed[key],) = xm.send_cpu_data_to_device([tensor], device, input_sharding=spec)
            return placed

        return place
