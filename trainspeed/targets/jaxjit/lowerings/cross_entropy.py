"""`trainspeed.workloads.linear_cross_entropy` over chunks of tokens.

The loss of a language model over a large vocabulary holds, written out, every token's logits at
once and as much again for their gradient (GPT-2 at 32 x 1,024 tokens: 6.6 GB in float32 each).
Here the tokens are cut into chunks of at most CHUNK_BYTES of float32 logits, and a scan takes
one chunk at a time: its logits, their log-sum-exp and the label's logit, recomputed in the
backward pass (`jax.checkpoint`), so the program holds one chunk's logits. Under bf16 the product
runs in bf16 with float32 accumulation and the softmax in float32, as autocast runs the
unchunked loss (torchax's autocast casts the function's tensors, `register`).
"""

from __future__ import annotations

from typing import Any

CHUNK_BYTES = 512 * 1024 * 1024
"""Float32 logits per chunk: a few hundred MB keeps each chunk's product large for the matmul units."""
TOKEN_MULTIPLE = 128


def chunk_tokens(tokens: int, vocabulary: int) -> int:
    """Tokens per chunk: as many as CHUNK_BYTES of float32 logits hold, a multiple of 128, at most all."""
    per_chunk = max(TOKEN_MULTIPLE, (CHUNK_BYTES // (4 * vocabulary)) // TOKEN_MULTIPLE * TOKEN_MULTIPLE)
    return min(per_chunk, -(-tokens // TOKEN_MULTIPLE) * TOKEN_MULTIPLE)


def linear_cross_entropy(hidden: Any, weight: Any, bias: Any, labels: Any, ignore_index: int = -100) -> Any:
    """The mean loss over the labels kept. On a data-parallel mesh each device takes its own
    samples' chunks (`placement.per_device_batch`); the sums and counts are added after."""
    import functools

    from trainspeed.jaxrt.placement import per_device_batch

    summed = functools.partial(_summed, ignore_index=ignore_index)
    sums = per_device_batch(summed, (hidden, labels), (weight,) + (() if bias is None else (bias,)))
    return sums[:, 0].sum() / sums[:, 1].sum()


def _summed(hidden: Any, labels: Any, weight: Any, *bias: Any, ignore_index: int) -> Any:
    """[[the summed loss, the labels kept]] of these tokens, one chunk at a time; `bias`, where
    given, is the one array after the weight."""
    import jax
    import jax.numpy as jnp

    width, vocabulary = hidden.shape[-1], weight.shape[0]
    hidden, labels = hidden.reshape(-1, width), labels.reshape(-1).astype(jnp.int32)
    tokens = hidden.shape[0]
    size = chunk_tokens(tokens, vocabulary)
    chunks = -(-tokens // size)
    padding = chunks * size - tokens
    hidden = jnp.pad(hidden, ((0, padding), (0, 0))).reshape(chunks, size, width)
    labels = jnp.pad(labels, (0, padding), constant_values=ignore_index).reshape(chunks, size)

    @jax.checkpoint
    def chunk_loss(hidden_chunk: Any, label_chunk: Any) -> Any:
        logits = jnp.matmul(hidden_chunk, weight.T, preferred_element_type=jnp.float32)
        if bias:
            logits = logits + bias[0].astype(jnp.float32)
        kept = label_chunk != ignore_index
        picked = jnp.take_along_axis(logits, jnp.where(kept, label_chunk, 0)[:, None], axis=-1)[:, 0]
        return jnp.sum(jnp.where(kept, jax.nn.logsumexp(logits, axis=-1) - picked, 0.0))

    def step(total: Any, chunk: tuple[Any, Any]) -> tuple[Any, None]:
        return total + chunk_loss(*chunk), None

    total, _ = jax.lax.scan(step, jnp.zeros((), jnp.float32), (hidden, labels))
    counted = jnp.sum(labels != ignore_index).astype(jnp.float32)
    return jnp.stack([total, counted])[None]


def lowerings() -> dict[Any, Any]:
    """The function itself -> its chunked lowering; autocast casts its tensors to the lower precision
    (the product's inputs; labels are integers and stay)."""
    from torchax import amp

    from trainspeed.workloads.linear_cross_entropy import linear_cross_entropy as function

    amp.autocast_policy.setdefault(function, amp.CastPolicy.LOWER_PRECISION_FP)
    return {function: linear_cross_entropy}
