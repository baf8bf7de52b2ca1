"""The non-saturating logistic GAN loss and the R1 gradient penalty on real images."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from trainspeed.workloads.differentiation import input_gradient


def generator_loss(fake_logits: torch.Tensor) -> torch.Tensor:
    """-log sigmoid(D(G(z))): strong gradients even while D rejects the fakes easily."""
    return F.softplus(-fake_logits.float()).mean()


def discriminator_loss(fake_logits: torch.Tensor, real_logits: torch.Tensor) -> torch.Tensor:
    return F.softplus(fake_logits.float()).mean() + F.softplus(-real_logits.float()).mean()


def r1_penalty(discriminator: Callable[[torch.Tensor], torch.Tensor], real_images: torch.Tensor) -> torch.Tensor:
    """Per-image squared norm of dD/dx on reals, differentiable so that D learns from it."""
    gradient = input_gradient(lambda images: discriminator(images).float(), real_images)
    return gradient.float().square().sum(dim=[1, 2, 3])


def r1_loss(discriminator: Callable[[torch.Tensor], torch.Tensor], real_images: torch.Tensor, gamma: float,
            interval: int) -> torch.Tensor:
    """gamma/2 * E||dD/dx||^2, times the interval because it runs only every `interval` steps."""
    return r1_penalty(discriminator, real_images).mean() * (gamma / 2 * interval)
