"""Workloads whose declared FLOPs the bench's check can be tested against: one that overstates them,
and one whose step reads a value (so it cannot run on the meta device)."""

import torch
from torch import nn

from trainspeed.workloads.base import Trainable

WIDTH = 16
EXACT_FLOPS = 4.0 * WIDTH * WIDTH
"""Per sample: the forward matmul and the weight gradient (the input needs no gradient)."""


class SquareTrainable(Trainable):
    def __init__(self, reads_loss: bool):
        super().__init__({"net": nn.Linear(WIDTH, WIDTH)})
        self.reads_loss = reads_loss

    def setup_optimizers(self, fused=False):
        self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=0.01)}

    def train_step(self, batch):
        loss = self.wrapped["net"](batch["x"]).square().mean()
        loss.backward()
        if not self.reads_loss or loss.item() < 1e6:  # a data-dependent branch, as gradient clipping has
            self.optimizers["net"].step()
        self.optimizers["net"].zero_grad()
        return loss.detach()


class OverstatedWorkload:
    name, sizes = "overstated", ("one",)
    reads_loss = False

    def build(self, size, seed=0):
        torch.manual_seed(seed)
        return SquareTrainable(self.reads_loss)

    def synthetic_batch(self, size, batch_size, generator):
        return {"x": torch.randn(batch_size, WIDTH, generator=generator)}

    def flops_per_sample(self, size):
        return 1.08 * EXACT_FLOPS  # 8% too many, as the formula of the user in the issue


class ValueReadingWorkload(OverstatedWorkload):
    name = "value-reading"
    reads_loss = True

    def flops_per_sample(self, size):
        return EXACT_FLOPS
