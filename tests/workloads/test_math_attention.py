"""Attention computed as its math within a block, in the calling thread, without the process-wide
backend flags that `sdpa_kernel` sets."""

import pytest
import torch
import torch.nn.functional as F

from trainspeed.workloads.math_attention import MathAttention


def _backend_flags() -> tuple[bool, ...]:
    backends = torch.backends.cuda
    return (backends.flash_sdp_enabled(), backends.mem_efficient_sdp_enabled(), backends.math_sdp_enabled(),
            backends.cudnn_sdp_enabled())


@pytest.mark.parametrize("causal", [False, True])
def test_attention_in_the_block_is_the_math_backends_and_its_gradients_flow(causal):
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(2, 3, 5, 8, generator=generator, requires_grad=True) for _ in range(3))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(query, key, value, is_causal=causal)
    before = _backend_flags()
    with MathAttention():
        assert _backend_flags() == before
        output = F.scaled_dot_product_attention(query, key, value, is_causal=causal)
    torch.testing.assert_close(output, expected)
    output.sum().backward()
    assert all(tensor.grad is not None and torch.isfinite(tensor.grad).all() for tensor in (query, key, value))
