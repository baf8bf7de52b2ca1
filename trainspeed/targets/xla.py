"""XLA devices through torch_xla (TPU cores, GPUs, or the PJRT CPU client): lazy tensors.

Operations are recorded into a graph and run only when the graph is cut (`torch_xla.sync()`,
the study's mark_step after the optimizer step). Timing must then also wait for the device
(`wait_device_ops`), or it measures tracing and dispatch only.
"""

from __future__ import annotations

import importlib.util
import os

import torch

from trainspeed.targets.base import Target
from trainspeed.targets.cpu import is_host_oom

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
