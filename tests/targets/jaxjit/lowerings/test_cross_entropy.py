"""A language model's loss over chunks of tokens on the jax family: PyTorch's loss and gradients,
with ignored labels, a bias, and token counts that are no multiple of the chunk."""

from __future__ import annotations

import pytest
import torch
from torch_and_jax import assert_same

from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.workloads.linear_cross_entropy import linear_cross_entropy

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))

TOKENS, WIDTH, VOCABULARY = 7, 16, 300


def parts(with_bias: bool) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, TOKENS, WIDTH, generator=generator)
    weight = torch.randn(VOCABULARY, WIDTH, generator=generator) * 0.2
    labels = torch.randint(0, VOCABULARY, (2, TOKENS), generator=generator)
    labels[0, :3] = -100
    bias = torch.randn(VOCABULARY, generator=generator) if with_bias else None
    return hidden, weight, bias, labels


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("chunk_bytes", [None, 4 * VOCABULARY * 5], ids=["one chunk", "chunks of 5 tokens"])
def test_the_chunked_loss_matches_pytorch(monkeypatch: pytest.MonkeyPatch, with_bias: bool, chunk_bytes: int | None) -> None:
    from trainspeed.targets.jaxjit.lowerings import cross_entropy

    if chunk_bytes:
        monkeypatch.setattr(cross_entropy, "CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(cross_entropy, "TOKEN_MULTIPLE", 1)
        assert cross_entropy.chunk_tokens(2 * TOKENS, VOCABULARY) == 5
    hidden, weight, bias, labels = parts(with_bias)
    if bias is None:
        assert_same(lambda h, w, y: linear_cross_entropy(h, w, None, y), hidden, weight, labels)
    else:
        assert_same(lambda h, w, b, y: linear_cross_entropy(h, w, b, y), hidden, weight, bias, labels)


def test_chunks_hold_a_bounded_number_of_logits() -> None:
    from trainspeed.targets.jaxjit.lowerings.cross_entropy import CHUNK_BYTES, chunk_tokens

    assert chunk_tokens(32 * 1023, 50257) * 50257 * 4 <= CHUNK_BYTES
    assert chunk_tokens(100, 50257) == 128  # a small batch is one chunk, padded to the lanes
