"""`F.scaled_dot_product_attention` as one fused kernel on a TPU, and as XLA's attention elsewhere.

torchax lowers the function to its reference (two matmuls and a softmax, the scores stored in
HBM), or, behind a switch, to JAX's Pallas flash attention with every call taken as causal and
its mask, scale and dropout dropped. The attention of HF's models (their `sdpa` path) and of
timm's (`fused_attn`) reaches this function, so its lowering decides how a transformer's
attention runs on the chip.

Here, one function, chosen when the program is lowered (`jax.lax.platform_dependent`, so an
exported TPU program holds the kernel while the same step traced on this CPU runs XLA's):

- on a TPU, for sequences of KERNEL_FROM_KEYS keys or more, JAX's Pallas flash attention (`jax.experimental.pallas.ops.tpu.flash_attention`),
  which keeps the scores on chip. A causal call is the kernel's causal mode; a boolean mask that
  depends on the key alone (padding) becomes the kernel's segment ids; any other mask, boolean or
  additive (a bias), is the kernel's bias. Sequences whose length is no multiple of 128 (a ViT's
  197 tokens) are padded to one, the padded keys masked by segment ids, and the output cut back.
  Grouped-query attention repeats the key and value heads first.
- elsewhere, and on a TPU for what the kernel cannot take or does not speed up (attention
  dropout, a head wider than 128 and no multiple of it, a short sequence), the same attention in `jax.numpy`: scores accumulated in float32,
  softmax in float32, masks as PyTorch applies them (a boolean mask keeps where True; a float
  mask adds), dropout from the step's random key.
"""

from __future__ import annotations

import functools
import math
from typing import Any

LANES = 128
"""The kernel's block sizes are multiples of this; sequences are padded to it."""
KERNEL_FROM_KEYS = 512
"""The flash kernel runs where the keys are at least this many: on a TPU v5e, ViT-S/16's 197 tokens
(padded to 256) trained at 812 images/s at batch 256 through it, where its scores fit the chip's
fast memory under XLA's own attention."""
LARGEST_BLOCK = 512


def _as_4d(array: Any) -> tuple[Any, tuple[int, ...]]:
    """(batch, heads, tokens, width) from PyTorch's (..., tokens, width): leading dimensions folded
    into the batch (an unbatched call has one head axis only)."""
    lead = array.shape[:-2]
    if len(lead) == 1:
        return array[None], lead
    return array.reshape((math.prod(lead[:-1]), lead[-1]) + array.shape[-2:]), lead


def _mask_4d(mask: Any, lead: tuple[int, ...]) -> Any:
    """A mask as PyTorch broadcasts it against the scores, with the leading dimensions folded as
    `_as_4d` folds the query's."""
    import jax.numpy as jnp

    mask = mask.reshape((1,) * (len(lead) + 2 - mask.ndim) + mask.shape)
    if len(lead) == 1:
        return mask[None]
    if len(lead) == 2:
        return mask
    return jnp.broadcast_to(mask, lead[:-1] + mask.shape[-3:]).reshape((-1,) + mask.shape[-3:])


def _additive(mask: Any, dtype: Any, masked: float = -math.inf) -> Any:
    """A boolean mask (True keeps) as the bias PyTorch's math path adds (`masked` where False); a
    float mask as it is."""
    import jax.numpy as jnp

    if mask.dtype == jnp.bool_:
        return jnp.where(mask, 0.0, masked).astype(dtype)
    return mask.astype(dtype)


def attention_reference(query: Any, key: Any, value: Any, mask: Any, causal: bool, scale: float,
                        dropout_p: float = 0.0, dropout_key: Any = None) -> Any:
    """(batch, heads, tokens, width) attention in jax.numpy, softmax in float32."""
    import jax
    import jax.numpy as jnp

    scores = jnp.einsum("bhqd,bhkd->bhqk", query, key, preferred_element_type=jnp.float32) * scale
    if mask is not None:
        scores = scores + _additive(mask, jnp.float32)
    if causal:
        length_q, length_k = scores.shape[-2:]
        keep = jnp.arange(length_q)[:, None] >= jnp.arange(length_k)[None, :]
        scores = jnp.where(keep, scores, -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1)
    if dropout_p > 0:
        kept = jax.random.bernoulli(dropout_key, 1.0 - dropout_p, weights.shape)
        weights = jnp.where(kept, weights / (1.0 - dropout_p), 0.0)
    output = jnp.einsum("bhqk,bhkd->bhqd", weights.astype(value.dtype), value, preferred_element_type=jnp.float32)
    return output.astype(query.dtype)


def kernel_takes(query: Any, key: Any, dropout_p: float) -> bool:
    """Whether the flash kernel runs this call: no dropout, a head of at most 128 lanes or a
    multiple of them, as wide for keys as for queries, and KERNEL_FROM_KEYS keys or more."""
    width = query.shape[-1]
    return (dropout_p == 0 and key.shape[-1] == width and (width <= LANES or width % LANES == 0)
            and key.shape[-2] >= KERNEL_FROM_KEYS)


