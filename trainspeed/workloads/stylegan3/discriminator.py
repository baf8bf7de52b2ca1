"""The StyleGAN2 residual discriminator that StyleGAN3 trains against.

Blocks halve the resolution down to 4x4; the epilogue appends a minibatch standard deviation
channel (so D can see a lack of variety), then a conv and two fully connected layers give one
logit per image. Every op is an ordinary conv/elementwise op, so R1's double backward works.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from trainspeed.workloads.stylegan3.configs import StyleGAN3Config
from trainspeed.workloads.stylegan3.layers import Conv2dLayer, FullyConnected

SKIP_GAIN = math.sqrt(0.5)


def discriminator_channels(config: StyleGAN3Config, resolution: int) -> int:
    return min(config.d_channel_base // resolution, config.d_channel_max)


class DiscriminatorBlock(nn.Module):
    """Two 3x3 convs (the second downsamples) plus a 1x1 downsampling skip, summed at gain sqrt(1/2)."""

    def __init__(self, in_channels: int, tmp_channels: int, out_channels: int, conv_clamp: float | None) -> None:
        super().__init__()
        self.from_rgb = Conv2dLayer(3, tmp_channels, 1, activation="lrelu", conv_clamp=conv_clamp) if in_channels == 0 else None
        self.conv0 = Conv2dLayer(tmp_channels, tmp_channels, 3, activation="lrelu", conv_clamp=conv_clamp)
        self.conv1 = Conv2dLayer(tmp_channels, out_channels, 3, activation="lrelu", down=2, conv_clamp=conv_clamp)
        self.skip = Conv2dLayer(tmp_channels, out_channels, 1, bias=False, down=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.from_rgb is not None:
            x = self.from_rgb(x)
        shortcut = self.skip(x, gain=SKIP_GAIN)
        return shortcut + self.conv1(self.conv0(x), gain=SKIP_GAIN)


def minibatch_stddev(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """Append the mean standard deviation over groups of samples as one extra channel.

    The group is the largest divisor of the batch not above `group_size`, so any batch works.
    """
    n, c, h, w = x.shape
    group = max(g for g in range(1, min(group_size, n) + 1) if n % g == 0)
    y = x.float().reshape(group, -1, c, h, w)
    y = (y - y.mean(dim=0)).square().mean(dim=0)
    y = (y + 1e-8).sqrt().mean(dim=[1, 2, 3])  # (n / group,)
    y = y.view(1, -1, 1, 1, 1).expand(group, -1, 1, h, w).reshape(n, 1, h, w)
    return torch.cat([x, y.to(x.dtype)], dim=1)


class DiscriminatorEpilogue(nn.Module):
    def __init__(self, channels: int, mbstd_group_size: int, conv_clamp: float | None) -> None:
        super().__init__()
        self.mbstd_group_size = mbstd_group_size
        self.conv = Conv2dLayer(channels + 1, channels, 3, activation="lrelu", conv_clamp=conv_clamp)
        self.fc = FullyConnected(channels * 4 * 4, channels, activation="lrelu")
        self.out = FullyConnected(channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(minibatch_stddev(x, self.mbstd_group_size))
        return self.out(self.fc(x.flatten(1).float()))


class Discriminator(nn.Module):
    def __init__(self, config: StyleGAN3Config) -> None:
        super().__init__()
        resolutions = [config.resolution // 2**i for i in range(int(math.log2(config.resolution)) - 2)]  # R .. 8
        blocks = []
        for resolution in resolutions:
            tmp = discriminator_channels(config, resolution)
            in_channels = 0 if resolution == config.resolution else tmp
            blocks.append(DiscriminatorBlock(in_channels, tmp, discriminator_channels(config, resolution // 2), config.conv_clamp))
        self.blocks = nn.Sequential(*blocks)
        self.epilogue = DiscriminatorEpilogue(discriminator_channels(config, 4), config.mbstd_group_size, config.conv_clamp)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits (N,) for images in [-1, 1]."""
        return self.epilogue(self.blocks(images)).squeeze(1)
