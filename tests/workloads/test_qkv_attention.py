"""`trainspeed::qkv_attention` is multi-head attention from a packed q/k/v projection on every
torch target: the same outputs and gradients as the view/transpose/SDPA it replaces, one graph
under torch.compile, and a shape it cannot split refused in one line."""

from __future__ import annotations

import pytest
import torch

from trainspeed.workloads.mahjong.model import PolicyConfig
from trainspeed.workloads.qkv_attention import qkv_attention


def _by_hand(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    batch, tokens, width = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
    q, k, v = (t.reshape(batch, tokens, heads, -1).transpose(1, 2) for t in qkv.split(width, dim=2))
    weights = (q @ k.transpose(-2, -1) / (width // heads) ** 0.5).softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, tokens, width)


def test_outputs_and_gradients_are_those_of_attention_written_out() -> None:
    qkv = torch.randn(3, 34, 3 * 4 * 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
    probe = torch.randn(3, 34, 4 * 8, generator=torch.Generator().manual_seed(1))
    out = qkv_attention(qkv, 4)
    (grad,) = torch.autograd.grad((out * probe).sum(), qkv)
    leaf = qkv.detach().requires_grad_()
    expected = _by_hand(leaf, 4)
    (expected_grad,) = torch.autograd.grad((expected * probe).sum(), leaf)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-6)
    assert not torch.equal(grad, torch.zeros_like(grad))


def test_torch_compile_captures_it_in_one_graph() -> None:
    qkv = torch.randn(2, 5, 3 * 2 * 4, generator=torch.Generator().manual_seed(2))
    compiled = torch.compile(lambda x: qkv_attention(x, 2) * 2, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(qkv), qkv_attention(qkv, 2) * 2)


def test_a_projection_it_cannot_split_into_heads_is_refused() -> None:
    with pytest.raises(ValueError, match=r"qkv of shape \(2, 5, 20\) is not \(batch, tokens, 3 x heads x dim\) for 3 heads"):
        qkv_attention(torch.zeros(2, 5, 20), 3)


def test_the_fused_attention_has_no_dropout() -> None:
    with pytest.raises(ValueError, match="'fused-qkv' has no dropout"):
        PolicyConfig(width=64, blocks=1, heads=2, dropout=0.1, attention="fused-qkv")
