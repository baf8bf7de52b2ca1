"""Where a jax-family step's state and batches live: JAX's default device, or a data-parallel mesh
over N local devices (`train --nproc N` on a `jax:*` target; a step exported with `--devices N`
runs on one too, where only JAX is, which is why this has no torch).

On the mesh the batch is split on its first dimension over a `data` axis and the state (parameters,
buffers, optimizer states, the dropout key) is replicated, so the one jitted step is JAX's data
parallelism: each device computes its slice's forward and backward, XLA inserts the all-reduce of
the gradient the mean over the global batch needs, and every device applies the same update. No
Python loop over devices runs, and the program is the single-device program's, partitioned: N = 1,
2, 4, 8 devices train the same parameters up to the order of the reduction's sums. A batch
statistic (BatchNorm's) is the global batch's, as one device would take it.

With `shard_state` (the family's `shard-state` option) each state array is instead split over the
same axis on its first dimension the devices divide, as FSDP and ZeRO-3 shard a model's state: a
device holds 1/N of the parameters and optimizer states, and XLA gathers a parameter where the step
needs it whole and reduce-scatters its gradient. The step's output state is constrained to the same
split, so every step runs the one program. An array no dimension of which the devices divide
(a bias of odd width, a scalar step count) stays replicated.

XLA cannot partition a Pallas kernel (a Mosaic call) over a mesh, and runs a loop over a
batch's chunks (the language-model loss's) on every device after gathering every device's slice to
each; so while a step is traced for a mesh (`tracing`), `per_device_batch` runs the family's kernels
and that loss under `shard_map` on each device's slice of the batch.

On a CPU, JAX makes N host devices where `--xla_force_host_platform_device_count` is set before its
backend starts; `start_devices` sets it (a process whose JAX has started already is told so).

Several processes (`train --nnodes M`, one per host) run one program over the devices of all of
them: each joins JAX's distributed runtime (`join_processes`) before its backend starts, the mesh
spans every process's devices (`jax.devices()`, each process's own contiguous on the data axis),
and each process puts only its own part of the global batch, read by its own loader, on its own
devices (`jax.make_array_from_process_local_data`): no process holds the global batch. The state
is replicated on every device of every process, so each process reads its own copy on the host.
On a CPU the processes' collectives go over gloo. A process whose peer is gone stops with one line
(`trainspeed.train.launch`); one that stops sending heartbeats for the run's collective timeout is
taken for dead by JAX's runtime, which ends the others.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from trainspeed import jaxrt
from trainspeed.errors import UsageError

DATA_AXIS = "data"
HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


@dataclass(frozen=True)
class Placement:
    """One device (`mesh` None) or a mesh of `devices` local devices with a data axis."""

    mesh: Any = None
    shard_state: bool = False
    """Split each state array over the data axis (`state_spec`) instead of copying it to every device."""
    spans_processes: bool = False
    """The mesh holds other processes' devices too (`join_processes`): each process puts its own part
    of a batch (`put_batch`). Fixed when the mesh is made, not asked of JAX at every step."""

    @property
    def devices(self) -> int:
        return 1 if self.mesh is None else int(self.mesh.devices.size)


    def replicated(self) -> Any:
        """Where an array lies whole: the device, or every device of the mesh."""
        from jax.sharding import NamedSharding, PartitionSpec

        return jaxrt.device() if self.mesh is None else NamedSharding(self.mesh, PartitionSpec())

    def batch_sharding(self, ndim: int) -> Any:
        """On the mesh: an array of `ndim` dimensions split on its first (the batch) over the data axis."""
        from jax.sharding import NamedSharding, PartitionSpec

        return NamedSharding(self.mesh, PartitionSpec(DATA_AXIS, *(None,) * (ndim - 1)))

    def state_spec(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """How a state array lies on the mesh: a floating one (a parameter, a buffer, an optimizer's
        moment) split on its first dimension the devices divide where the state is sharded; else
        (a dropout key, a step count) whole on every device."""
        import numpy as np
        from jax.sharding import PartitionSpec

        if self.shard_state and np.issubdtype(dtype, np.floating):
            for axis, extent in enumerate(shape):
                if extent % self.devices == 0:
                    return PartitionSpec(*(None,) * axis, DATA_AXIS)
        return PartitionSpec()

    def _state_sharding(self, array: Any) -> Any:
        from jax.sharding import NamedSharding

        return self.replicated() if self.mesh is None else NamedSharding(self.mesh, self.state_spec(array.shape,
                                                                                                        array.dtype))

    def put_state(self, state: Any) -> Any:
        """The state on the device, or on the mesh: a copy on every device, or split (`state_spec`)."""
        import jax

        if not self.shard_state:
            return jax.device_put(state, self.replicated())
        return jax.tree_util.tree_map(lambda array: jax.device_put(array, self._state_sharding(array)), state)

    def traced(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, traced for this placement (its kernels run per device on a mesh: `tracing`)."""
        def on_placement(*args: Any) -> Any:
            with tracing(self):
                return function(*args)
        return on_placement

    def traced_step(self, step: Callable[..., tuple[Any, ...]]) -> Callable[..., tuple[Any, ...]]:
        """A step returning (its state, ...), traced for this placement, its output state laid on
        the devices as its input state is (`keep_state_split`)."""
        traced = self.traced(step)

        def kept(*args: Any) -> tuple[Any, ...]:
            state, *rest = traced(*args)
            return (self.keep_state_split(state), *rest)
        return kept

    def keep_state_split(self, state: Any) -> Any:
        """Inside a step: its output state split as its input was, so the next step takes the same
        program (XLA would otherwise choose each output's layout itself)."""
        import jax

        if self.mesh is None or not self.shard_state:
            return state
        return jax.tree_util.tree_map(
            lambda array: jax.lax.with_sharding_constraint(array, self._state_sharding(array)), state)

    def put_batch(self, arrays: dict[str, Any]) -> dict[str, Any]:
        """Host arrays on the device, or split over the mesh's devices on their first dimension: each
        device gets its slice, copied from the host straight to it. A batch the devices do not divide
        (validation's last, shorter batch: training batches are per-device batches times N) goes
        whole to every device, which each compute all of it."""
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        if self.mesh is None:
            return {key: jax.device_put(array, jaxrt.device()) for key, array in arrays.items()}
        if self.spans_processes:
            return {key: jax.make_array_from_process_local_data(self.batch_sharding(array.ndim), array)
                    for key, array in arrays.items()}
        split = all(array.shape[0] % self.devices == 0 for array in arrays.values())
        return {key: jax.device_put(array, self.batch_sharding(array.ndim) if split else self.replicated())
                for key, array in arrays.items()}


