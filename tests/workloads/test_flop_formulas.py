"""A grouped matmul (`torch._grouped_mm`, a mixture-of-experts layer's experts in one op) counts
2 x M x N x K per group, which torch's FLOP counter has no formula for, forward and backward."""

from __future__ import annotations

import pytest
import torch

from trainspeed.workloads.flops import FlopSum

pytestmark = pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="torch has no grouped matmul before 2.8")

K, N = 8, 4
GROUP_ENDS = [3, 7, 9]
"""Three experts take rows 0-2, 3-6 and 7-8 of the ten; row 9 is in no group."""
BY_HAND = sum(2 * rows * K * N for rows in (3, 4, 2))
"""576: each group's rows x K x N, multiply-add as 2."""


def _grouped() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randn(10, K, generator=generator, requires_grad=True)
    experts = torch.randn(len(GROUP_ENDS), K, N, generator=generator, requires_grad=True)
    return tokens, experts, torch.tensor(GROUP_ENDS, dtype=torch.int32)


def test_the_groups_are_the_rows_up_to_each_end() -> None:
    """What the count rests on: group g multiplies its rows by expert g, and no row past the last end."""
    tokens, experts, offs = _grouped()
    out = torch._grouped_mm(tokens, experts, offs=offs)
    for expert, (start, end) in enumerate(zip([0, *GROUP_ENDS], GROUP_ENDS)):
        torch.testing.assert_close(out[start:end], tokens[start:end] @ experts[expert])


def test_a_grouped_matmul_counts_each_groups_matmul() -> None:
    tokens, experts, offs = _grouped()
    with FlopSum() as counter:
        torch._grouped_mm(tokens, experts, offs=offs)
    assert counter.total == BY_HAND


def test_its_backward_counts_the_two_grouped_matmuls_of_the_gradients() -> None:
    """The gradient of the tokens (grad x each expert transposed) and of the experts (each group's
    tokens transposed x grad, grouped along the contraction): one forward's FLOPs each."""
    tokens, experts, offs = _grouped()
    out = torch._grouped_mm(tokens, experts, offs=offs)
    with FlopSum() as counter:
        out.backward(torch.ones_like(out))
    assert counter.total == 2 * BY_HAND
    assert tokens.grad is not None and experts.grad is not None


def test_on_meta_every_row_is_in_a_group() -> None:
    """The bench counts on the meta device first, where the offsets hold no values: every token is
    taken to be routed to an expert. (Meta checks the layout of the CUDA kernel: bfloat16, rows of
    16 bytes, so 8 columns.)"""
    columns = 8
    tokens, experts, offs = (torch.empty(10, K, device="meta", dtype=torch.bfloat16),
                             torch.empty(len(GROUP_ENDS), K, columns, device="meta", dtype=torch.bfloat16),
                             torch.empty(len(GROUP_ENDS), device="meta", dtype=torch.int32))
    with FlopSum() as counter:
        torch._grouped_mm(tokens, experts, offs=offs)
    assert counter.total == 2 * 10 * K * columns
