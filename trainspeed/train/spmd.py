"""Data parallelism on XLA devices: one process, SPMD sharding of the batch over all local devices.

torch_xla's SPMD mode traces the step once for the whole host; parameters stay replicated, every
batch tensor is split along its first dimension over a 1-D "data" mesh, and the compiler inserts
the gradient all-reduce. It is the recommended way to drive all the cores of a TPU host (the study
used one process per core with the older multi-process API). The process reads the host's slice of
the global batch with one loader (rank = host, batch = per-device batch x local devices) and copies
each tensor straight to its shards, so no device holds the full batch.

On CPU (no TPU) the PJRT CPU client provides `--nproc` virtual devices (CPU_NUM_DEVICES), so the
same code path runs and is tested here.
"""

from __future__ import annotations

import os
from typing import Callable

from trainspeed.errors import UsageError
from trainspeed.targets.base import Target
from trainspeed.train.checkpoint import StopRequest
from trainspeed.train.config import TrainConfig
from trainspeed.train.distributed import Collectives, RankContext
from trainspeed.train.lifecycle import exit_code
from trainspeed.train.loop import BatchPlacer, Layout, RankTrainer
from trainspeed.workloads.base import Batch


def start_spmd_runtime(requested_devices: int) -> int:
    """Switch torch_xla to SPMD before any XLA tensor exists; returns the number of devices."""
    if os.environ.get("PJRT_DEVICE", "CPU") == "CPU":
        os.environ["CPU_NUM_DEVICES"] = str(requested_devices)
    import torch_xla.runtime as xr

    xr.use_spmd()
    devices = xr.global_runtime_device_count()
    if devices != requested_devices:
        raise UsageError(f"train: --nproc {requested_devices}, but this host has {devices} XLA devices; use --nproc {devices}")
    return devices


def batch_sharder(devices: int) -> Callable[[Target], BatchPlacer]:
    """A placer that copies each host tensor to the devices, split along dimension 0 ("data")."""
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs

    mesh = xs.Mesh(list(range(devices)), (devices,), ("data",))
    device = torch_xla.device()

    def make_placer(target: Target) -> BatchPlacer:
        def place(batch: Batch) -> Batch:
            placed = {}
            for key, tensor in batch.items():
                spec = xs.ShardingSpec(mesh, ("data",) + (None,) * (tensor.dim() - 1))
                (placed[key],) = xm.send_cpu_data_to_device([tensor], device, input_sharding=spec)
            return placed

        return place

    return make_placer


def run_spmd(config: TrainConfig) -> int:
    devices = start_spmd_runtime(config.launch.nproc)
    context = RankContext()
    with StopRequest() as stop:
        trainer = RankTrainer(config, Layout(context, devices_per_process=devices), Collectives(context), batch_sharder(devices))
        summary = trainer.run(stop)
    print("\n".join(summary.lines()), flush=True)
    return exit_code(summary)
