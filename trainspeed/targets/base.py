"""The target protocol: where and how a training step runs (device + execution mode + precision).

A target is spelled `device:mode:precision`, e.g. `cpu:eager:fp32`, `cuda:compile:bf16`,
`xla:lazy:bf16`, optionally followed by switches of its family (`cuda:eager:bf16:cudnn-benchmark`).
Each device family lives in its own file and owns everything that differs between devices, so the
bench and the trainer never branch on a device type:

- running: sync (wait for queued work), the per-step hook (XLA cuts its lazy graph), autocast,
  execution-mode wrapping (torch.compile), activation checkpointing;
- memory and errors: peak-memory statistics, the out-of-memory signature, pinned host memory;
- compilation: how many graphs were compiled so far;
- data parallelism: one process per device (torchrun) with a process-group backend and a device
  per local rank, or one process driving every local device (SPMD);
- state: the device's RNG state, saved in checkpoints so a resumed run is bit-identical;
- the peak probe's largest matrix.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

import torch

from trainspeed.nominal_peaks import NominalPeak, nominal_peak
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable, Workload, setup_optimizers

BatchPlacer = Callable[[Batch], Batch]
"""Copies a host batch to the device(s) a step runs on."""

HOST_OOM_MARKERS = ("can't allocate memory", "not enough memory", "std::bad_alloc")


def is_host_oom(error: BaseException) -> bool:
    """A failed host allocation: Python's MemoryError or PyTorch's CPU allocator refusing (every
    device family stages data in host memory, so each recognises this besides its own)."""
    if isinstance(error, MemoryError):
        return True
    return isinstance(error, RuntimeError) and any(marker in str(error) for marker in HOST_OOM_MARKERS)


@dataclass(frozen=True)
class TargetSpec:
    device: str
    mode: str
    precision: str
    options: tuple[str, ...] = ()
    """Switches of the family written after the precision, joined by `+`
    (`cuda:eager:bf16:cudnn-benchmark`); part of the name, so every result row records them."""

    def __str__(self) -> str:
        name = f"{self.device}:{self.mode}:{self.precision}"
        return f"{name}:{'+'.join(self.options)}" if self.options else name

    @classmethod
    def parse(cls, text: str) -> "TargetSpec":
        parts = text.strip().split(":")
        options = tuple(parts[3].split("+")) if len(parts) == 4 else ()
        if len(parts) not in (3, 4) or not all(parts) or not all(options):
            raise UsageError(
                f"bad target {text!r}: write device:mode:precision[:option+option], e.g. cpu:eager:fp32, "
                f"xla:lazy:bf16 or cuda:eager:bf16:cudnn-benchmark"
            )
        if len(set(options)) != len(options):
            raise UsageError(f"bad target {text!r}: an option is named twice")
        return cls(*parts[:3], options=options)


class Target(ABC):
    """One device family with one execution mode and precision.

    Subclasses set `device_type`, `modes` and `precisions`, implement the abstract hooks, and
    override the class attributes and methods below where their device differs.
    """

    device_type: str = ""
    modes: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    """Switches a target name may add after its precision (none by default)."""

    data_parallel: str = "processes"
    """"processes": one process per device under torchrun; "spmd": one process drives every local
    device and the compiler splits the batch (`start_spmd`, `spmd_placer`); "single": one rank only
    (a device driven through one connection, such as a remote server)."""
    process_group_backend: str = "gloo"
    """torch.distributed backend of the gradient all-reduce between processes."""
    supports_multi_node: bool = True
    pin_memory: bool = False
    """Whether loaders should return page-locked host batches (fast asynchronous copies)."""
    fused_optimizers: bool = False
    """Whether optimizers should use their fused single-kernel implementation on this device."""
    gradients_here: bool = True
    """Whether the gradients live in this process (the trainer measures their noise scale); False
    where the model is trained elsewhere (a remote server) or they exist only inside a compiled
    program (the jax family)."""
    gradients_where: str = "on the server"
    """Where the gradients are when `gradients_here` is False, for messages that say why a gradient
    measurement does not apply."""
    slices_in_step: bool = False
    """Where `gradients_here` is False: whether the family's own program runs a step over
    micro-batches and returns the two squared norms the noise-scale meter reads
    (`trainspeed.gradients.accumulation.StepsInSlices`), so the meter over micro-batches, auto and
    a memory cap's micro-batches run on it as where the gradients are here."""
    peak_probe_max_size: int = 2048
    """Largest square matrix of the peak matmul probe: large enough to saturate the device."""

    @classmethod
    def runs_micro_batches(cls) -> bool:
        """Whether a step of this family can run over micro-batches (and be measured over them)."""
        return cls.gradients_here or cls.slices_in_step

    def __init__(self, spec: TargetSpec) -> None:
        self.check_spec(spec)
        self.spec = spec

    @classmethod
    def parse_spec(cls, text: str) -> TargetSpec:
        """The spec of a target name of this family. The registry picks the family by the name's
        first `:`-part and lets it parse the rest, so a family may spell its names its own way
        (the remote family: `remote:HOST:PORT/device:mode:precision`)."""
        return TargetSpec.parse(text)

    @classmethod
    def check_reachable(cls, spec: TargetSpec) -> None:
        """Raise UsageError when the device this spec names cannot be reached from here (default:
        a local device, nothing to check). Called before anything runs, so a family whose device
        lives elsewhere says so in one line instead of failing in the middle of a run."""

    @classmethod
    def check_workload(cls, spec: TargetSpec, workload: Workload) -> None:
        """Raise UsageError when this target cannot build the workload (default: every workload
        builds here). Called before anything runs, so a family whose device lives elsewhere can ask
        there (a server builds only the workloads its operator named) and say so in one line."""

    @classmethod
    def check_devices(cls, spec: TargetSpec, devices: int) -> None:
        """Raise UsageError when the spec cannot run over `devices` devices (default: any count):
        called before anything runs by every command that builds a step, with its device count."""

    @classmethod
    def check_spec(cls, spec: TargetSpec) -> None:
        """Raise UsageError when the family has no such mode, precision or option (no device is touched)."""
        if spec.mode not in cls.modes:
            raise UsageError(
                f"target {spec}: mode {spec.mode!r} is not available on {spec.device}; "
                f"choose one of {', '.join(cls.modes)}"
            )
        if spec.precision not in cls.precisions:
            raise UsageError(
                f"target {spec}: precision {spec.precision!r} is not available on {spec.device}; "
                f"choose one of {', '.join(cls.precisions)}"
            )
        for option in spec.options:
            if option not in cls.options:
                choices = f"choose from {', '.join(cls.options)}" if cls.options else "it has none"
                raise UsageError(f"target {spec}: option {option!r} is not available on {spec.device}; {choices}")

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

    def memory_in_use_bytes(self) -> int | None:
        """Device memory held by tensors now, or None where the device does not say (a server
        counts a step's activations as its peak above this)."""
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

    @property
    def fixed_shapes(self) -> bool:
        """Whether each new input shape costs a compilation (every mode but eager): callers whose
        batch sizes vary, such as batched inference, then pad batches to a few sizes."""
        return self.spec.mode != "eager"

    def activation_checkpoint(self, function: Callable[..., torch.Tensor], *args: torch.Tensor) -> torch.Tensor:
        """Run `function` keeping only its inputs for backward (it runs again in backward)."""
        import torch.utils.checkpoint as torch_checkpoint

        return torch_checkpoint.checkpoint(function, *args, use_reentrant=False)

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

    def build(self, workload: Workload, size: str, seed: int) -> Trainable:
        """A fresh Trainable of the workload at `size`, ready to step on this target. Built on the
        host and prepared here; a target whose device lives elsewhere builds it there instead."""
        return self.prepare(workload.build(size, seed=seed))

    def prepare(self, trainable: Trainable) -> Trainable:
        """Move to the device, create optimizers, wrap for the execution mode."""
        self.configure_precision()
        trainable.to(self.device)
        setup_optimizers(trainable, self.fused_optimizers)
        trainable.use_activation_checkpoint(self.activation_checkpoint)
        trainable.wrap(self.wrap_network)
        return trainable

    def move_batch(self, batch: Batch) -> Batch:
        return {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}

    def run_step(self, trainable: Trainable, batch: Batch) -> torch.Tensor:
        with self.autocast():
            loss = trainable.train_step(batch)
        self.after_step()
        return loss

    # --- measuring ------------------------------------------------------------------------------
    def start_timed_windows(self) -> None:
        """The bench is about to time windows of steps, each ended by `sync`, and keeps the windows
        from here until it calls this again (it starts over with more steps per window). A family
        whose device times its own steps elsewhere (the remote one) pairs those times with these
        windows, so both cover the same steps. Default: nothing to do."""

    def end_timed_windows(self, steps: int) -> None:
        """The windows kept since the last `start_timed_windows` ended here (synced), `steps` steps
        in all. What the bench does after this (reading the final loss) is outside them, so a
        family that counts what its device did in the windows (XLA: fallbacks, compilations, host
        transfers) stops counting here. Default: nothing to do."""

    def measured_peak_tflops(self) -> float | None:
        """The device's peak matmul TFLOP/s where the family measures it itself; None (the default)
        lets the bench's probe measure it on `device` from this process. A family whose device
        lives elsewhere measures there: a probe here would time the wrong processor."""
        return None

    def nominal_peak(self) -> NominalPeak | None:
        """The chip's published dense peak in this target's precision, which MFU divides by where
        one is known (`trainspeed/nominal_peaks.py`); None lets the measured peak be MFU's.
        Looked up by `device_name()`; a family whose device name is not the chip's own (the remote
        family's adds where the server is) looks its chip up itself."""
        return nominal_peak(self.device_name(), self.spec.precision)

    def row_fields(self) -> dict[str, Any]:
        """Extra measurements of the configuration measured last, merged into its result row (the
        names are result-row fields). Default: none. The remote family reports the transport, the
        link, the bytes each step sent and received and the server's own step time."""
        return {}

    # --- data parallelism -------------------------------------------------------------------------
    def bind_local_rank(self, local_rank: int) -> None:
        """Pick this process's device among the host's (torchrun starts one process per device)."""

    def process_group_device(self) -> torch.device | None:
        """The device torch.distributed binds its communicator to (None: the backend chooses)."""
        return None

    def ddp_device_ids(self) -> list[int] | None:
        """`device_ids` for DistributedDataParallel (None for host and multi-device modules)."""
        return None

    @classmethod
    def start_spmd(cls, requested_devices: int) -> int:
        """Switch to SPMD over the local devices before the family's device is touched (call it on
        the class, before constructing the target); returns the number of devices."""
        raise UsageError(f"{cls.device_type} targets run one process per device; they have no SPMD mode")

    @classmethod
    def join_spmd_processes(cls, endpoint: str, processes: int, process_id: int, local_devices: int,
                            timeout_s: float) -> None:
        """Join the other processes of one SPMD program over several hosts (`--nnodes N`), before
        the family's device is touched."""
        raise UsageError(f"{cls.device_type} targets drive one host's devices from one process; they have no "
                         "multi-node mode")

    def spmd_placer(self, devices: int) -> BatchPlacer:
        """Copies each host tensor to the devices, split along the batch dimension."""
        raise UsageError(f"target {self} runs one process per device; it has no SPMD mode")

    # --- state ------------------------------------------------------------------------------------
    def device_rng_state(self) -> Any:
        """The device's own random-number state (None where the host generator covers it)."""
        return None

    def set_device_rng_state(self, state: Any) -> None:
        """Restore what `device_rng_state` returned."""

    def __str__(self) -> str:
        return str(self.spec)
