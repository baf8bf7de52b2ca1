"""The host CPU: eager or torch.compile, fp32 or bf16 autocast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainspeed.machine import cpu_model_name
from trainspeed.targets import dynamo
from trainspeed.targets.base import Target, is_host_oom


PROC_SELF = Path("/proc/self")


def _status_bytes(field: str) -> int | None:
    """A `kB` line of /proc/self/status (VmRSS, VmHWM) in bytes; None off Linux."""
    try:
        for line in (PROC_SELF / "status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class CpuTarget(Target):
    device_type = "cpu"
    modes = ("eager", "compile")
    precisions = ("fp32", "bf16")
    peak_probe_max_size = 1024
    _rss_at_reset: int | None = None

    def reset_peak_memory(self) -> None:
        """The process's resident-set high-water mark starts again from what it holds now (Linux:
        writing 5 to /proc/self/clear_refs), so the peak read later is this configuration's growth."""
        try:
            (PROC_SELF / "clear_refs").write_text("5")
        except OSError:
            self._rss_at_reset = None
            return
        self._rss_at_reset = _status_bytes("VmRSS")

    def peak_memory_bytes(self) -> int | None:
        """How far the process's resident memory rose above what it held at the reset: the model,
        its optimizer state, the batches and the step's activations, as the host holds them."""
        peak = _status_bytes("VmHWM")
        if peak is None or self._rss_at_reset is None:
            return None
        return max(0, peak - self._rss_at_reset)

    def row_fields(self) -> dict[str, Any]:
        return {"peak_memory_source": "host RSS growth"}

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def device_name(self) -> str:
        return f"{cpu_model_name()} ({torch.get_num_threads()} threads)"

    def sync(self) -> None:
        """CPU kernels run synchronously in the calling thread: nothing is queued."""

    def is_oom(self, error: BaseException) -> bool:
        return is_host_oom(error)

    def compile_count(self) -> int:
        return dynamo.dynamo_compile_count() if self.spec.mode == "compile" else 0

    def reset_compilation(self) -> None:
        if self.spec.mode == "compile":
            dynamo.reset_dynamo()

    def wrap_network(self, network: torch.nn.Module) -> torch.nn.Module:
        """Compiled C++ kernels get the thread count torch runs with now, written into the graph.

        Inductor bakes a thread count into each kernel it generates (`#pragma omp parallel
        num_threads(N)` from `torch.get_num_threads()` at code generation), but its on-disk cache
        key does not include that count: a process running 1 thread loaded kernels another
        process had generated with 2, and on a machine whose other core was busy every parallel
        region waited for a thread that had no core (10x slower steps). Passing the count as
        inductor's `cpp.threads` puts it into the generated code and the cache key alike.
        """
        if self.spec.mode != "compile":
            return network
        return dynamo.compile_network(network, options={"cpp.threads": torch.get_num_threads()})
