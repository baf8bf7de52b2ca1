"""A convolution's backward counts one forward's FLOPs for each gradient it computes, grouped or
not: torch's own formula counts a grouped convolution's weight gradient over every channel, and a
depthwise network (EfficientNet, MobileNet, ConvNeXt) was counted at many times its work."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from trainspeed.workloads.flops import FlopSum

BATCH, SIDE, KERNEL = 2, 12, 3


def _forward_by_hand(channels_in: int, channels_out: int, groups: int, side_out: int) -> int:
    """2 x (each output value's multiply-adds: the kernel over its group's input channels)."""
    return 2 * BATCH * channels_out * side_out * side_out * (channels_in // groups) * KERNEL * KERNEL


@pytest.mark.parametrize(("channels_in", "channels_out", "groups", "stride"),
                         [(16, 16, 16, 1), (16, 32, 4, 2), (8, 8, 1, 1)])
def test_forward_and_both_gradients_each_count_the_forward_s_multiply_adds(
        channels_in: int, channels_out: int, groups: int, stride: int) -> None:
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(BATCH, channels_in, SIDE, SIDE, generator=generator, requires_grad=True)
    weight = torch.randn(channels_out, channels_in // groups, KERNEL, KERNEL, generator=generator, requires_grad=True)
    with FlopSum() as forward:
        out = F.conv2d(images, weight, stride=stride, padding=1, groups=groups)
    with FlopSum() as backward:
        out.sum().backward()
    by_hand = _forward_by_hand(channels_in, channels_out, groups, out.shape[-1])
    assert forward.total == by_hand
    assert backward.total == 2 * by_hand


def test_a_gradient_not_asked_for_is_not_counted_and_an_ungrouped_one_is_torch_s_own_count() -> None:
    """A fixed filter (no weight gradient, as a FIR filter's) counts the input's gradient alone;
    with groups 1 the count is what torch's FlopCounterMode says."""
    images = torch.randn(BATCH, 8, SIDE, SIDE, requires_grad=True)
    fixed = torch.randn(8, 1, KERNEL, KERNEL)
    out = F.conv2d(images, fixed, padding=1, groups=8)
    with FlopSum() as backward:
        out.sum().backward()
    assert backward.total == _forward_by_hand(8, 8, 8, SIDE)
    weight = torch.randn(4, 8, KERNEL, KERNEL, requires_grad=True)  # 8 to 4 channels, or 4 to 8 transposed
    for conv, channels in ((F.conv2d, 8), (F.conv_transpose2d, 4)):
        source = torch.randn(BATCH, channels, SIDE, SIDE, requires_grad=True)
        with FlopSum() as ours:
            conv(source, weight, stride=2).sum().backward()
        with FlopCounterMode(display=False) as torch_s:
            conv(source, weight, stride=2).sum().backward()
        assert ours.total == torch_s.get_total_flops() > 0
