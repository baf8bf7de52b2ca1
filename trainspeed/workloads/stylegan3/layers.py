"""Equalised-learning-rate layers shared by the generator and the discriminator.

Weights are stored with unit variance and scaled at run time by 1/sqrt(fan_in) (times a
learning-rate multiplier), so Adam's per-parameter step size acts the same on every layer.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainspeed.workloads.stylegan3.ops import bias_act, upfirdn2d


class FullyConnected(nn.Module):
    def __init__(
        self,
        in_features: int,
        out_features: int,
        activation: str = "linear",
        lr_multiplier: float = 1.0,
        bias_init: float | list[float] = 0.0,
        weight_init: float = 1.0,
    ) -> None:
        super().__init__()
        self.activation = activation
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * (weight_init / lr_multiplier))
        bias = torch.broadcast_to(torch.as_tensor(bias_init, dtype=torch.float32), (out_features,))
        self.bias = nn.Parameter(bias.clone() / lr_multiplier)
        self.weight_gain = lr_multiplier / math.sqrt(in_features)
        self.bias_gain = lr_multiplier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight * self.weight_gain
        bias = self.bias * self.bias_gain
        if self.activation == "linear":
            return F.linear(x, weight, bias)
        return bias_act(F.linear(x, weight), bias, activation=self.activation)


def _binomial_filter() -> torch.Tensor:
    """[1, 3, 3, 1] x [1, 3, 3, 1] / 64 as one 2-D kernel: one depthwise pass keeps one tensor for
    backward instead of two (16 instead of 8 taps, negligible next to the convolution after it)."""
    taps = torch.tensor([1.0, 3.0, 3.0, 1.0])
    return torch.outer(taps, taps) / taps.sum() ** 2


class Conv2dLayer(nn.Module):
    """Convolution with optional 2x FIR-filtered downsampling (the discriminator's resampling).

    Downsampling blurs with the [1, 3, 3, 1] filter and then runs the convolution with stride 2,
    so the convolution never computes pixels that would be thrown away.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        bias: bool = True,
        activation: str = "linear",
        down: int = 1,
        conv_clamp: float | None = None,
    ) -> None:
        super().__init__()
        self.activation = activation
        self.down = down
        self.conv_clamp = conv_clamp
        self.padding = kernel_size // 2
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.weight_gain = 1 / math.sqrt(in_channels * kernel_size**2)
        self.register_buffer("resample_filter", _binomial_filter(), persistent=False)

    def forward(self, x: torch.Tensor, gain: float = 1.0) -> torch.Tensor:
        weight = (self.weight * self.weight_gain).to(x.dtype)
        if self.down > 1:
            taps = self.resample_filter.shape[-1]
            pad_before = self.padding + (taps - self.down + 1) // 2
            pad_after = self.padding + (taps - self.down) // 2
            if self.weight.shape[-1] == 1:  # 1x1: blur-and-drop first, convolve the small map
                x = upfirdn2d(x, self.resample_filter, down=self.down, padding=(pad_before, pad_after) * 2)
                x = F.conv2d(x, weight)
            else:
                x = upfirdn2d(x, self.resample_filter, padding=(pad_before, pad_after) * 2)
                x = F.conv2d(x, weight, stride=self.down)
        else:
            x = F.conv2d(x, weight, padding=self.padding)
        activation_gain = (math.sqrt(2.0) if self.activation == "lrelu" else 1.0) * gain
        clamp = self.conv_clamp * gain if self.conv_clamp is not None else None
        return bias_act(x, self.bias, activation=self.activation, gain=activation_gain, clamp=clamp)
