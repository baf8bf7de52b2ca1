"""StyleGAN3 as a trainspeed workload: build a size, make a synthetic batch, count FLOPs, read images.

A sample is one image: a step at batch B generates B images for G's update, B more for D's, and
reads B real images. Batches stay uint8 on the host (4x less to transfer than float) and the step
converts them on the device.
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache

import torch

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch
from trainspeed.workloads.stylegan3.configs import CONFIGS, SWITCHES, StyleGAN3Config, get_config
from trainspeed.workloads.stylegan3.discriminator import Discriminator
from trainspeed.workloads.flops import FlopSum
from trainspeed.workloads.stylegan3.generator import Generator
from trainspeed.workloads.stylegan3.trainable import StyleGAN3Trainable

FLOP_COUNT_BATCH = 4


def build_trainable(config: StyleGAN3Config, seed: int = 0) -> StyleGAN3Trainable:
    """Networks initialised from `seed` without disturbing the caller's global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return StyleGAN3Trainable(config, Generator(config), Discriminator(config))


def _step_flops(trainable: StyleGAN3Trainable, batch: Batch, step: int) -> int:
    trainable.step = step
    with FlopSum() as counter:
        trainable.train_step(batch)
    return counter.total


@lru_cache(maxsize=None)
def counted_flops_per_image(config: StyleGAN3Config) -> float:
    """Model FLOPs of an average step per image, counted by torch's FLOP counter on meta tensors.

    Counts convolutions and matmuls of G main, D main and the R1 step (amortised over its
    interval); elementwise ops and optimiser updates are not counted, recomputation is not
    counted (the count is of the model, not of the memory trade-off). The direct forms are
    counted: the activation-scaling modulated conv (torch's formula for a grouped conv's weight
    gradient ignores the groups, which would overstate the grouped form by the batch size) and
    FIR convolutions (the matmul form multiplies by the zeros of its banded matrices, and so do
    the fused Triton kernel's tile matmuls). Memory order does not change the count.
    """
    config = dataclasses.replace(
        config, recompute="none", grouped_modconv=False, fir_matmul=False, channels_last=False, lrelu_kernel="plain"
    )
    trainable = build_trainable(config).to(torch.device("meta"))
    trainable.setup_optimizers()
    batch = {"images": torch.empty(FLOP_COUNT_BATCH, 3, config.resolution, config.resolution, dtype=torch.uint8, device="meta")}
    plain = _step_flops(trainable, batch, step=1)
    with_r1 = _step_flops(trainable, batch, step=0)
    return (plain + (with_r1 - plain) / config.r1_interval) / FLOP_COUNT_BATCH


class StyleGAN3Workload:
    name = "stylegan3"
    sizes: tuple[str, ...] = tuple(CONFIGS)
    default_size = "tiny-t"
    size_switches = tuple(SWITCHES)
    reference_batch = 512

    def build(self, size: str, seed: int = 0) -> StyleGAN3Trainable:
        return build_trainable(get_config(size), seed)

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        resolution = get_config(size).resolution
        images = torch.randint(0, 256, (batch_size, 3, resolution, resolution), generator=generator, dtype=torch.uint8)
        return {"images": images}

    def flops_per_sample(self, size: str) -> float:
        return counted_flops_per_image(get_config(size))

    def open_dataset(self, path: "os.PathLike[str] | str", size: str, config: LoaderConfig) -> BatchLoader:
        """The images of `path`, refused unless their resolution is the one `size` generates."""
        from trainspeed.workloads.stylegan3.dataset import ImageLoader

        expected = get_config(size).resolution
        loader = ImageLoader(path, config)
        found = loader.resolution
        if found != expected:
            fitting = [name for name, c in CONFIGS.items() if c.resolution == found]
            alternative = f", or train size {' / '.join(fitting)}" if fitting else ""
            raise UsageError(
                f"{path}: images are {found}x{found} but StyleGAN3 {size!r} trains on {expected}x{expected}; "
                f"rebuild the dataset with `trainspeed data images SRC --out DATASET.zip --resolution {expected}`"
                f"{alternative}"
            )
        return loader