def _padded(length: int) -> int:
    return -(-length // LANES) * LANES


def _block(length: int) -> int:
    """The largest block up to LARGEST_BLOCK that divides a padded length."""
    block = min(LARGEST_BLOCK, length)
    while length % block:
        block //= 2
    return block


def _key_padding(mask: Any, length_q: int) -> Any | None:
    """The boolean mask as per-key flags (batch, keys) where it depends on the key alone (one row
    for every query and head), else None."""
    import jax.numpy as jnp

    if mask is None or mask.dtype != jnp.bool_ or mask.shape[-2] != 1 or mask.shape[1] != 1:
        return None
    return mask[:, 0, 0, :]


def _pad_tokens(array: Any, length: int) -> Any:
    import jax.numpy as jnp

    return jnp.pad(array, ((0, 0), (0, 0), (0, length - array.shape[2]), (0, 0)))


def attention_kernel(query: Any, key: Any, value: Any, mask: Any, causal: bool, scale: float) -> Any:
    """The TPU path: JAX's Pallas flash attention on (batch, heads, tokens, width) arrays. Masked
    places get float32's lowest value rather than -inf, so a padded row stays finite in the
    kernel's backward pass (a row PyTorch masks whole gives NaN; here it gives a uniform average)."""
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu import flash_attention as flash

    batch, heads, length_q, _ = query.shape
    length_k = key.shape[2]
    padded_q, padded_k = _padded(length_q), _padded(length_k)
    lowest = float(jnp.finfo(jnp.float32).min)
    key_flags = _key_padding(mask, length_q)
    bias = None
    if mask is not None and key_flags is None:
        bias = jnp.broadcast_to(_additive(mask, jnp.float32, lowest), (batch, heads, length_q, length_k))
        bias = jnp.pad(bias, ((0, 0), (0, 0), (0, padded_q - length_q), (0, padded_k - length_k)))
    segments = None
    if key_flags is not None or padded_k > length_k:
        real_keys = jnp.broadcast_to(True if key_flags is None else key_flags, (batch, length_k))
        segments = flash.SegmentIds(q=jnp.ones((batch, padded_q), jnp.int32),
                                    kv=jnp.pad(real_keys.astype(jnp.int32), ((0, 0), (0, padded_k - length_k))))
    query, key, value = _pad_tokens(query, padded_q), _pad_tokens(key, padded_k), _pad_tokens(value, padded_k)
    block_q, block_k = _block(padded_q), _block(padded_k)
    blocks = flash.BlockSizes(block_q=block_q, block_k_major=block_k, block_k=block_k, block_b=1,
                              block_q_major_dkv=block_q, block_k_major_dkv=block_k, block_k_dkv=block_k,
                              block_q_dkv=block_q, block_k_major_dq=block_k, block_k_dq=block_k, block_q_dq=block_q)
    output = flash.flash_attention(query, key, value, ab=bias, segment_ids=segments, causal=causal, sm_scale=scale,
                                   block_sizes=blocks)
    return output[:, :, :length_q]


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
                                 env: Any = None) -> Any:
    """PyTorch's `F.scaled_dot_product_attention` (module docstring)."""
    import jax
    import jax.numpy as jnp

    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    (query, lead), (key, _), (value, _) = _as_4d(query), _as_4d(key), _as_4d(value)
    if key.shape[1] != query.shape[1]:  # grouped-query attention (enable_gqa): each key head serves a group
        groups = query.shape[1] // key.shape[1]
        key, value = jnp.repeat(key, groups, axis=1), jnp.repeat(value, groups, axis=1)
    mask = None if attn_mask is None else _mask_4d(attn_mask, lead)
    causal = bool(is_causal)
    dropout_key = env.get_and_rotate_prng_key() if dropout_p > 0 else None
    reference = functools.partial(attention_reference, mask=mask, causal=causal, scale=scale, dropout_p=dropout_p,
                                  dropout_key=dropout_key)
    if kernel_takes(query, key, dropout_p):
        output = _kernel_or_reference(query, key, value, mask, causal=causal, scale=scale)
    else:
        output = reference(query, key, value)
    return output[0] if len(lead) == 1 else output.reshape(lead + output.shape[-2:])


def _kernel_or_reference(query: Any, key: Any, value: Any, mask: Any, *, causal: bool, scale: float) -> Any:
    """The kernel where the program is lowered for a TPU, XLA's attention elsewhere; per device on
    a data-parallel mesh (`placement.per_device_batch`), the mask beside the batch where it has one."""
    import jax

    from trainspeed.jaxrt.placement import per_device_batch

    def either(q: Any, k: Any, v: Any, *masks: Any) -> Any:
        given = masks[0] if masks else None
        return jax.lax.platform_dependent(
            q, k, v, tpu=lambda q, k, v: attention_kernel(q, k, v, mask=given, causal=causal, scale=scale),
            default=lambda q, k, v: attention_reference(q, k, v, mask=given, causal=causal, scale=scale))
    return per_device_batch(either, (query, key, value, *(() if mask is None else (mask,))))


def _lowered(*args: Any, env: Any = None, **kwargs: Any) -> Any:
    return scaled_dot_product_attention(*args, env=env, **kwargs)


_lowered.needs_env = True  # type: ignore[attr-defined]  # attention dropout draws the step's key


def lowerings() -> dict[Any, Any]:
    import torch

    return {torch.nn.functional.scaled_dot_product_attention: _lowered}
