"""The plain-op kernels against direct, loop-based definitions, and their gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trainspeed.workloads.stylegan3.ops import bias_act, filtered_lrelu, modulated_conv2d, upfirdn2d, upfirdn2d_matmul


def reference_upfirdn2d(x, f, up, down, padding, gain=1.0):
    """Straight from the definition: zero-insert, pad/crop, true convolution, keep every down-th.

    Shift-and-add over the filter taps; no convolution op is involved.
    """
    if f is None:
        f = torch.ones(1, dtype=x.dtype)
    kernel = torch.outer(f, f) if f.ndim == 1 else f
    kernel = kernel * gain
    n, c, h, w = x.shape
    zero_inserted = torch.zeros(n, c, h * up, w * up, dtype=x.dtype)
    zero_inserted[:, :, ::up, ::up] = x
    px0, px1, py0, py1 = padding
    big = 64  # pad generously, then read the window that the (possibly negative) padding selects
    canvas = F.pad(zero_inserted, [big, big, big, big])
    padded = canvas[:, :, big - py0 : big + h * up + py1, big - px0 : big + w * up + px1]
    kh, kw = kernel.shape
    out_h = (padded.shape[2] - kh) // down + 1
    out_w = (padded.shape[3] - kw) // down + 1
    out = torch.zeros(n, c, out_h, out_w, dtype=x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            window = padded[:, :, ky : ky + (out_h - 1) * down + 1 : down, kx : kx + (out_w - 1) * down + 1 : down]
            out += kernel[kh - 1 - ky, kw - 1 - kx] * window  # flipped: a true convolution
    return out


CASES = [
    # up, down, taps, padding (x0, x1, y0, y1)
    (1, 1, 3, (1, 1, 1, 1)),
    (2, 1, 4, (2, 1, 3, 2)),
    (2, 1, 5, (-1, 2, 0, -2)),
    (4, 1, 8, (3, 4, -2, 1)),
    (1, 2, 4, (1, 1, 1, 1)),
    (1, 2, 7, (-1, 3, 2, 0)),
    (1, 4, 12, (5, 4, 6, 3)),
    (2, 2, 6, (2, 3, -1, 1)),
    (1, 1, 1, (-1, 2, 2, -1)),
]


@pytest.mark.parametrize("up,down,taps,padding", CASES)
@pytest.mark.parametrize("separable", [True, False])
def test_upfirdn2d_matches_direct_definition(up, down, taps, padding, separable):
    generator = torch.Generator().manual_seed(taps * 10 + up + down)
    x = torch.randn(2, 3, 7, 6, generator=generator, dtype=torch.float64)
    f = torch.randn(taps, generator=generator, dtype=torch.float64)
    if not separable:
        f = torch.randn(taps, taps, generator=generator, dtype=torch.float64)
    expected = reference_upfirdn2d(x, f, up, down, padding, gain=up**2)
    actual = upfirdn2d(x, f, up=up, down=down, padding=padding, gain=up**2)
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("up,down,taps,padding", CASES)
def test_matmul_upfirdn2d_matches_direct_definition(up, down, taps, padding):
    generator = torch.Generator().manual_seed(taps * 10 + up + down)
    x = torch.randn(2, 3, 7, 6, generator=generator, dtype=torch.float64)
    f = torch.randn(taps, generator=generator, dtype=torch.float64)
    expected = reference_upfirdn2d(x, f, up, down, padding, gain=up**2)
    actual = upfirdn2d_matmul(x, f, up=up, down=down, padding=padding, gain=up**2)
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)


def test_upfirdn2d_without_filter_only_pads_and_scales():
    x = torch.randn(1, 2, 4, 5, dtype=torch.float64)
    actual = upfirdn2d(x, None, padding=(1, -1, -2, 3), gain=3.0)
    torch.testing.assert_close(actual, reference_upfirdn2d(x, None, 1, 1, (1, -1, -2, 3), gain=3.0))


@pytest.mark.parametrize("up,down,taps,padding", [(2, 1, 4, (2, 1, 1, 2)), (1, 2, 5, (1, 2, -1, 2)), (4, 1, 3, (0, 1, 1, 0))])
def test_upfirdn2d_gradients(up, down, taps, padding):
    x = torch.randn(1, 2, 4, 5, dtype=torch.float64, requires_grad=True)
    f = torch.randn(taps, dtype=torch.float64)
    function = lambda t: upfirdn2d(t, f, up=up, down=down, padding=padding)  # noqa: E731
    assert torch.autograd.gradcheck(function, (x,))
    assert torch.autograd.gradgradcheck(function, (x,))  # R1 differentiates through D's resampling


def test_bias_act_gain_and_clamp():
    x = torch.tensor([[-4.0, -1.0, 0.5, 300.0]]).view(1, 4, 1, 1)
    bias = torch.tensor([1.0, 0.0, 0.0, 0.0])
    out = bias_act(x, bias, activation="lrelu", clamp=256.0).flatten()
    expected = torch.tensor([-3.0 * 0.2 * math.sqrt(2), -0.2 * math.sqrt(2), 0.5 * math.sqrt(2), 256.0])
    torch.testing.assert_close(out, expected)
    with pytest.raises(ValueError, match="unknown activation"):
        bias_act(x, activation="gelu")


def test_leaky_relu_gradients_to_second_order():
    """The output-only backward against finite differences; R1 differentiates it once more."""
    x = (torch.randn(2, 3, 4, 4, dtype=torch.float64) * 2).requires_grad_(True)
    bias = torch.randn(3, dtype=torch.float64, requires_grad=True)

    def function(t, b):
        return bias_act(t, b, activation="lrelu", gain=1.3, clamp=2.5)

    assert torch.autograd.gradcheck(function, (x, bias))
    assert torch.autograd.gradgradcheck(function, (x, bias))


@pytest.mark.parametrize("matmul", [False, True])
@pytest.mark.parametrize("up,down", [(2, 2), (4, 2), (2, 1), (1, 1)])
def test_filtered_lrelu_is_the_composition_of_its_parts(up, down, matmul):
    generator = torch.Generator().manual_seed(up * 7 + down)
    x = torch.randn(2, 3, 6, 6, generator=generator, dtype=torch.float64) * 3
    bias = torch.randn(3, generator=generator, dtype=torch.float64)
    fu = torch.randn(6 * up, generator=generator, dtype=torch.float64) if up > 1 else None
    fd = torch.randn(6 * down, generator=generator, dtype=torch.float64) if down > 1 else None
    padding = (5 + 6 * down, 4 + 6 * down, 6 + 6 * down, 3 + 6 * down)  # room for both filters
    actual = filtered_lrelu(x, fu, fd, bias, up=up, down=down, padding=padding, gain=1.5, slope=0.3, clamp=2.0, matmul=matmul)
    upsampled = reference_upfirdn2d(x + bias.view(1, -1, 1, 1), fu, up, 1, padding, gain=up**2)
    activated = torch.where(upsampled >= 0, upsampled, upsampled * 0.3) * 1.5
    expected = reference_upfirdn2d(activated.clamp(-2.0, 2.0), fd, 1, down, (0, 0, 0, 0))
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)


def test_filtered_lrelu_gradients():
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(2, dtype=torch.float64, requires_grad=True)
    fu, fd = torch.rand(4, dtype=torch.float64), torch.rand(4, dtype=torch.float64)
    function = lambda t, b: filtered_lrelu(t, fu, fd, b, up=2, down=2, padding=3, clamp=100.0)  # noqa: E731
    assert torch.autograd.gradcheck(function, (x, bias))


def loop_modulated_conv2d(x, weight, styles, demodulate, padding, input_gain):
    """One sample at a time, building that sample's weights explicitly."""
    outputs = []
    for sample, style in zip(x, styles):
        w = weight * style.view(1, -1, 1, 1)
        if demodulate:
            w = w / (w.square().sum(dim=[1, 2, 3], keepdim=True) + 1e-8).sqrt()
        outputs.append(F.conv2d(sample[None], w * input_gain, padding=padding))
    return torch.cat(outputs)


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("demodulate", [False, True])
def test_modulated_conv2d_matches_per_sample_loop(grouped, demodulate):
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(3, 4, 6, 6, generator=generator, dtype=torch.float64)
    weight = torch.randn(5, 4, 3, 3, generator=generator, dtype=torch.float64)
    styles = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    gain = torch.tensor(0.7, dtype=torch.float64)
    actual = modulated_conv2d(x, weight, styles, demodulate=demodulate, padding=2, input_gain=gain, grouped=grouped)
    expected = loop_modulated_conv2d(x, weight, styles, demodulate, 2, gain)
    # demodulation makes the official pre-normalisation of w and s cancel out; without it,
    # only the per-sample maths is compared
    torch.testing.assert_close(actual, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("demodulate", [False, True])
def test_modulated_conv2d_gradients(grouped, demodulate):
    """The activation-scaling path has a hand-written backward; both paths against finite differences."""
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    styles = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    gain = torch.tensor(0.8, dtype=torch.float64)

    def function(a, b, c):
        return modulated_conv2d(a, b, c, demodulate=demodulate, padding=1, input_gain=gain, grouped=grouped)

    assert torch.autograd.gradcheck(function, (x, weight, styles))


def test_modulated_conv2d_backward_under_bf16_autocast_matches_fp32():
    x = torch.randn(2, 8, 6, 6)
    weight = torch.randn(4, 8, 3, 3)
    styles = torch.randn(2, 8)
    grads = []
    for enabled in (False, True):
        inputs = [t.clone().requires_grad_(True) for t in (x, weight, styles)]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            out = modulated_conv2d(*inputs, padding=1)
        assert out.dtype == (torch.bfloat16 if enabled else torch.float32)
        out.float().square().sum().backward()
        grads.append([t.grad for t in inputs])
        assert all(t.grad.dtype == torch.float32 for t in inputs)
    for fp32, bf16 in zip(*grads):
        torch.testing.assert_close(bf16, fp32, rtol=0.1, atol=0.1 * fp32.abs().max().item())
