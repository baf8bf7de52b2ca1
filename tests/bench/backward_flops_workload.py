"""A workload that counts its FLOPs with a backward pass (as StyleGAN3's does), for test_sweep_xla."""

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from trainspeed.workloads.base import Trainable


class LinearTrainable(Trainable):
    def __init__(self):
        super().__init__({"net": nn.Linear(8, 1)})

    def setup_optimizers(self, fused=False):
        self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=0.01)}

    def train_step(self, batch):
        loss = self.wrapped["net"](batch["x"]).square().mean()
        loss.backward()
        self.optimizers["net"].step()
        self.optimizers["net"].zero_grad()
        return loss.detach()


class BackwardFlopsWorkload:
    name, sizes = "backward-flops", ("one",)

    def build(self, size, seed=0):
        torch.manual_seed(seed)
        return LinearTrainable()

    def synthetic_batch(self, size, batch_size, generator):
        return {"x": torch.randn(batch_size, 8, generator=generator)}

    def flops_per_sample(self, size):
        network = nn.Linear(8, 1)
        with FlopCounterMode(display=False) as counter:
            network(torch.randn(2, 8)).sum().backward()
        return counter.get_total_flops() / 2
