"""StyleGAN3 with latents made from the batch's shape (sin of a ramp) instead of drawn: eager
PyTorch draws from torch's generator and the jax family from JAX's key, so drawn latents differ by
design; with these, both targets run the same networks on the same inputs. `NoR1` skips the lazy
R1 phase, to show what a step without it is off by. Named on the command line as
`fixed_latents_gan:FixedLatentsGAN` (tests/ is on the tests' path)."""

from __future__ import annotations

import torch

from trainspeed.workloads.stylegan3.configs import get_config
from trainspeed.workloads.stylegan3.discriminator import Discriminator
from trainspeed.workloads.stylegan3.generator import Generator
from trainspeed.workloads.stylegan3.trainable import StyleGAN3Trainable
from trainspeed.workloads.stylegan3.workload import StyleGAN3Workload


class FixedLatents(StyleGAN3Trainable):
    def _latents(self, batch_size: int, device: torch.device) -> torch.Tensor:
        ramp = torch.arange(batch_size * self.config.z_dim, device=device).reshape(batch_size, -1)
        return ramp.float().mul(0.37).sin()


class WithoutR1(FixedLatents):
    def phases(self, step: int):
        return super().phases(step)[:2]


class FixedLatentsGAN(StyleGAN3Workload):
    name = "fixed-latents-gan"
    trainable = FixedLatents

    def build(self, size: str, seed: int = 0) -> StyleGAN3Trainable:
        config = get_config(size)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self.trainable(config, Generator(config), Discriminator(config))


class NoR1(FixedLatentsGAN):
    name = "fixed-latents-gan-no-r1"
    trainable = WithoutR1