_tracing = threading.local()
"""`.placements`: the placements this thread traces steps for, innermost last (`tracing`); per
thread, as steps of the Python API's benches may be traced in several threads at once."""


def _traced_for() -> list[Placement]:
    if not hasattr(_tracing, "placements"):
        _tracing.placements = []
    return _tracing.placements


@contextlib.contextmanager
def tracing(placement: Placement) -> Iterator[None]:
    """Within: a step traced for `placement`, whose kernels `per_device_batch` runs per device."""
    _traced_for().append(placement)
    try:
        yield
    finally:
        _traced_for().pop()


def per_device_batch(function: Callable[..., Any], batched: tuple[Any, ...], whole: tuple[Any, ...] = ()) -> Any:
    """`function(*batched, *whole)`: `batched` arrays share a first dimension, the batch (one
    whose first dimension is another, a broadcast mask, goes whole instead); `whole` ones (a
    weight) go whole to each device; it returns one array whose first dimension is the batch's, or
    one row per device. Traced for a mesh (`tracing`), it runs under `shard_map` on each device's
    slice: a Pallas kernel, which XLA cannot partition, then sees one device's batch, and a loop over
    the batch's chunks runs on each device's own (XLA would gather every device's slice to each). A
    batch the devices do not divide (validation's last) goes whole to each device, as `put_batch`
    puts it."""
    placements = _traced_for()
    mesh = placements[-1].mesh if placements else None
    if mesh is None:
        return function(*batched, *whole)
    import jax
    from jax.sharding import PartitionSpec

    devices = int(mesh.devices.size)
    batch = batched[0].shape[0]
    split = batch % devices == 0

    def spec(array: Any) -> Any:
        on_batch = split and array.ndim > 0 and array.shape[0] == batch
        return PartitionSpec(DATA_AXIS, *(None,) * (array.ndim - 1)) if on_batch else PartitionSpec()

    return jax.shard_map(function, mesh=mesh,
                         in_specs=(*(spec(array) for array in batched), *(PartitionSpec() for _ in whole)),
                         out_specs=PartitionSpec(DATA_AXIS) if split else PartitionSpec(), check_vma=False
                         )(*batched, *whole)


