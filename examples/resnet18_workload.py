"""A workload this project did not write: torchvision's ResNet-18 on random images.

Run it with the bench (the folder holding this file must be importable):

    PYTHONPATH=examples trainspeed bench --workload resnet18_workload:ResNet18Workload \
        --size 64px --targets cpu:eager:fp32,xla:lazy:fp32 --batch-sizes 2^2..2^5

Everything trainspeed needs is the protocol in trainspeed/workloads/base.py: a factory that
returns an object with `name`, `sizes`, `build`, `synthetic_batch` and
`flops_per_sample`, where `build` returns a `Trainable` (networks, optimizers, one step).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from trainspeed.workloads.base import Trainable

NUM_CLASSES = 1000
RESOLUTIONS = {"32px": 32, "64px": 64, "224px": 224}


class ResNet18Trainable(Trainable):
    def __init__(self) -> None:
        from torchvision.models import resnet18

        super().__init__({"resnet": resnet18(num_classes=NUM_CLASSES)})

    def setup_optimizers(self, fused: bool = False) -> None:
        parameters = self.networks["resnet"].parameters()
        self.optimizers = {
            "resnet": torch.optim.SGD(parameters, lr=0.1, momentum=0.9, weight_decay=1e-4, fused=fused or None)
        }

    def train_step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        loss = F.cross_entropy(self.wrapped["resnet"](batch["images"]), batch["labels"])
        loss.backward()
        self.optimizers["resnet"].step()
        self.optimizers["resnet"].zero_grad(set_to_none=True)
        return loss.detach()


class ResNet18Workload:
    name = "resnet18"
    sizes = tuple(RESOLUTIONS)

    def build(self, size: str, seed: int = 0) -> ResNet18Trainable:
        torch.manual_seed(seed)
        return ResNet18Trainable()

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        resolution = RESOLUTIONS[size]
        return {
            "images": torch.randn(batch_size, 3, resolution, resolution, generator=generator),
            "labels": torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator),
        }

    def flops_per_sample(self, size: str) -> float:
        """Counted by PyTorch's flop counter (forward + backward) on a batch of two images, the
        smallest batch BatchNorm trains on."""
        trainable = self.build(size)
        batch = self.synthetic_batch(size, 2, torch.Generator().manual_seed(0))
        with FlopCounterMode(display=False) as counter:
            F.cross_entropy(trainable.networks["resnet"](batch["images"]), batch["labels"]).backward()
        return counter.get_total_flops() / 2
