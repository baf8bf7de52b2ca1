"""StyleGAN3 generator: mapping network, Fourier-feature input, alias-free synthesis layers.

Layer shapes and filters come from `layout.synthesis_layers`; the kernels from `ops`. The
magnitude EMAs (one per layer, and the W average) are updated only when the caller passes
`magnitude_ema_beta`, which the trainer does on the pass that generates images for D.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from trainspeed.workloads.stylegan3.configs import StyleGAN3Config
from trainspeed.workloads.stylegan3.filters import design_lowpass_filter
from trainspeed.workloads.stylegan3.layers import FullyConnected
from trainspeed.workloads.stylegan3.layout import BandSpec, LayerSpec, synthesis_bands, synthesis_layers
from trainspeed.workloads.base import CheckpointFunction
from trainspeed.workloads.stylegan3.ops import as_padding, filtered_lrelu, modulated_conv2d, recompute, torch_checkpoint

W_AVG_BETA = 0.998


def normalize_2nd_moment(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    return x * (x.square().mean(dim=1, keepdim=True) + eps).rsqrt()


class MappingNetwork(nn.Module):
    """z -> w through a short MLP with a 100x lower learning rate; w is broadcast to every layer."""

    def __init__(self, config: StyleGAN3Config) -> None:
        super().__init__()
        self.num_ws = config.num_ws
        widths = [config.z_dim] + [config.w_dim] * config.mapping_layers
        self.layers = nn.Sequential(
            *(FullyConnected(i, o, activation="lrelu", lr_multiplier=0.01) for i, o in zip(widths[:-1], widths[1:]))
        )
        self.register_buffer("w_avg", torch.zeros(config.w_dim))

    def forward(self, z: torch.Tensor, update_w_avg: bool = False) -> torch.Tensor:
        w = self.layers(normalize_2nd_moment(z.float()))
        if update_w_avg:
            with torch.no_grad():
                self.w_avg.copy_(w.detach().float().mean(dim=0).lerp(self.w_avg, W_AVG_BETA))
        return w.unsqueeze(1).expand(-1, self.num_ws, -1)


def _random_frequencies(channels: int, bandwidth: float) -> torch.Tensor:
    """Directions uniform on the circle, radii concentrated inside `bandwidth`."""
    freqs = torch.randn(channels, 2)
    radii = freqs.square().sum(dim=1, keepdim=True).sqrt()
    return freqs / (radii * radii.square().exp().pow(0.25)) * bandwidth


class SynthesisInput(nn.Module):
    """Fourier features sin(2 pi (f . p + phase)) on a grid, rotated and translated per sample.

    A 4-vector from w (a rotation as cos/sin and a translation) transforms the frequencies and
    phases, so moving the input grid moves the whole image continuously.
    """

    def __init__(self, w_dim: int, band: BandSpec, channels_last: bool = False) -> None:
        super().__init__()
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.channels = band.channels
        self.size = band.size
        self.sampling_rate = band.sampling_rate
        self.bandwidth = band.cutoff
        self.weight = nn.Parameter(torch.randn(band.channels, band.channels))
        self.affine = FullyConnected(w_dim, 4, weight_init=0.0, bias_init=[1.0, 0.0, 0.0, 0.0])
        self.register_buffer("freqs", _random_frequencies(band.channels, band.cutoff))
        self.register_buffer("phases", torch.rand(band.channels) - 0.5)
        coords = (torch.arange(band.size, dtype=torch.float32) + 0.5 - band.size / 2) / band.sampling_rate
        self.register_buffer("coords", coords, persistent=False)

    def forward(self, w: torch.Tensor, translate: torch.Tensor | None = None) -> torch.Tensor:
        """`translate` (2,) moves the image content by that many units of the output's width."""
        t = self.affine(w.float())
        t = t / t[:, :2].norm(dim=1, keepdim=True)
        cos, sin, tx, ty = t.unbind(dim=1)
        # frequencies seen through the inverse rotation, phases through the inverse translation
        rotated_x = self.freqs[:, 0] * cos.unsqueeze(1) + self.freqs[:, 1] * sin.unsqueeze(1)
        rotated_y = -self.freqs[:, 0] * sin.unsqueeze(1) + self.freqs[:, 1] * cos.unsqueeze(1)
        shift_x, shift_y = -tx, -ty
        if translate is not None:
            shift_x = shift_x - translate[0]
            shift_y = shift_y - translate[1]
        rotated = torch.stack([rotated_x, rotated_y], dim=2)  # (N, C, 2)
        phases = self.phases + rotated_x * shift_x.unsqueeze(1) + rotated_y * shift_y.unsqueeze(1)
        # damp frequencies pushed outside the band (they cannot be represented at this rate)
        amplitudes = (1 - (rotated.norm(dim=2) - self.bandwidth) / (self.sampling_rate / 2 - self.bandwidth)).clamp(0, 1)
        grid_x = self.coords.view(1, 1, 1, -1)
        grid_y = self.coords.view(1, 1, -1, 1)
        angle = rotated_x[..., None, None] * grid_x + rotated_y[..., None, None] * grid_y + phases[..., None, None]
        features = torch.sin(angle * (2 * math.pi)) * amplitudes[..., None, None]  # (N, C, H, W)
        weight = self.weight / math.sqrt(self.channels)
        # einsum hands back a permuted (channels-last) view; one fixed layout for every layer
        # keeps compiled graphs from specialising on strides
        return torch.einsum("nchw,oc->nohw", features, weight).contiguous(memory_format=self.memory_format)