def one_device() -> Placement:
    return Placement()


def data_parallel(devices: int, shard_state: bool = False, asked_by: str = "train: --nproc") -> Placement:
    """A mesh over the first `devices` local devices, with one `data` axis; the state replicated on
    it, or split over it with `shard_state`. `asked_by` is the command and flag a refusal names."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    local = jax.local_devices()
    if devices > len(local):
        raise UsageError(f"{asked_by} {devices}, but JAX sees {len(local)} local devices here; use "
                         f"{_flag(asked_by)} {len(local)} or fewer")
    if jax.process_count() > 1:
        if shard_state:
            raise UsageError("train: shard-state over several processes (--nnodes) is not supported; drop the option, "
                             "or train on one host")
        if devices != len(local):
            raise UsageError(f"train: with --nnodes, --nproc is every device of each host, and JAX sees {len(local)} "
                             f"here; use --nproc {len(local)}")
        ordered = sorted(jax.devices(), key=lambda device: (device.process_index, device.id))
        return Placement(Mesh(np.array(ordered), (DATA_AXIS,)), spans_processes=True)
    return Placement(Mesh(np.array(local[:devices]), (DATA_AXIS,)), shard_state=shard_state)


def join_processes(endpoint: str, processes: int, process_id: int, local_devices: int, timeout_s: float) -> None:
    """Join JAX's distributed runtime as process `process_id` of `processes`, its coordinator at
    `endpoint` (process 0's host); on a CPU with `local_devices` host devices and gloo collectives.
    A process silent for `timeout_s` (its heartbeats) is taken for dead, and the others end."""
    import jax

    if _backend_started():
        raise UsageError("train: --nnodes needs JAX's distributed runtime started before JAX itself, and JAX has "
                         "started in this process already; run the command in a process of its own")
    if _platform_is_cpu():
        flags = os.environ.get("XLA_FLAGS", "")
        if HOST_DEVICES_FLAG not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} {HOST_DEVICES_FLAG}={local_devices}".strip()
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=endpoint, num_processes=processes, process_id=process_id,
                               initialization_timeout=max(1, int(timeout_s)),
                               heartbeat_timeout_seconds=max(1, int(timeout_s)))


def start_devices(requested: int, asked_by: str = "train: --nproc") -> int:
    """Make sure JAX has `requested` local devices; on a CPU, ask its client for that many host
    devices before it starts. Returns the count; UsageError with the fix where it cannot (naming
    `asked_by`, the command and flag that asked)."""
    import jax

    if _backend_started():
        found = len(jax.local_devices())
        if found < requested:
            raise UsageError(f"{asked_by} {requested}, but JAX started with {found} local devices in this process; "
                             f"start it with XLA_FLAGS={HOST_DEVICES_FLAG}={requested} (on a CPU), or use "
                             f"{_flag(asked_by)} {found}")
        return requested
    flags = os.environ.get("XLA_FLAGS", "")
    if HOST_DEVICES_FLAG not in flags and requested > 1 and _platform_is_cpu():
        os.environ["XLA_FLAGS"] = f"{flags} {HOST_DEVICES_FLAG}={requested}".strip()
    found = len(jax.local_devices())
    if found < requested:
        raise UsageError(f"{asked_by} {requested}, but JAX sees {found} local devices here; use "
                         f"{_flag(asked_by)} {found} or fewer")
    return requested


def _flag(asked_by: str) -> str:
    """The flag of `asked_by` ("train: --nproc" -> "--nproc"), which a refusal's fix names."""
    return asked_by.rpartition(": ")[2]


def _platform_is_cpu() -> bool:
    """Whether JAX will run on the CPU (no accelerator plugin asked for or installed)."""
    import importlib.util

    platforms = os.environ.get("JAX_PLATFORMS", "")
    if platforms:
        return platforms.split(",")[0].strip() == "cpu"
    return importlib.util.find_spec("libtpu") is None and importlib.util.find_spec("jax_cuda12_plugin") is None


def _backend_started() -> bool:
    """Whether JAX's backends started in this process (after which its device count is fixed)."""
    from jax._src import xla_bridge

    return bool(getattr(xla_bridge, "_backends", None))
