"""A workload with its own data and its own validation metric: a tiny image classifier.

The dataset is one .npz file (`write_dataset` makes a learnable one); the loader is this file's
own `NpzLoader`, which follows the BatchLoader protocol; validation reports top-1 accuracy and the
mean loss. Train it on two ranks (the folder holding this file must be importable):

    PYTHONPATH=examples python -c "from pathlib import Path; import image_classifier_workload as w; w.write_dataset(Path('images.npz'))"
    PYTHONPATH=examples trainspeed train --workload image_classifier_workload:ImageClassifierWorkload \
        --size tiny --data images.npz --nproc 2 --batch-size-per-device 16 --epochs 3 --out runs/classifier
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainspeed.data.base import LoaderConfig
from trainspeed.data.order import batches_per_epoch, rank_batches, shuffled_order
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable

CLASSES = 3
RESOLUTION = 8


def write_dataset(path: Path, samples: int = 600, seed: int = 0) -> Path:
    """Class c is a bright square at corner c plus noise: learnable in a few dozen steps."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, samples)
    images = rng.normal(0.0, 0.3, (samples, 1, RESOLUTION, RESOLUTION)).astype(np.float32)
    for index, label in enumerate(labels):
        row, column = divmod(int(label), 2)
        images[index, 0, row * 4 : row * 4 + 4, column * 4 : column * 4 + 4] += 1.0
    np.savez(path, images=images, labels=labels.astype(np.int64))
    return path


class NpzLoader:
    """The BatchLoader protocol over one .npz file: every 10th sample is validation; the order and
    each rank's slice of every global batch come from `trainspeed.data.order`, as in the built-in
    loaders, so N ranks at batch B read exactly what one rank reads at batch N*B."""

    def __init__(self, path: str, config: LoaderConfig) -> None:
        try:
            data = np.load(path)
            images, labels = data["images"], data["labels"]
        except (OSError, ValueError, KeyError) as error:
            raise UsageError(f"{path}: not an image .npz dataset with images and labels ({error})") from None
        in_val = np.arange(len(labels)) % 10 == 0
        keep = in_val if config.split == "val" else ~in_val
        self.images = torch.from_numpy(images[keep])
        self.labels = torch.from_numpy(labels[keep])
        self.config = config
        self.epoch = self.position = 0

    @property
    def num_samples(self) -> int:
        return len(self.labels)

    def __len__(self) -> int:
        return batches_per_epoch(self.num_samples, self.config)

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = epoch, 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = state["epoch"], state["position"]

    def __iter__(self) -> Iterator[Batch]:
        batches = rank_batches(shuffled_order(self.num_samples, self.config, self.epoch), self.config)
        while self.position < len(batches):
            ids = torch.from_numpy(batches[self.position])
            self.position += 1
            yield {"images": self.images[ids], "labels": self.labels[ids]}


class ClassifierTrainable(Trainable):
    def __init__(self) -> None:
        network = nn.Sequential(nn.Flatten(), nn.Linear(RESOLUTION * RESOLUTION, 32), nn.ReLU(), nn.Linear(32, CLASSES))
        super().__init__({"classifier": network})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"classifier": torch.optim.Adam(self.networks["classifier"].parameters(), lr=1e-2)}

    def train_step(self, batch: Batch) -> torch.Tensor:
        loss = F.cross_entropy(self.wrapped["classifier"](batch["images"]), batch["labels"])
        loss.backward()
        self.optimizers["classifier"].step()
        self.optimizers["classifier"].zero_grad(set_to_none=True)
        return loss.detach()

    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        logits = self.networks["classifier"](batch["images"])
        return {
            "loss_sum": F.cross_entropy(logits, batch["labels"], reduction="sum"),
            "top1_hits": (logits.argmax(dim=1) == batch["labels"]).sum(),
            "images": torch.tensor(len(batch["labels"])),
        }

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        images = float(totals["images"])
        return {"top1_accuracy": float(totals["top1_hits"]) / images, "mean_loss": float(totals["loss_sum"]) / images}


class ImageClassifierWorkload:
    name = "image-classifier"
    sizes = ("tiny",)

    def build(self, size: str, seed: int = 0) -> ClassifierTrainable:
        torch.manual_seed(seed)
        return ClassifierTrainable()

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        return {
            "images": torch.randn(batch_size, 1, RESOLUTION, RESOLUTION, generator=generator),
            "labels": torch.randint(0, CLASSES, (batch_size,), generator=generator),
        }

    def flops_per_sample(self, size: str) -> float:
        return 3.0 * 2 * (RESOLUTION * RESOLUTION * 32 + 32 * CLASSES)

    def open_dataset(self, path: str, size: str, config: LoaderConfig) -> NpzLoader:
        return NpzLoader(path, config)
