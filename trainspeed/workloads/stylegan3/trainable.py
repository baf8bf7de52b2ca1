"""One StyleGAN3 training step: G main, D main, lazy R1 on D every `r1_interval` steps, G EMA.

The step is declared as phases (`trainspeed.workloads.phases`): each trains one network (the
other's parameters stop requiring gradients, as in the official schedule), so backward never
computes gradients that would be thrown away. The step counter is a Python int, so the choice of
phases is static: a target sees two step shapes (with and without R1), each compiled once.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, CheckpointFunction
from trainspeed.workloads.phases import PhasedTrainable, StepPhase
from trainspeed.workloads.stylegan3.configs import StyleGAN3Config
from trainspeed.workloads.stylegan3.discriminator import Discriminator
from trainspeed.workloads.stylegan3.generator import Generator, SynthesisLayer
from trainspeed.workloads.stylegan3.loss import discriminator_loss, generator_loss, r1_loss

ADAM_BETAS = (0.0, 0.99)


def images_to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 [0, 255] -> float [-1, 1] (on whatever device the batch already is)."""
    return images.to(torch.float32) / 127.5 - 1.0


def uncompiled(network: nn.Module) -> nn.Module:
    """torch.compile's graphs cannot be differentiated twice, so R1 runs the eager module."""
    return getattr(network, "_orig_mod", network)


class StyleGAN3Trainable(PhasedTrainable):
    def __init__(self, config: StyleGAN3Config, generator: Generator, discriminator: Discriminator) -> None:
        generator_ema = copy.deepcopy(generator).eval().requires_grad_(False)
        super().__init__({"G": generator, "D": discriminator, "G_ema": generator_ema})
        self.config = config
        self.step = 0
        self.last_losses: dict[str, torch.Tensor] = {}
        """Detached device tensors of the latest step ("G", "D", "R1" when it ran); reading them syncs."""
        self.lrelu_path = "plain"
        """Which kernels run the filtered leaky ReLU: "triton", "plain" or "mixed" (set by `to`)."""

    def trained_network_names(self) -> list[str]:
        return ["G", "D"]

    def to(self, device: torch.device) -> "StyleGAN3Trainable":
        """Move, put 4-D weights in channels-last order where the config asks, and choose the
        filtered leaky ReLU's kernels for the device."""
        super().to(device)
        if self.config.channels_last:
            for network in self.networks.values():
                network.to(memory_format=torch.channels_last)
        self.lrelu_path = self.networks["G"].synthesis.select_kernels(device)
        self.networks["G_ema"].synthesis.select_kernels(device)
        return self

    def use_activation_checkpoint(self, checkpoint: CheckpointFunction) -> None:
        for name in ("G", "G_ema"):
            for module in self.networks[name].modules():
                if isinstance(module, SynthesisLayer):
                    module.checkpoint = checkpoint

    def setup_optimizers(self, fused: bool = False) -> None:
        # Lazy R1 adds one D update every `interval` steps; scale lr and betas to keep the
        # effective optimiser per image the same (the published adjustment).
        ratio = self.config.r1_interval / (self.config.r1_interval + 1)
        self.optimizers = {
            "G": torch.optim.Adam(
                self.networks["G"].parameters(), lr=self.config.g_lr, betas=ADAM_BETAS, eps=1e-8, fused=fused or None
            ),
            "D": torch.optim.Adam(
                self.networks["D"].parameters(),
                lr=self.config.d_lr * ratio,
                betas=(ADAM_BETAS[0] ** ratio, ADAM_BETAS[1] ** ratio),
                eps=1e-8,
                fused=fused or None,
            ),
        }

    def phases(self, step: int) -> tuple[StepPhase, ...]:
        main = (StepPhase("G", "G"), StepPhase("D", "D"))
        return main + (StepPhase("R1", "D"),) if step % self.config.r1_interval == 0 else main

    def prepared(self, batch: Batch) -> Batch:
        self._check_resolution(batch["images"])
        real = images_to_float(batch["images"])
        if self.config.channels_last:
            real = real.contiguous(memory_format=torch.channels_last)
        return {"real": real}

    def _latents(self, batch_size: int, device: torch.device) -> torch.Tensor:
        return torch.randn(batch_size, self.config.z_dim, device=device)

    def phase_loss(self, phase: StepPhase, batch: Batch) -> torch.Tensor:
        real = batch["real"]
        batch_size = real.shape[0]
        generator, discriminator = self.wrapped["G"], self.wrapped["D"]
        if phase.name == "G":
            return generator_loss(discriminator(generator(self._latents(batch_size, real.device))))
        if phase.name == "D":
            with torch.no_grad():
                fake = generator(self._latents(batch_size, real.device),
                                 magnitude_ema_beta=self._magnitude_ema_beta(batch_size))
            return discriminator_loss(discriminator(fake), discriminator(real))
        return r1_loss(uncompiled(discriminator), real, self.config.r1_gamma, self.config.r1_interval)

    def returned_loss(self, losses: dict[str, torch.Tensor]) -> torch.Tensor:
        return losses["G"] + losses["D"]

    def after_updates(self, batch: Batch) -> None:
        self._update_ema(batch["real"].shape[0])

    def _check_resolution(self, images: torch.Tensor) -> None:
        expected = self.config.resolution
        if tuple(images.shape[1:]) != (3, expected, expected):
            raise UsageError(
                f"images are {tuple(images.shape[1:])} but StyleGAN3 {self.config.name!r} trains on (3, {expected}, "
                f"{expected}); rebuild the dataset with `trainspeed data images SRC --out DATASET.zip --resolution {expected}`"
            )

    def _magnitude_ema_beta(self, batch_size: int) -> float:
        return 0.5 ** (batch_size / self.config.magnitude_ema_half_life_images)

    @torch.no_grad()
    def _update_ema(self, batch_size: int) -> None:
        """G_ema follows G with a half-life of ema_kimg thousand images (10k per 32 of batch)."""
        ema_images = self.config.ema_kimg_per_32_images * 1000 * batch_size / 32
        beta = 0.5 ** (batch_size / ema_images)
        generator, generator_ema = self.networks["G"], self.networks["G_ema"]
        torch._foreach_lerp_(list(generator_ema.parameters()), list(generator.parameters()), 1.0 - beta)
        for ema_buffer, buffer in zip(generator_ema.buffers(), generator.buffers()):
            ema_buffer.copy_(buffer)

