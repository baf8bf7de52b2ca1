"""A small convolutional classifier on images it draws itself: a workload whose time to a goal is
seconds on a CPU, at whose size a step is cheap enough that anything added to it shows.

Each image is 16x16 grey pixels: one of four 5x5 shapes (a plus, a cross, a ring, a bar) at a
random place, at a random contrast, in Gaussian noise. The shape, not its place, is the class, so
the network needs its convolutions and its pooling over places; the noise keeps the classes from
being told apart in a few steps. Two 3x3 convolutions, a max over places, one linear layer: about
5,000 parameters. The dataset is one .npz file read by the image classifier example's `NpzLoader`
(every 10th image is validation); the metric is top-1 accuracy. From nothing to a goal:

    PYTHONPATH=examples python examples/small_cnn_workload.py shapes.npz
    PYTHONPATH=examples trainspeed train --workload small_cnn_workload:SmallCNNWorkload --size tiny \\
        --data shapes.npz --batch-size-per-device 64 --samples 200000 --until 'val/top1_accuracy>=0.9' \\
        --stop-at-target --eval-every-samples 2048 --threads 1 --out runs/cnn
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from image_classifier_workload import NpzLoader
from torch import nn

from trainspeed.data.base import LoaderConfig
from trainspeed.workloads.base import Batch, Trainable

RESOLUTION = 16
SHAPE = 5
SHAPES = np.array([
    [[0, 0, 1, 0, 0], [0, 0, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0]],  # plus
    [[1, 0, 0, 0, 1], [0, 1, 0, 1, 0], [0, 0, 1, 0, 0], [0, 1, 0, 1, 0], [1, 0, 0, 0, 1]],  # cross
    [[1, 1, 1, 1, 1], [1, 0, 0, 0, 1], [1, 0, 0, 0, 1], [1, 0, 0, 0, 1], [1, 1, 1, 1, 1]],  # ring
    [[0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]],  # bar
], dtype=np.float32)
CLASSES = len(SHAPES)
NOISE_STD = 0.5
CONTRAST = (0.6, 1.4)
SAMPLES = 12_000
LEARNING_RATE = 3e-3
REFERENCE_BATCH = 64
"""The batch LEARNING_RATE was chosen at; the trainer scales it by --lr-scaling from there."""


def images_of(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One image per label: its shape at a random place and contrast, in noise."""
    images = rng.normal(0.0, NOISE_STD, (len(labels), 1, RESOLUTION, RESOLUTION)).astype(np.float32)
    rows = rng.integers(0, RESOLUTION - SHAPE + 1, len(labels))
    columns = rng.integers(0, RESOLUTION - SHAPE + 1, len(labels))
    contrast = rng.uniform(*CONTRAST, len(labels)).astype(np.float32)
    for index, (label, row, column) in enumerate(zip(labels, rows, columns)):
        images[index, 0, row:row + SHAPE, column:column + SHAPE] += contrast[index] * SHAPES[label]
    return images


def write_dataset(path: Path, samples: int = SAMPLES, seed: int = 0) -> Path:
    """`samples` images and their labels, as `NpzLoader` reads them."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, samples)
    np.savez(path, images=images_of(labels, rng), labels=labels.astype(np.int64))
    return path


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten())
        self.classify = nn.Linear(32, CLASSES)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classify(self.features(images))


class SmallCNNTrainable(Trainable):
    def __init__(self) -> None:
        super().__init__({"cnn": SmallCNN()})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"cnn": torch.optim.Adam(self.networks["cnn"].parameters(), lr=LEARNING_RATE)}

    def train_step(self, batch: Batch) -> torch.Tensor:
        loss = F.cross_entropy(self.wrapped["cnn"](batch["images"]), batch["labels"])
        loss.backward()
        self.optimizers["cnn"].step()
        self.optimizers["cnn"].zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        logits = self.networks["cnn"](batch["images"])
        return {
            "loss_sum": F.cross_entropy(logits, batch["labels"], reduction="sum"),
            "top1_hits": (logits.argmax(dim=1) == batch["labels"]).sum(),
            "images": torch.tensor(len(batch["labels"])),
        }

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        images = float(totals["images"])
        return {"top1_accuracy": float(totals["top1_hits"]) / images, "mean_loss": float(totals["loss_sum"]) / images}


class SmallCNNWorkload:
    name = "small-cnn"
    version = "1"
    sizes = ("tiny",)
    reference_batch = REFERENCE_BATCH

    def build(self, size: str, seed: int = 0) -> SmallCNNTrainable:
        torch.manual_seed(seed)
        return SmallCNNTrainable()

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        labels = torch.randint(0, CLASSES, (batch_size,), generator=generator)
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        images = images_of(labels.numpy(), np.random.default_rng(seed))
        return {"images": torch.from_numpy(images), "labels": labels}

    def flops_per_sample(self, size: str) -> float:
        first = RESOLUTION * RESOLUTION * 16 * 9
        second = (RESOLUTION // 2) ** 2 * 32 * 16 * 9
        return 3.0 * 2 * (first + second + 32 * CLASSES)

    def open_dataset(self, path: str, size: str, config: LoaderConfig) -> NpzLoader:
        return NpzLoader(path, config)


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the small CNN example's images as one .npz file.")
    parser.add_argument("out", type=Path, help=".npz file to write")
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write_dataset(args.out, args.samples, args.seed)
    print(f"{args.out}: {args.samples} images of {CLASSES} shapes, {RESOLUTION}x{RESOLUTION}")


if __name__ == "__main__":
    main()
