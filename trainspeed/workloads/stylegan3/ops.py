"""StyleGAN3's kernels written with plain PyTorch ops (conv2d, conv_transpose2d, elementwise).

The official code runs these as custom CUDA kernels; on a current stack those no longer build,
and its plain-op fallback materialises zero-inserted tensors and keeps every intermediate for
backward. Here:
  * FIR resampling never inserts zeros: upsampling is a depthwise transposed convolution with the
    up factor as stride, downsampling a depthwise convolution with the down factor as stride, and
    1-D filters run as two 1-D passes (K + K instead of K * K multiply-adds per pixel).
  * Two small autograd Functions keep fewer tensors for backward than plain autograd would:
    leaky ReLU + gain + clamp keeps only its output (its backward is differentiable again, as
    R1's double backward through D needs), and the modulated convolution keeps only its input
    and output (first-order only: nothing differentiates through G twice).
  * Everything else is conv2d, conv_transpose2d and elementwise ops, which XLA and torch.compile
    lower without graph breaks.
  * `recompute` re-runs a memory-heavy piece in backward instead of keeping its intermediates.

Conventions follow the published definitions: filtering is a true convolution (the filter is
flipped), padding is applied after upsampling and may be negative (a crop), and `padding` is
(x_before, x_after, y_before, y_after).
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, ContextManager, Sequence

import torch
import torch.nn.functional as F

from trainspeed.workloads.base import CheckpointFunction

Padding = tuple[int, int, int, int]


def as_padding(padding: int | Sequence[int]) -> Padding:
    """One int for all sides, (x, y), or (x0, x1, y0, y1)."""
    if isinstance(padding, int):
        return (padding, padding, padding, padding)
    values = tuple(int(p) for p in padding)
    if len(values) == 2:
        return (values[0], values[0], values[1], values[1])
    if len(values) == 4:
        return values  # type: ignore[return-value]
    raise ValueError(f"padding must have 1, 2 or 4 values, got {padding!r}")


def _pad_or_crop(x: torch.Tensor, dim: int, before: int, after: int) -> torch.Tensor:
    """Zero-pad (positive) or crop (negative) one spatial dim; explicit slices lower everywhere."""
    if before < 0 or after < 0:
        start = max(-before, 0)
        stop = x.shape[dim] - max(-after, 0)
        x = x.narrow(dim, start, stop - start)
    if before > 0 or after > 0:
        pads = [0, 0, 0, 0]
        side = 0 if dim == x.ndim - 1 else 2
        pads[side], pads[side + 1] = max(before, 0), max(after, 0)
        x = F.pad(x, pads)
    return x


def _resample(
    x: torch.Tensor, kernel: torch.Tensor, up: tuple[int, int], down: tuple[int, int], padding: Padding
) -> torch.Tensor:
    """One depthwise FIR pass: `kernel` is (Kh, Kw), already scaled, in true-convolution order.

    Upsampling by u with a K-tap filter equals the full transposed convolution y (length
    (n - 1) * u + K) read from index K - 1 - pad_before, so the zero-inserted signal is never built.
    """
    channels = x.shape[1]
    kernel_h, kernel_w = kernel.shape
    weight = kernel.to(x.dtype).view(1, 1, kernel_h, kernel_w).expand(channels, 1, kernel_h, kernel_w)
    px0, px1, py0, py1 = padding
    if up != (1, 1):
        height, width = x.shape[2], x.shape[3]
        x = F.conv_transpose2d(x, weight, stride=up, groups=channels)
        x = _pad_or_crop(x, 3, px0 - (kernel_w - 1), up[1] + px1 - kernel_w)
        x = _pad_or_crop(x, 2, py0 - (kernel_h - 1), up[0] + py1 - kernel_h)
        assert x.shape[2] == height * up[0] + py0 + py1 - kernel_h + 1
        assert x.shape[3] == width * up[1] + px0 + px1 - kernel_w + 1
        if down != (1, 1):
            x = x[:, :, :: down[0], :: down[1]]
        return x
    if px0 == px1 >= 0 and py0 == py1 >= 0:  # the conv pads: no padded copy kept for backward
        return F.conv2d(x, weight.flip([2, 3]), stride=down, padding=(py0, px0), groups=channels)
    x = _pad_or_crop(x, 3, px0, px1)
    x = _pad_or_crop(x, 2, py0, py1)
    return F.conv2d(x, weight.flip([2, 3]), stride=down, groups=channels)


def upfirdn2d(
    x: torch.Tensor,
    f: torch.Tensor | None,
    up: int = 1,
    down: int = 1,
    padding: int | Sequence[int] = 0,
    gain: float = 1.0,
) -> torch.Tensor:
    """Upsample by `up` (zero insertion), pad/crop, convolve with FIR `f`, keep every `down`-th pixel.

    `f` is 1-D (separable: applied along x, then y), 2-D, or None (a single unit tap). `gain` is the
    total gain of the 2-D operation (for an up-factor u, gain u**2 keeps the DC level).
    Output size per axis: (n * up + pad_before + pad_after - taps) // down + 1.
    """
    pad = as_padding(padding)
    if f is None and up == 1 and down == 1:  # pad/crop and scale only: no convolution needed
        x = _pad_or_crop(_pad_or_crop(x, 3, pad[0], pad[1]), 2, pad[2], pad[3])
        return x * gain if gain != 1 else x
    if f is None:
        f = torch.ones(1, dtype=x.dtype, device=x.device)
    if f.ndim == 2:
        return _resample(x, f * gain, (up, up), (down, down), pad)
    axis_gain = math.sqrt(gain)
    taps = f * axis_gain
    x = _resample(x, taps.view(1, -1), (1, up), (1, down), (pad[0], pad[1], 0, 0))
    return _resample(x, taps.view(-1, 1), (up, 1), (down, 1), (0, 0, pad[2], pad[3]))


def resampling_matrix(
    size: int, taps: torch.Tensor, up: int, down: int, pad_before: int, pad_after: int
) -> torch.Tensor:
    """(out, size) matrix of one axis of upfirdn: out = M @ x along that axis.

    Zero insertion, padding/cropping, the (flipped) filter and the stride all fold into where the
    taps land, so resampling one axis becomes a dense matmul: more multiply-adds than the direct
    form, but on tensor cores and TPUs a matmul is often faster than a depthwise convolution.
    """
    kernel = taps.flip(0)
    num_taps = kernel.shape[0]
    out_size = (size * up + pad_before + pad_after - num_taps) // down + 1
    rows = torch.arange(out_size, device=taps.device).view(-1, 1)
    tap_index = torch.arange(num_taps, device=taps.device).view(1, -1)
    position = rows * down + tap_index - pad_before  # index into the zero-inserted signal
    valid = (position >= 0) & (position < size * up) & (position % up == 0)
    columns = torch.where(valid, position // up, torch.zeros_like(position))
    values = torch.where(valid, kernel.view(1, -1).expand(out_size, -1), torch.zeros((), dtype=taps.dtype, device=taps.device))
    matrix = torch.zeros(out_size, size, dtype=taps.dtype, device=taps.device)
    return matrix.scatter_add(1, columns, values)


def upfirdn2d_matmul(
    x: torch.Tensor,
    f: torch.Tensor | None,
    up: int = 1,
    down: int = 1,
    padding: int | Sequence[int] = 0,
    gain: float = 1.0,
) -> torch.Tensor:
    """`upfirdn2d` for a separable (1-D) filter as two matmuls: x @ Mx^T, then My @ x."""
    pad = as_padding(padding)
    if f is None:
        f = torch.ones(1, dtype=x.dtype, device=x.device)
    if f.ndim != 1:
        raise ValueError("upfirdn2d_matmul needs a 1-D (separable) filter")
    taps = (f * math.sqrt(gain)).to(x.dtype)
    along_x = resampling_matrix(x.shape[3], taps, up, down, pad[0], pad[1])
    along_y = resampling_matrix(x.shape[2], taps, up, down, pad[2], pad[3])
    return torch.matmul(along_y, torch.matmul(x, along_x.t()))


class _LeakyReluGainClamp(torch.autograd.Function):
    """clamp(leaky_relu(x) * gain, -clamp, clamp), keeping only its output for backward.

    The derivative is gain (output > 0), gain * slope (output <= 0) or 0 (clamped), all readable
    from the output, so neither the input nor the intermediate products are kept: plain autograd
    would hold two more activation-sized tensors per layer. The backward is made of ordinary ops
    on the incoming gradient, so it can itself be differentiated (R1's double backward).
    """

    @staticmethod
    def forward(ctx, x, slope: float, gain: float, clamp: float | None):
        y = F.leaky_relu(x, slope) * gain
        if clamp is not None:
            y = y.clamp(-clamp, clamp)
        ctx.slope, ctx.gain, ctx.clamp = slope, gain, clamp
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (y,) = ctx.saved_tensors
        factor = torch.where(y > 0, ctx.gain, ctx.gain * ctx.slope).to(grad_y.dtype)
        if ctx.clamp is not None:
            factor = factor * (y.abs() < ctx.clamp).to(grad_y.dtype)
        return grad_y * factor, None, None, None


def leaky_relu_gain_clamp(x: torch.Tensor, slope: float, gain: float, clamp: float | None) -> torch.Tensor:
    if gain <= 0:
        raise ValueError(f"gain must be positive (the backward reads signs from the output), got {gain}")
    return _LeakyReluGainClamp.apply(x, slope, gain, clamp)


def bias_act(
    x: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str = "linear",
    slope: float = 0.2,
    gain: float | None = None,
    clamp: float | None = None,
) -> torch.Tensor:
    """Add a per-channel bias, apply linear or leaky ReLU, scale by `gain`, clamp to +-`clamp`.

    The default gain keeps unit variance for a unit-variance input (sqrt 2 for leaky ReLU).
    """
    if bias is not None:
        x = x + bias.to(x.dtype).view(1, -1, *([1] * (x.ndim - 2)))
    if activation == "lrelu":
        return leaky_relu_gain_clamp(x, slope, math.sqrt(2.0) if gain is None else gain, clamp)
    if activation != "linear":
        raise ValueError(f"unknown activation {activation!r}: use 'linear' or 'lrelu'")
    if gain is not None and gain != 1:
        x = x * gain
    if clamp is not None:
        x = x.clamp(-clamp, clamp)
    return x


def filtered_lrelu(
    x: torch.Tensor,
    up_filter: torch.Tensor | None,
    down_filter: torch.Tensor | None,
    bias: torch.Tensor | None = None,
    up: int = 1,
    down: int = 1,
    padding: int | Sequence[int] = 0,
    gain: float = math.sqrt(2.0),
    slope: float = 0.2,
    clamp: float | None = None,
    matmul: bool = False,
) -> torch.Tensor:
    """Bias, upsample with `up_filter`, leaky ReLU (gain, clamp), downsample with `down_filter`.

    The nonlinearity runs at the higher rate so that the new frequencies it creates can be filtered
    out before returning to the layer's own rate (the alias-free activation of StyleGAN3).
    `matmul=True` resamples with `upfirdn2d_matmul` where a filter is 1-D (same result).
    """

    def resample(t: torch.Tensor, f: torch.Tensor | None, **kwargs) -> torch.Tensor:
        use_matmul = matmul and (f is None or f.ndim == 1) and (f is not None or kwargs.get("up", 1) > 1)
        return upfirdn2d_matmul(t, f, **kwargs) if use_matmul else upfirdn2d(t, f, **kwargs)

    x = bias_act(x, bias)
    x = resample(x, up_filter, up=up, padding=padding, gain=up**2)
    x = bias_act(x, activation="lrelu" if slope != 1 else "linear", slope=slope, gain=gain, clamp=clamp)
    return resample(x, down_filter, down=down)


def demodulation_coefficients(weight: torch.Tensor, styles: torch.Tensor) -> torch.Tensor:
    """(N, O): 1 / the norm of each sample's modulated filter, without building (N, O, I, k, k)."""
    weight_energy = weight.square().sum(dim=[2, 3])  # (O, I)
    return (styles.square() @ weight_energy.t() + 1e-8).rsqrt()


AUTOCAST_DEVICE_TYPES = ("cpu", "cuda", "xla", "xpu", "mps", "hpu", "jax")
"""Devices with an autocast mode (a constant: torch's availability query stops torch.compile)."""


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    device_type = x.device.type
    if device_type in AUTOCAST_DEVICE_TYPES and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype  # no autocast here (or a device without it, e.g. meta while counting FLOPs)


def _without_autocast(device_type: str) -> ContextManager:
    if device_type in AUTOCAST_DEVICE_TYPES:
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


class _ScaledConv2d(torch.autograd.Function):
    """y = conv2d(x * s, w) * d, keeping only x and y for backward.

    Plain autograd would keep x, x * s, conv2d(x * s, w) and y: four activation-sized tensors per
    layer. Here x * s is recomputed (one multiply), conv2d(x * s, w) is recovered as y / d (d is a
    positive demodulation scale), and y is the very tensor the next op keeps anyway.
    """

    @staticmethod
    def forward(ctx, x, weight, styles, out_scale, padding: int):
        dtype = _compute_dtype(x)
        with _without_autocast(x.device.type):
            scaled = x.to(dtype) * styles.to(dtype)[:, :, None, None]
            y = F.conv2d(scaled, weight.to(dtype), padding=padding)
            if out_scale is not None:
                y = y * out_scale.to(dtype)[:, :, None, None]
        ctx.padding = padding
        ctx.input_dtypes = (x.dtype, weight.dtype, styles.dtype, None if out_scale is None else out_scale.dtype)
        ctx.save_for_backward(x, weight, styles, out_scale, y)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, styles, out_scale, y = ctx.saved_tensors
        dtype = y.dtype
        sum_dtype = torch.promote_types(dtype, torch.float32)  # bf16 activations, fp32 sums
        grad_y = grad_y.to(dtype)
        grad_out_scale = None
        grad_conv = grad_y
        if out_scale is not None:
            scale = out_scale.to(dtype)[:, :, None, None]
            if ctx.needs_input_grad[3]:
                grad_out_scale = (grad_y * (y / scale)).sum(dim=[2, 3], dtype=sum_dtype)
            grad_conv = grad_y * scale
        scaled = x.to(dtype) * styles.to(dtype)[:, :, None, None]
        weight_c = weight.to(dtype)
        grad_weight = grad_x = grad_styles = None
        if ctx.needs_input_grad[1]:
            grad_weight = torch.nn.grad.conv2d_weight(scaled, weight_c.shape, grad_conv, padding=ctx.padding)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[2]:
            grad_scaled = torch.nn.grad.conv2d_input(scaled.shape, weight_c, grad_conv, padding=ctx.padding)
            if ctx.needs_input_grad[0]:
                grad_x = grad_scaled * styles.to(dtype)[:, :, None, None]
            if ctx.needs_input_grad[2]:
                grad_styles = (grad_scaled * x.to(dtype)).sum(dim=[2, 3], dtype=sum_dtype)
        x_dtype, weight_dtype, styles_dtype, scale_dtype = ctx.input_dtypes
        return (
            None if grad_x is None else grad_x.to(x_dtype),
            None if grad_weight is None else grad_weight.to(weight_dtype),
            None if grad_styles is None else grad_styles.to(styles_dtype),
            None if grad_out_scale is None else grad_out_scale.to(scale_dtype),
            None,
        )


def modulated_conv2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    styles: torch.Tensor,
    demodulate: bool = True,
    padding: int = 0,
    input_gain: torch.Tensor | None = None,
    grouped: bool = False,
) -> torch.Tensor:
    """Convolve each sample with its own style-scaled (and demodulated) copy of `weight`.

    x (N, I, H, W), weight (O, I, k, k), styles (N, I). `grouped=False` scales the activations
    instead of the weights (conv(x * s, w) * d): one ordinary batched convolution, which vendor
    libraries and XLA run much faster than a convolution with N groups, with a backward that keeps
    no extra activations; `grouped=True` builds the per-sample weights (the official formulation).
    """
    batch, in_channels = x.shape[0], x.shape[1]
    out_channels, _, kh, kw = weight.shape
    if demodulate:  # scale-free pre-normalisation keeps fp16/bf16 products in range
        weight = weight * weight.square().mean(dim=[1, 2, 3], keepdim=True).rsqrt()
        styles = styles * styles.square().mean().rsqrt()
    out_scale = demodulation_coefficients(weight, styles) if demodulate else None
    if input_gain is not None:
        styles = styles * input_gain
    if not grouped:
        return _ScaledConv2d.apply(x, weight, styles, out_scale, padding)
    per_sample = weight.unsqueeze(0) * styles.view(batch, 1, in_channels, 1, 1)
    if out_scale is not None:
        per_sample = per_sample * out_scale.view(batch, out_channels, 1, 1, 1)
    per_sample = per_sample.reshape(batch * out_channels, in_channels, kh, kw)
    x = x.reshape(1, batch * in_channels, *x.shape[2:])
    x = F.conv2d(x, per_sample.to(x.dtype), padding=padding, groups=batch)
    return x.reshape(batch, out_channels, *x.shape[2:])


def torch_checkpoint(function: Callable[..., torch.Tensor], *args: torch.Tensor) -> torch.Tensor:
    """PyTorch's own activation checkpoint (what a target hands over unless its device needs another)."""
    import torch.utils.checkpoint as torch_checkpoint_module

    return torch_checkpoint_module.checkpoint(function, *args, use_reentrant=False)


def recompute(
    function: Callable[..., torch.Tensor], *args: torch.Tensor, checkpoint: CheckpointFunction = torch_checkpoint
) -> torch.Tensor:
    """Run `function` keeping only its inputs for backward; it runs again during backward.

    `checkpoint` is the device's way to do so (the target's `activation_checkpoint`: XLA needs its
    own, with optimisation barriers, or its compiler merges the recomputation with the forward)."""
    if not torch.is_grad_enabled():
        return function(*args)
    return checkpoint(function, *args)
