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
"""

from __future__ import annotations

import importlib.util
import os
from typing import Callable

import torch

from trainspeed.errors import UsageError
from trainspeed.targets.base import BatchPlacer, Target, is_host_oom
from trainspeed.workloads.base import Batch

XLA_OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory")


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


class XlaTarget(Target):
    device_type = "xla"
    modes = ("lazy",)
    precisions = ("fp32", "bf16")
    data_parallel = "spmd"
    supports_multi_node = False
    peak_probe_max_size = 1024

    def __init__(self, spec) -> None:
        super().__init__(spec)
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

    def peak_memory_bytes(self) -> int | None:
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
        data = met.metric_data("CompileTime")
        return int(data[0]) if data else 0

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
