"""The process group of one rank: set up from torchrun's environment, torn down on exit.

Two groups: the training group (the target's backend: NCCL on CUDA, gloo on CPU) that DDP reduces
gradients over, and a gloo control group for small host-side reductions (metrics, the stop flag). Reducing those on the
host keeps them off the device stream, so they never force a CUDA sync. Both groups get a timeout:
a rank blocked in a collective whose peer died raises instead of hanging (torchrun usually tears
the job down earlier; the timeout is the backstop).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from trainspeed.targets.base import Target


@dataclass(frozen=True)
class RankContext:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environment(cls) -> "RankContext":
        """The rank as torchrun describes it (RANK, LOCAL_RANK, WORLD_SIZE); one rank without it."""
        return cls(
            rank=int(os.environ.get("RANK", 0)),
            local_rank=int(os.environ.get("LOCAL_RANK", 0)),
            world_size=int(os.environ.get("WORLD_SIZE", 1)),
        )


class Collectives:
    """Host-side collectives over the control group; the identity when there is one rank."""

    def __init__(self, context: RankContext, control_group: Any = None) -> None:
        self.context = context
        self._group = control_group

    def sum(self, values: list[float]) -> list[float]:
        return self._all_reduce(values, dist.ReduceOp.SUM)

    def max(self, values: list[float]) -> list[float]:
        return self._all_reduce(values, dist.ReduceOp.MAX)

    def _all_reduce(self, values: list[float], op: Any) -> list[float]:
        if not self.context.is_distributed:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor, op=op, group=self._group)
        return tensor.tolist()

    def any(self, flag: bool) -> bool:
        return self.max([1.0 if flag else 0.0])[0] > 0.0

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum a host tensor over ranks (per-class counts of a validation pass)."""
        if not self.context.is_distributed:
            return tensor
        reduced = tensor.detach().to("cpu", torch.float64).clone()
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM, group=self._group)
        return reduced

    def gather_objects(self, item: Any) -> list[Any]:
        """Every rank's `item`, in rank order, on every rank."""
        if not self.context.is_distributed:
            return [item]
        items: list[Any] = [None] * self.context.world_size
        dist.all_gather_object(items, item, group=self._group)
        return items

    def barrier(self) -> None:
        """Every rank waits for every other: an all-reduce of nothing, which is what gloo's barrier
        is (`dist.barrier` first asks torch for the process's accelerator, which fails where
        torchax has named one without registering it: the jax family's processes)."""
        self._all_reduce([0.0], dist.ReduceOp.SUM)


def init_process_group(context: RankContext, target: Target, timeout_s: float) -> Collectives:
    """Join torchrun's group (env:// rendezvous) over the target's backend, and create the control
    group (gloo; the training group itself where that is gloo already)."""
    if not context.is_distributed:
        return Collectives(context)
    timeout = timedelta(seconds=timeout_s)
    backend = target.process_group_backend
    dist.init_process_group(backend, timeout=timeout, device_id=target.process_group_device())
    control = None if backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
    return Collectives(context, control)


def init_host_group(context: RankContext, endpoint: str, timeout_s: float) -> None:
    """The host-side group (gloo) of the processes of one SPMD program over several hosts: their
    metrics, stop flag and checkpoint parts, as torchrun's ranks share theirs. It meets one port
    above `endpoint`, where JAX's coordinator takes the port itself."""
    host, port = endpoint.rsplit(":", 1)
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{int(port) + 1}", rank=context.rank,
                            world_size=context.world_size, timeout=timedelta(seconds=timeout_s))


def destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
