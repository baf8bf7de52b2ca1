"""Gradient averaging for workloads with several trained networks (the optimizer-hook path that
StyleGAN3 takes): two gloo ranks, each with its half of the batch and its own initialisation, end
one step with the parameters of one process on the whole batch from rank 0's initialisation.

The networks compute in float64: the two ways of averaging add the same eight per-sample gradients
in another order, which changes a value of order 1 by a few units of 2**-53 (1e-16), so ATOL =
1e-12 holds on any CPU, while a missing or wrong average moves a parameter by lr x gradient ~ 0.1."""

from __future__ import annotations

import pytest

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from trainspeed.targets import get_target
from trainspeed.train.distributed import RankContext
from trainspeed.train.parallel import make_data_parallel
from trainspeed.workloads.base import Trainable

WORLD = 2
ATOL = 1e-12


class TwoNetworks(Trainable):
    """Two networks, each updated by its own optimizer in its own phase, like G and D."""

    def __init__(self, seed: int) -> None:
        torch.manual_seed(seed)
        super().__init__({"first": nn.Linear(4, 3).double(), "second": nn.Linear(3, 1).double()})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {name: torch.optim.SGD(net.parameters(), lr=0.5) for name, net in self.networks.items()}

    def train_step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        first, second = self.wrapped["first"], self.wrapped["second"]
        self.networks["second"].requires_grad_(False)
        loss = (second(first(batch["x"])) - batch["y"]).pow(2).mean()
        self.optimizers["first"].zero_grad()
        loss.backward()
        self.optimizers["first"].step()
        self.networks["second"].requires_grad_(True)
        loss = (second(first(batch["x"]).detach()) - batch["y"]).pow(2).mean()
        self.optimizers["second"].zero_grad()
        loss.backward()
        self.optimizers["second"].step()
        return loss.detach()


def global_batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(123)
    return {"x": torch.randn(8, 4, generator=generator, dtype=torch.float64),
            "y": torch.randn(8, 1, generator=generator, dtype=torch.float64)}


def parameters(trainable: Trainable) -> dict[str, torch.Tensor]:
    return {f"{name}.{key}": value for name, net in trainable.networks.items() for key, value in net.state_dict().items()}


def _rank_main(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        trainable = get_target("cpu:eager:fp32").prepare(TwoNetworks(seed=rank))
        how = make_data_parallel(trainable, get_target("cpu:eager:fp32"), RankContext(rank, rank, WORLD))
        assert how == "allreduce-hook"
        half = {key: value[rank * 4 : (rank + 1) * 4] for key, value in global_batch().items()}
        trainable.train_step(half)
        torch.save(parameters(trainable), Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_two_ranks_average_gradients_of_every_optimizer(tmp_path: Path) -> None:
    # Spawned, not forked: autograd's threads in this process (any earlier test's backward) make a
    # forked rank's backward refuse to run.
    mp.spawn(_rank_main, args=(_free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD)]
    single = get_target("cpu:eager:fp32").prepare(TwoNetworks(seed=0))
    before = {key: value.clone() for key, value in parameters(single).items()}
    single.train_step(global_batch())
    expected = parameters(single)
    for key in expected:
        assert not torch.equal(expected[key], before[key])
        torch.testing.assert_close(ranks[0][key], ranks[1][key], rtol=0, atol=0)
        torch.testing.assert_close(ranks[0][key], expected[key], rtol=0, atol=ATOL)
