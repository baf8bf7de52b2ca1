"""PyTorch steps as JAX programs through torchax: `jax:jit:fp32` and `jax:jit:bf16`.

The workload's own `train_step` is traced into one pure JAX function (forward, backward, its own
optimizers' update; `functional.py`), jitted once per batch shape and run on JAX's default device:
a TPU where one is, else the CPU, so the same family is tested without an accelerator. bf16 runs
the matmuls and convolutions in bfloat16 under torchax's autocast, with fp32 parameters and
optimizer states. The state stays on the device between steps; a batch is copied there with
`jax.device_put`.

One process: `bench` steps on JAX's default device; `train --nproc N` (`data_parallel = "spmd"`)
steps on a data-parallel mesh of N local devices, the batch split over them and the state
replicated (`placement`). The gradients exist only inside the compiled
program (`gradients_here = False`), so the optimizers' step hooks the trainer measures and
accumulates through never run; a step over micro-batches is a program of its own instead, which
returns the slices' squared norms to the noise-scale meter (`slices_in_step`): the meter over
micro-batches, auto and a memory cap's micro-batches run here, the meter's previous-step method
does not. A step the tracer cannot take is refused
in one line that names the op and the workload's line (`functional.StepNotTraceable`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import weakref
from typing import Any, ContextManager

import torch

from trainspeed import jaxrt
from trainspeed.nominal_peaks import NominalPeak, jax_matmul_precision, nominal_peak
from trainspeed.data.order import SAMPLE_ID_KEY
from trainspeed.errors import UsageError
from trainspeed.targets import host_memory
from trainspeed.targets.base import Target, TargetSpec, is_host_oom
from trainspeed.targets.host_memory import HostMemoryPeak
from trainspeed.jaxrt import placement
from trainspeed.workloads.base import Batch, Trainable, Workload


class JaxTarget(Target):
    device_type = "cpu"
    """Batches and losses are host tensors until `move_batch` puts them on the JAX device."""
    modes = ("jit",)
    precisions = ("fp32", "bf16")
    options = ("scan-layers", "remat", "remat-full", "bf16-state", "bf16-compute", "shard-state")
    """`scan-layers`: a network's repeated layers traced once, as one scan (`scanned_layers`);
    `remat`: with it, each scanned layer recomputed in the backward pass but for its matmuls;
    `remat-full`: each scanned layer recomputed whole from its input;
    `bf16-state` (with bf16): parameters and optimizer states held in bfloat16;
    `bf16-compute` (with bf16): the step computes with bfloat16 copies of float32 parameters;
    `shard-state` (with `train --nproc N`): the state split over the devices, not copied (`placement`)."""
    data_parallel = "spmd"
    """`train --nproc N`: one process, one program over a mesh of N local devices (`placement`);
    with `--nnodes M`, M such processes, one per host, run one program over all their devices
    (JAX's distributed runtime: `join_spmd_processes`)."""
    supports_multi_node = True
    gradients_here = False
    gradients_where = "inside its compiled JAX step"
    slices_in_step = True

    def __init__(self, spec) -> None:
        super().__init__(spec)
        self._current: "weakref.ref[Any] | None" = None
        self._compiles = 0
        """Programs compiled so far, counted as each is (`jaxrt.CompiledPrograms.on_compile`)."""
        self._host_memory = HostMemoryPeak()
        self._compile_s: float | None = None
        """The last configuration's compile seconds, kept past its trainable (the bench frees it first)."""
        self._costs: dict[str, float] = {}
        self._placement = placement.one_device()
        """Where states and batches go: JAX's default device, or the mesh `spmd_placer` made."""
        """XLA's account of the last configuration's step program (`jaxrt.program_costs`)."""

    @classmethod
    def check_devices(cls, spec: TargetSpec, devices: int) -> None:
        if "shard-state" in spec.options and devices < 2:
            raise UsageError(f"target {spec}: shard-state splits the state over the devices of `train --nproc N`, "
                             "and this step runs on one device; drop the option, or train with --nproc 2 or more")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        missing = jaxrt.jax_missing_reason()
        if missing:
            return missing
        if importlib.util.find_spec("torchax") is None:
            return "torchax is not installed: pip install 'trainspeed[jax]'"
        return None

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def device_name(self) -> str:
        return jaxrt.device_name()

    def _trainable(self) -> Any:
        return self._current() if self._current is not None else None

    def build(self, workload: Workload, size: str, seed: int) -> Trainable:
        return self.prepare(workload.build(size, seed=seed), seed)

    def prepare(self, trainable: Trainable, seed: int = 0) -> Trainable:
        """Trace the trainable's step on torchax and put its state on the device."""
        import jax

        from trainspeed.targets.jaxjit.functional import FunctionalStep, refuse_untraceable
        from trainspeed.targets.jaxjit.trainable import JaxTrainable

        if isinstance(trainable, JaxTrainable):
            return trainable
        try:
            functional = FunctionalStep(trainable, self.spec.precision, seed, self.spec.options)
            state = functional.initial_state()
        except UsageError:
            raise
        except Exception as error:  # noqa: BLE001 - the optimizer's update traced on zero gradients, told in one line
            raise refuse_untraceable(error, "its optimizer's step") from None
        built = JaxTrainable(functional, self._placement.put_state(state), on_compile=self._count_compile,
                             placement=self._placement)
        self._current, self._compile_s, self._costs = weakref.ref(built), None, {}
        return built

    def move_batch(self, batch: Batch) -> Any:
        """The workload's batch as device arrays; the loader's own keys (sample ids) stay here."""
        import jax

        from trainspeed.targets.jaxjit.functional import host_batch_arrays

        arrays = host_batch_arrays({key: tensor for key, tensor in batch.items() if key != SAMPLE_ID_KEY})
        return self._placement.put_batch(arrays)

    @classmethod
    def start_spmd(cls, requested_devices: int, asked_by: str = "train: --nproc") -> int:
        return placement.start_devices(requested_devices, asked_by)

    @classmethod
    def join_spmd_processes(cls, endpoint: str, processes: int, process_id: int, local_devices: int,
                            timeout_s: float) -> None:
        placement.join_processes(endpoint, processes, process_id, local_devices, timeout_s)

    def spmd_placer(self, devices: int, asked_by: str = "train: --nproc"):
        """Batches split over a data-parallel mesh of `devices` local devices, the state replicated
        on it (every trainable built after this)."""
        self._placement = placement.data_parallel(devices, shard_state="shard-state" in self.spec.options,
                                                  asked_by=asked_by)
        return self.move_batch

    def autocast(self) -> ContextManager:
        return contextlib.nullcontext()  # the traced step applies the precision

    def sync(self) -> None:
        trainable = self._trainable()
        if trainable is not None:
            trainable.sync()
            self._compile_s = trainable.last_programs.last_compile_s()
            self._costs = trainable.last_programs.last_costs()

    def is_oom(self, error: BaseException) -> bool:
        return jaxrt.is_oom(error) or is_host_oom(error)

    def _count_compile(self) -> None:
        self._compiles += 1

    def compile_count(self) -> int:
        """Programs compiled by every trainable this target built (each a new one per batch shape)."""
        return self._compiles

    def _device_is_host(self) -> bool:
        return jaxrt.device().platform == "cpu"

    def reset_peak_memory(self) -> None:
        self._host_memory.reset()

    def peak_memory_bytes(self) -> int | None:
        if self._device_is_host():
            return self._host_memory.peak_growth_bytes()
        return jaxrt.peak_memory_bytes()

    def measured_peak_tflops(self) -> float:
        """A matmul on the JAX device in this precision (the bench's own probe would time torch on the host)."""
        return jaxrt.peak_matmul_tflops("bfloat16" if self.spec.precision == "bf16" else "float32", jaxrt.probe_size())

    def nominal_peak(self) -> NominalPeak | None:
        """The JAX device's chip, in the precision JAX's default runs this target's matmuls at."""
        return nominal_peak(self.device_name(), jax_matmul_precision(self.spec.precision, jaxrt.device().platform))

    def row_fields(self) -> dict[str, Any]:
        source = host_memory.SOURCE if self._device_is_host() else "jax memory_stats peak_bytes_in_use"
        return {"jax_versions": jaxrt.versions(), "compile_s": self._compile_s, "peak_memory_source": source,
                **self._costs}
