"""NVIDIA GPUs: eager, torch.compile, compile with CUDA graphs, or compile with autotuned kernels;
fp32, tf32 or bf16 autocast; cuDNN's algorithm search as a switch."""

from __future__ import annotations

from typing import Any

import torch

from trainspeed.targets import dynamo
from trainspeed.targets.base import Target

COMPILE_MODES = {"compile": None, "cudagraphs": "reduce-overhead", "max-autotune": "max-autotune"}
"""Target mode -> torch.compile mode. "max-autotune" benchmarks Inductor's Triton matmul templates
(bias and activation fused into their epilogues) against cuBLAS for every matmul shape and runs
the result under CUDA graphs; its first step takes much longer than compile's."""
CUDNN_BENCHMARK = "cudnn-benchmark"


class CudaTarget(Target):
    device_type = "cuda"
    modes = ("eager", "compile", "cudagraphs", "max-autotune")
    precisions = ("fp32", "tf32", "bf16")
    options = (CUDNN_BENCHMARK,)
    process_group_backend = "nccl"
    pin_memory = True
    fused_optimizers = True
    peak_probe_max_size = 8192

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if not torch.cuda.is_available():
            return "no CUDA device (torch.cuda.is_available() is False)"
        return None

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device())

    def device_name(self) -> str:
        return torch.cuda.get_device_name(self.device)

    def configure_precision(self) -> None:
        """fp32 means true fp32 matmuls; tf32 opts in explicitly, so the two are comparable.

        `cudnn-benchmark` lets cuDNN time its algorithms for each new convolution shape and keep
        the fastest (set either way, so a target never inherits the previous one's choice)."""
        allow_tf32 = self.spec.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        torch.backends.cudnn.allow_tf32 = allow_tf32
        torch.backends.cudnn.benchmark = CUDNN_BENCHMARK in self.spec.options

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def reset_peak_memory(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def peak_memory_bytes(self) -> int | None:
        return int(torch.cuda.max_memory_allocated(self.device))

    def memory_in_use_bytes(self) -> int | None:
        return int(torch.cuda.memory_allocated(self.device))

    def row_fields(self) -> dict[str, Any]:
        """The allocator's reserved peak beside the allocated one: what the device really had to hold."""
        return {"peak_memory_source": "cuda max_memory_allocated",
                "peak_memory_reserved_bytes": int(torch.cuda.max_memory_reserved(self.device))}

    def free_memory(self) -> None:
        super().free_memory()
        torch.cuda.empty_cache()

    def is_oom(self, error: BaseException) -> bool:
        return isinstance(error, torch.cuda.OutOfMemoryError) or "CUDA out of memory" in str(error)

    def compile_count(self) -> int:
        return dynamo.dynamo_compile_count() if self.spec.mode in COMPILE_MODES else 0

    def reset_compilation(self) -> None:
        if self.spec.mode in COMPILE_MODES:
            dynamo.reset_dynamo()

    def wrap_network(self, network: torch.nn.Module) -> torch.nn.Module:
        if self.spec.mode in COMPILE_MODES:
            return dynamo.compile_network(network, mode=COMPILE_MODES[self.spec.mode])
        return network

    def bind_local_rank(self, local_rank: int) -> None:
        torch.cuda.set_device(local_rank)

    def process_group_device(self) -> torch.device:
        return self.device

    def ddp_device_ids(self) -> list[int]:
        return [self.device.index]

    def device_rng_state(self) -> torch.Tensor:
        return torch.cuda.get_rng_state(self.device)

    def set_device_rng_state(self, state: torch.Tensor) -> None:
        torch.cuda.set_rng_state(state, self.device)
