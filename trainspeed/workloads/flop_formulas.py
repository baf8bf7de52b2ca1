"""The FLOPs of one dispatched op: torch's formula where `torch.utils.flop_counter` has a right one,
else ours, for the ops it has none for or counts wrong.

`aten.convolution_backward` of a grouped convolution: torch's formula (2.9) counts the weight's
gradient as a convolution over the whole input and output channels, which multiplies a grouped
convolution's by its groups. A depthwise 3x3 over 64 channels at 56x56 counts 235 MFLOPs of
backward against the 7 MFLOPs it does, and timm's efficientnet_b0 counted 32 GFLOPs a sample for a
training step of 2.3. Each half of a convolution's backward (the input's gradient, the weight's)
makes one multiply-add for each of the forward's, so ours counts the forward's FLOPs once per half
asked for; for an ungrouped convolution it is torch's count.

`aten._grouped_mm` is a mixture-of-experts layer's expert matmuls in one op (torch 2.8 and later):
one matmul per group, the groups cut along one dimension at `offs` (each group's end; the first
starts at 0). torch's counter has no formula for it, so an MoE model's experts counted nothing and
the bench's FLOPs check warned about a declared count that was right. Its forward and both halves
of its backward are this one op, in three layouts:

| a | b | groups along | FLOPs |
|---|---|---|---|
| (M, K) | (G, K, N) | M, the rows of a (tokens) | 2 K N sum(M_g) |
| (G, M, K) | (K, N) | N, the columns of b | 2 M K sum(N_g) |
| (M, K) | (K, N) | K, the contraction (out: G, M, N) | 2 M N sum(K_g) |
| (G, M, K) | (G, K, N) | the batch (no offs) | 2 G M N K |

sum over the groups = `offs[-1]`: rows past the last group's end are not multiplied. Where the
offsets hold no values (meta tensors: the bench counts on the meta device first), every row is
taken to be in a group, as an MoE layer routes every token.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils.flop_counter import conv_flop_count, flop_registry

Formula = Callable[..., int]


def _grouped_extent(offs: torch.Tensor | None, full: int) -> int:
    """The rows (or columns) that the groups cover: the last group's end, or all of them where
    the offsets hold no values."""
    if offs is None or offs.is_meta:
        return full
    return int(offs[-1]) if offs.numel() else 0


def grouped_mm_flops(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None, *args: Any,
                     out_val: Any = None, **kwargs: Any) -> int:
    """2 x M x N x K summed over the groups of `torch._grouped_mm(a, b, offs=offs)`."""
    if a.dim() == 2 and b.dim() == 3:
        (rows, k), (_, _, n) = a.shape, b.shape
        return 2 * _grouped_extent(offs, rows) * k * n
    if a.dim() == 3 and b.dim() == 2:
        (_, m, k), (_, columns) = a.shape, b.shape
        return 2 * m * k * _grouped_extent(offs, columns)
    if a.dim() == 2 and b.dim() == 2:
        (m, inner), (_, n) = a.shape, b.shape
        return 2 * m * n * _grouped_extent(offs, inner)
    (groups, m, k), (_, _, n) = a.shape, b.shape
    return 2 * groups * m * n * k


def convolution_backward_flops(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                               bias_sizes: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
                               output_padding: Any, groups: int, output_mask: Any, *args: Any, out_val: Any = None,
                               **kwargs: Any) -> int:
    """The forward convolution's FLOPs for each gradient asked for (the input's, the weight's)."""
    forward = conv_flop_count(list(input.shape), list(weight.shape), list(grad_output.shape), transposed)
    return forward * (bool(output_mask[0]) + bool(output_mask[1]))


CORRECTED_FORMULAS: dict[Any, Formula] = {torch.ops.aten.convolution_backward: convolution_backward_flops}
"""Formulas for ops torch's counter counts wrong, by op: they come before torch's."""
OWN_FORMULAS: dict[Any, Formula] = (
    {torch.ops.aten._grouped_mm: grouped_mm_flops} if hasattr(torch.ops.aten, "_grouped_mm") else {})
"""Formulas for ops torch's counter has none for, by op (torch's own, where it has one, comes first)."""


def flop_formula(func: Any) -> Formula | None:
    """The formula of a dispatched op (`formula(*args, **kwargs, out_val=out)` gives its FLOPs), or
    None: an op that does no counted work (elementwise ops, normalisations, copies)."""
    packet = func._overloadpacket
    return CORRECTED_FORMULAS.get(packet) or flop_registry.get(packet) or OWN_FORMULAS.get(packet)
