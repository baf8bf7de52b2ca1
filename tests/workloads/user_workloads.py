"""Workloads a user might write, defined by the tests: sizes with names of their own, and factories
that go wrong in the ways a user's can."""

from __future__ import annotations

import torch
from torch import nn

from trainspeed.workloads.base import Trainable

WIDTHS = {"narrow": 4, "wide": 8}


class LinearTrainable(Trainable):
    def __init__(self, width: int) -> None:
        super().__init__({"net": nn.Linear(width, 1)})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=0.01)}

    def train_step(self, batch):
        loss = self.wrapped["net"](batch["x"]).square().mean()
        loss.backward()
        self.optimizers["net"].step()
        self.optimizers["net"].zero_grad()
        return loss.detach()


class OwnSizesWorkload:
    """Sizes named as no built-in names them, no `default_size` (so the first is the default), and
    a size lookup that raises KeyError for any other name, as a dict lookup in a user's code does."""

    name = "own-sizes"
    sizes = tuple(WIDTHS)

    def build(self, size, seed=0):
        torch.manual_seed(seed)
        return LinearTrainable(WIDTHS[size])

    def synthetic_batch(self, size, batch_size, generator):
        return {"x": torch.randn(batch_size, WIDTHS[size], generator=generator)}

    def flops_per_sample(self, size):
        return 4.0 * WIDTHS[size]  # forward and the weight gradient (the input needs none)


class DefaultSizeWorkload(OwnSizesWorkload):
    default_size = "wide"


def raising_factory():
    raise RuntimeError("cannot find the weights of my model")


def none_factory():
    return None


class MisnamedSizes(OwnSizesWorkload):
    sizes = "narrow"


not_a_factory = 3


class BeforeFusedTrainable(LinearTrainable):
    """Written before `setup_optimizers` took `fused` (the protocol's documented change)."""

    def setup_optimizers(self) -> None:  # type: ignore[override]
        self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=0.01)}


class BeforeFusedWorkload(OwnSizesWorkload):
    name = "before-fused"

    def build(self, size, seed=0):
        torch.manual_seed(seed)
        return BeforeFusedTrainable(WIDTHS[size])


class WideLoader:
    """A loader of the own-sizes workload's data whose inputs are float64, where its synthetic
    batch (and so a server) has float32."""

    def __init__(self, width: int, config) -> None:
        self.width, self.config, self.epoch = width, config, 0

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.epoch)
        for _ in range(len(self)):
            yield {"x": torch.randn(self.config.batch_size, self.width, generator=generator, dtype=torch.float64)}

    def __len__(self) -> int:
        return 4

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": 0}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = state["epoch"]

    @property
    def num_samples(self) -> int:
        return 4 * self.config.batch_size * self.config.world_size


class WideDataWorkload(OwnSizesWorkload):
    name = "wide-data"

    def open_dataset(self, path, size, config):
        return WideLoader(WIDTHS[size], config)
