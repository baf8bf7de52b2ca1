"""The host CPU: eager or torch.compile, fp32 or bf16 autocast."""

from __future__ import annotations

from typing import Any

import torch

from trainspeed.machine import cpu_model_name
from trainspeed.targets import dynamo
from trainspeed.targets import host_memory
from trainspeed.targets.base import Target, is_host_oom
from trainspeed.targets.host_memory import HostMemoryPeak


class CpuTarget(Target):
    device_type = "cpu"
    modes = ("eager", "compile")
    precisions = ("fp32", "bf16")
    peak_probe_max_size = 1024
    _host_memory: HostMemoryPeak | None = None

    def reset_peak_memory(self) -> None:
        """The peak read later is this configuration's growth of the process's resident memory."""
        self._host_memory = HostMemoryPeak()
        self._host_memory.reset()

    def peak_memory_bytes(self) -> int | None:
        return self._host_memory.peak_growth_bytes() if self._host_memory is not None else None

    def row_fields(self) -> dict[str, Any]:
        return {"peak_memory_source": host_memory.SOURCE}

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
