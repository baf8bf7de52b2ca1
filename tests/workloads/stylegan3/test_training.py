"""The tiny config trains on a tiny real image set and behaves like a GAN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from trainspeed.data.base import LoaderConfig
from trainspeed.workloads.stylegan3.dataset_tool import build_image_dataset
from trainspeed.workloads.stylegan3.workload import StyleGAN3Workload

STEPS = 24
BATCH = 8
CHANCE_D_LOSS = 2 * float(np.log(2))  # D cannot tell real from fake: softplus(0) twice


def write_shapes(folder: Path, count: int, side: int = 48) -> Path:
    """Colour gradients with an inverted disc: structured images a GAN can start to learn."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:side, 0:side] / (side - 1)
    for index in range(count):
        angle = rng.random() * np.pi
        ramp = (np.cos(angle) * xx + np.sin(angle) * yy)[..., None]
        image = rng.random(3) * ramp + rng.random(3) * (1 - ramp)
        cx, cy, radius = rng.random() * side, rng.random() * side, 5 + rng.random() * 10
        disc = (xx * (side - 1) - cx) ** 2 + (yy * (side - 1) - cy) ** 2 < radius**2
        image[disc] = 1 - image[disc]
        Image.fromarray((image * 255).astype(np.uint8)).save(folder / f"shape{index:03d}.png")
    return folder


@pytest.mark.slow
def test_tiny_config_trains_on_real_images(tmp_path):
    dataset = tmp_path / "shapes.zip"
    build_image_dataset(write_shapes(tmp_path / "src", 64), dataset, resolution=32)
    workload = StyleGAN3Workload()
    torch.manual_seed(0)
    trainable = workload.build("tiny-t", seed=0).to(torch.device("cpu"))
    trainable.setup_optimizers()
    loader = workload.open_dataset(dataset, "tiny-t", LoaderConfig(batch_size=BATCH, num_workers=0))

    history: list[dict[str, float]] = []
    epoch = 0
    while len(history) < STEPS:
        loader.set_epoch(epoch)
        for batch in loader:
            trainable.train_step(batch)
            history.append({name: loss.item() for name, loss in trainable.last_losses.items()})
            if len(history) == STEPS:
                break
        epoch += 1

    assert all(np.isfinite(list(losses.values())).all() for losses in history)
    d_losses = np.array([losses["D"] for losses in history])
    g_losses = np.array([losses["G"] for losses in history])
    # D separates real from fake early: below the chance loss within the first 16 steps
    assert d_losses[4:16].mean() < CHANCE_D_LOSS - 0.05
    # G's loss responds: over the last 8 it rises from about log 2 as D gets better at rejecting fakes
    assert g_losses[16:].mean() > g_losses[:3].mean() + 0.05
