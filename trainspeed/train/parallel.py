"""Gradient averaging over ranks: DistributedDataParallel, or an all-reduce before each optimizer step.

A workload with one trained network (the Mahjong policy) is wrapped in DDP, which overlaps the
gradient all-reduce with the backward pass. DDP cannot follow a GAN: StyleGAN3 alternates G and D
phases (a network is run in a phase that does not train it) and its R1 penalty differentiates twice,
and DDP's reducer expects one backward per forward over a fixed set of parameters. For workloads with
several trained networks the gradients of each optimizer are instead averaged right before its
step (an optimizer step pre-hook): the same arithmetic, without the overlap.

Either way every rank starts from rank 0's parameters and ends each step with identical ones. A
noise-scale meter (`trainspeed.gradients.noise_scale`), where given, sees each rank's gradient before
it is averaged and the averaged one after.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from trainspeed.targets.base import Target
from trainspeed.train.distributed import RankContext
from trainspeed.gradients.noise_scale import NoiseScaleMeter
from trainspeed.workloads.base import Trainable


def make_data_parallel(trainable: Trainable, target: Target, context: RankContext,
                       meter: NoiseScaleMeter | None = None) -> str:
    """Make gradients average over ranks; returns how ("single", "ddp" or "allreduce-hook")."""
    if not context.is_distributed:
        if meter is not None:
            meter.attach("single", {})
        return "single"
    if len(trainable.trained_network_names()) == 1:
        device_ids = target.ddp_device_ids()
        ddp_modules: dict[str, DistributedDataParallel] = {}

        def ddp_then_target(network: torch.nn.Module) -> torch.nn.Module:
            module = DistributedDataParallel(network, device_ids=device_ids)
            ddp_modules[next(name for name, net in trainable.networks.items() if net is network)] = module
            return target.wrap_network(module)

        trainable.wrap(ddp_then_target)
        if meter is not None:
            meter.attach("ddp", ddp_modules)
        return "ddp"
    _broadcast_from_rank0(trainable)
    for name, optimizer in trainable.optimizers.items():
        optimizer.register_step_pre_hook(_average_gradients_hook(context.world_size, name, meter))
    return "allreduce-hook"


def _broadcast_from_rank0(trainable: Trainable) -> None:
    with torch.no_grad():
        for network in trainable.networks.values():
            for tensor in list(network.parameters()) + list(network.buffers()):
                dist.broadcast(tensor.data, src=0)


def _average_gradients_hook(world_size: int, name: str, meter: NoiseScaleMeter | None):
    def average(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        local_sq = torch.dot(flat.float(), flat.float()) if meter is not None else None
        dist.all_reduce(flat)
        flat /= world_size
        if meter is not None and local_sq is not None:
            meter.ranks_step(name, local_sq, torch.dot(flat.float(), flat.float()))
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()

    return average
