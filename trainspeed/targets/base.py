"""The target protocol: where and how a training step runs (device + execution mode + precision).

A target is spelled `device:mode:precision`, e.g. `cpu:eager:fp32`, `cuda:compile:bf16`,
`xla:lazy:bf16`. Each device family lives in its own file and owns what differs between devices:
how to wait for queued work (sync), memory statistics, what an out-of-memory error looks like,
and how many graph compilations have happened so far.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ContextManager

import torch

from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable

PRECISIONS = ("fp32", "tf32", "bf16")


@dataclass(frozen=True)
class TargetSpec:
    device: str
    mode: str
    precision: str

    def __str__(self) -> str:
        return f"{self.device}:{self.mode}:{self.precision}"

    @classmethod
    def parse(cls, text: str) -> "TargetSpec":
        parts = text.strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise UsageError(
                f"bad target {text!r}: write device:mode:precision, e.g. cpu:eager:fp32 or xla:lazy:bf16"
            )
        return cls(*parts)


class Target(ABC):
    """One device family with one execution mode and precision.

    Subclasses set `device_type`, `modes` and `precisions` and implement the device hooks.
    """

    device_type: str = ""
    modes: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()

    def __init__(self, spec: TargetSpec) -> None:
        if spec.mode not in self.modes:
            raise UsageError(
                f"target {spec}: mode {spec.mode!r} is not available on {spec.device}; "
                f"choose one of {', '.join(self.modes)}"
            )
        if spec.precision not in self.precisions:
            raise UsageError(
                f"target {spec}: precision {spec.precision!r} is not available on {spec.device}; "
                f"choose one of {', '.join(self.precisions)}"
            )
        self.spec = spec

    # --- availability -------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def unavailable_reason(cls) -> str | None:
        """None when usable on this machine, else why not (missing package, no device)."""

    # --- device -------------------------------------------------------------------------------
    @property
    @abstractmethod
    def device(self) -> torch.device: ...

    @abstractmethod
    def device_name(self) -> str:
        """Human-readable device name for result rows (e.g. 'NVIDIA H200', the CPU model)."""

    @abstractmethod
    def sync(self) -> None:
        """Block until every queued operation on the device has finished."""

    def after_step(self) -> None:
        """Called after every training step (XLA cuts the lazy graph here)."""

    # --- memory and errors --------------------------------------------------------------------
    def reset_peak_memory(self) -> None:
        """Start a new peak-memory window."""

    def peak_memory_bytes(self) -> int | None:
        """Peak device memory since the last reset, or None where the device does not say."""
        return None

    def free_memory(self) -> None:
        """Release cached memory after a configuration (especially after an OOM)."""
        import gc

        gc.collect()

    @abstractmethod
    def is_oom(self, error: BaseException) -> bool:
        """Whether this exception is this device running out of memory."""

    # --- compilation --------------------------------------------------------------------------
    def compile_count(self) -> int:
        """Graph compilations so far; a change inside a timed window marks it invalid."""
        return 0

    def reset_compilation(self) -> None:
        """Forget compiled graphs between configurations (each batch size compiles afresh)."""

    def wrap_network(self, network: torch.nn.Module) -> torch.nn.Module:
        """Wrap a network for this execution mode (eager: unchanged)."""
        return network

    # --- running --------------------------------------------------------------------------------
    def autocast(self) -> ContextManager:
        if self.spec.precision == "bf16":
            return torch.autocast(device_type=self.device_type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def compute_dtype(self) -> torch.dtype:
        """The dtype of the matmuls (for measuring the peak)."""
        return torch.bfloat16 if self.spec.precision == "bf16" else torch.float32

    def configure_precision(self) -> None:
        """Set global precision switches (TF32) before building; default leaves them alone."""

    def prepare(self, trainable: Trainable) -> Trainable:
        """Move to the device, create optimizers, wrap for the execution mode."""
        self.configure_precision()
        trainable.to(self.device)
        trainable.setup_optimizers()
        trainable.wrap(self.wrap_network)
        return trainable

    def move_batch(self, batch: Batch) -> Batch:
        return {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}

    def run_step(self, trainable: Trainable, batch: Batch) -> torch.Tensor:
        with self.autocast():
            loss = trainable.train_step(batch)
        self.after_step()
        return loss

    def __str__(self) -> str:
        return str(self.spec)