class SynthesisLayer(nn.Module):
    """Modulated conv, then bias + filtered leaky ReLU that moves the map to the next band."""

    def __init__(self, config: StyleGAN3Config, spec: LayerSpec) -> None:
        super().__init__()
        self.is_torgb = spec.is_torgb
        self.in_channels = spec.before.channels
        self.conv_kernel = 1 if spec.is_torgb else config.conv_kernel
        self.conv_clamp = config.conv_clamp
        self.recompute = config.recompute
        self.checkpoint: CheckpointFunction = torch_checkpoint
        """How `recompute` keeps only inputs; the target replaces it (`use_activation_checkpoint`)."""
        self.grouped_modconv = config.grouped_modconv
        self.fir_matmul = config.fir_matmul
        self.lrelu_kernel = config.lrelu_kernel
        self.fused_lrelu = False
        """Whether the fused Triton kernel runs; `select_lrelu` decides once the device is known."""
        self.lrelu_path = "plain"
        self.lrelu_note: str | None = None
        """Why the plain ops run although the Triton kernel was asked for."""
        self.affine = FullyConnected(config.w_dim, self.in_channels, bias_init=1.0)
        self.weight = nn.Parameter(torch.randn(spec.after.channels, self.in_channels, self.conv_kernel, self.conv_kernel))
        self.bias = nn.Parameter(torch.zeros(spec.after.channels))
        self.register_buffer("magnitude_ema", torch.ones([]))

        in_rate, out_rate = spec.before.sampling_rate, spec.after.sampling_rate
        tmp_rate = max(in_rate, out_rate) * (1 if spec.is_torgb else config.lrelu_upsampling)
        self.up = int(np.rint(tmp_rate / in_rate))
        self.down = int(np.rint(tmp_rate / out_rate))
        up_taps = config.filter_size * self.up if self.up > 1 and not spec.is_torgb else 1
        down_taps = config.filter_size * self.down if self.down > 1 and not spec.is_torgb else 1
        up_filter = design_lowpass_filter(up_taps, spec.before.cutoff, spec.before.half_width * 2, tmp_rate)
        down_filter = design_lowpass_filter(
            down_taps,
            spec.after.cutoff,
            spec.after.half_width * 2,
            tmp_rate,
            radial=config.radial_filters and not spec.is_critically_sampled,
        )
        self.register_buffer("up_filter", up_filter)
        self.register_buffer("down_filter", down_filter)
        # the fused kernel takes 1-D filters as numbers (reading a device buffer would sync)
        self.up_taps = (1.0,) if up_filter is None or up_filter.ndim != 1 else tuple(up_filter.tolist())
        self.down_taps = (1.0,) if down_filter is None or down_filter.ndim != 1 else tuple(down_filter.tolist())
        # Pad so that out_size pixels remain after up, filter, filter, down; centred as in the paper.
        pad_total = (spec.after.size - 1) * self.down + 1
        pad_total -= (spec.before.size + self.conv_kernel - 1) * self.up
        pad_total += up_taps + down_taps - 2
        pad_before = (pad_total + self.up) // 2
        self.padding = as_padding((pad_before, pad_total - pad_before, pad_before, pad_total - pad_before))
        self.gain = 1.0 if spec.is_torgb else math.sqrt(2.0)
        self.slope = 1.0 if spec.is_torgb else 0.2

    def select_lrelu(self, device: torch.device) -> str:
        """Choose the filtered leaky ReLU's kernels for `device`; returns "triton" or "plain"."""
        self.fused_lrelu, self.lrelu_note = False, None
        if self.lrelu_kernel == "triton" and not self.is_torgb:
            from trainspeed.workloads.stylegan3 import triton_lrelu

            self.lrelu_note = triton_lrelu.unavailable_reason(device, self.up_filter, self.down_filter)
            self.fused_lrelu = self.lrelu_note is None
        self.lrelu_path = "triton" if self.fused_lrelu else "plain"
        return self.lrelu_path

    def _fused_activation(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        from trainspeed.workloads.stylegan3 import triton_lrelu

        return triton_lrelu.filtered_lrelu(
            x, bias, self.up_taps, self.down_taps, self.up, self.down, self.padding,
            gain=self.gain, slope=self.slope, clamp=self.conv_clamp,
        )  # fmt: skip

    def _activation(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return filtered_lrelu(
            x, self.up_filter, self.down_filter, bias, self.up, self.down, self.padding,
            gain=self.gain, slope=self.slope, clamp=self.conv_clamp, matmul=self.fir_matmul,
        )  # fmt: skip

    def _layer(self, x: torch.Tensor, w: torch.Tensor, input_gain: torch.Tensor) -> torch.Tensor:
        styles = self.affine(w)
        if self.is_torgb:
            styles = styles / math.sqrt(self.in_channels * self.conv_kernel**2)
        x = modulated_conv2d(
            x, self.weight, styles, demodulate=not self.is_torgb, padding=self.conv_kernel - 1,
            input_gain=input_gain, grouped=self.grouped_modconv,
        )  # fmt: skip
        if self.fused_lrelu:  # keeps only its sign mask for backward: nothing to recompute
            return self._fused_activation(x, self.bias)
        if self.recompute == "activation" and not self.is_torgb:
            return recompute(self._activation, x, self.bias, checkpoint=self.checkpoint)
        return self._activation(x, self.bias)

    def forward(self, x: torch.Tensor, w: torch.Tensor, magnitude_ema_beta: float | None = None) -> torch.Tensor:
        if magnitude_ema_beta is not None:
            with torch.no_grad():
                magnitude = x.detach().float().square().mean()
                self.magnitude_ema.copy_(magnitude.lerp(self.magnitude_ema, magnitude_ema_beta))
        input_gain = self.magnitude_ema.rsqrt()
        if self.recompute == "layer":
            return recompute(self._layer, x, w, input_gain, checkpoint=self.checkpoint)
        return self._layer(x, w, input_gain)


class SynthesisNetwork(nn.Module):
    def __init__(self, config: StyleGAN3Config) -> None:
        super().__init__()
        self.output_scale = config.output_scale
        self.input = SynthesisInput(config.w_dim, synthesis_bands(config)[0], channels_last=config.channels_last)
        self.layers = nn.ModuleList(SynthesisLayer(config, spec) for spec in synthesis_layers(config))

    def select_kernels(self, device: torch.device) -> str:
        """Choose each layer's kernels for `device`: "triton" where every layer with a filtered leaky
        ReLU runs the fused kernel, "plain" where none does, "mixed" otherwise."""
        paths = {layer.select_lrelu(device) for layer in self.layers if not layer.is_torgb}
        return paths.pop() if len(paths) == 1 else "mixed"

    def forward(
        self, ws: torch.Tensor, magnitude_ema_beta: float | None = None, translate: torch.Tensor | None = None
    ) -> torch.Tensor:
        ws = ws.float().unbind(dim=1)
        x = self.input(ws[0], translate=translate)
        for layer, w in zip(self.layers, ws[1:]):
            x = layer(x, w, magnitude_ema_beta)
        return (x * self.output_scale).float()


class Generator(nn.Module):
    def __init__(self, config: StyleGAN3Config) -> None:
        super().__init__()
        self.z_dim = config.z_dim
        self.resolution = config.resolution
        self.mapping = MappingNetwork(config)
        self.synthesis = SynthesisNetwork(config)

    def forward(self, z: torch.Tensor, magnitude_ema_beta: float | None = None) -> torch.Tensor:
        """Images in about [-1, 1], (N, 3, R, R), float32."""
        ws = self.mapping(z, update_w_avg=magnitude_ema_beta is not None)
        return self.synthesis(ws, magnitude_ema_beta=magnitude_ema_beta)
