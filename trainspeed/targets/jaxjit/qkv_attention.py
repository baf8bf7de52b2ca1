"""The jax family's lowering of `trainspeed::qkv_attention`: a fused Pallas kernel on a TPU.

XLA lowers attention over short sequences (Mahjong's 34 tokens, heads of 64) to per-(sample, head)
batched matmuls on 34-wide tiles, with the head split and merge as copies between them: on a TPU
v5e the profile puts a third of a large batch's step there, bound by HBM, with score tiles stored
at 3-4x their logical bytes (docs/tpu.md). The kernel here reads a block of samples' packed
q/k/v projection once into on-chip memory, computes every head's scores, softmax and weighted sum
there, and writes the merged heads: no transposes, no scores in HBM. Its backward pass (a second
kernel) recomputes the softmax from the same block and writes the packed gradient of q, k and v,
so only the projection is kept between the passes.

On any other platform the op is the same function in `jax.numpy` (`attention_reference`), chosen
when the program is lowered (`jax.lax.platform_dependent`), so an exported TPU program holds the
kernel while the same step traced on this CPU runs XLA's attention. The kernels also run on the CPU
in Pallas' interpreter (`interpret=True`), which is how the tests check them.
"""

from __future__ import annotations

import functools
from typing import Any

BLOCK_BYTES = 2 * 1024 * 1024
"""On-chip bytes of one block's packed projection: the kernels hold the input, the output and their
next blocks (Pallas double-buffers them) and the per-head temporaries within the TPU's default
scoped VMEM of 16 MiB."""

MOST_SAMPLES_PER_BLOCK = 16


def samples_per_block(batch: int, tokens: int, packed_width: int, itemsize: int) -> int:
    """The largest power of two of samples per kernel step that divides the batch and fits `BLOCK_BYTES`."""
    per_sample = tokens * packed_width * itemsize
    samples = MOST_SAMPLES_PER_BLOCK
    while samples > 1 and (batch % samples or samples * per_sample > BLOCK_BYTES):
        samples //= 2
    return samples


def attention_reference(qkv: Any, heads: int) -> Any:
    """The op's function in jax.numpy: softmax in fp32, products in the input's dtype."""
    import jax
    import jax.numpy as jnp

    batch, tokens, width = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
    dim = width // heads
    q, k, v = (part.reshape(batch, tokens, heads, dim) for part in jnp.split(qkv, 3, axis=-1))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * dim**-0.5
    weights = jax.nn.softmax(scores, axis=-1).astype(qkv.dtype)
    merged = jnp.einsum("bhqk,bkhd->bqhd", weights, v, preferred_element_type=jnp.float32)
    return merged.astype(qkv.dtype).reshape(batch, tokens, width)


def _lanes(part: int, head: int, width: int, dim: int) -> slice:
    """Head `head`'s lanes of q (part 0), k (1) or v (2) in a packed projection, or of the merged
    heads (part 0 of a `width`-wide array)."""
    start = part * width + head * dim
    return slice(start, start + dim)


def _softmax_weights(q: Any, k: Any, scale: float) -> Any:
    import jax.numpy as jnp

    scores = jnp.einsum("bqd,bkd->bqk", q, k, preferred_element_type=jnp.float32) * scale
    exponentials = jnp.exp(scores - jnp.max(scores, axis=-1, keepdims=True))
    return exponentials / jnp.sum(exponentials, axis=-1, keepdims=True)


def _forward_kernel(qkv_ref: Any, out_ref: Any, *, heads: int, dim: int) -> None:
    import jax.numpy as jnp

    width = heads * dim
    for head in range(heads):
        q, k, v = (qkv_ref[:, :, _lanes(part, head, width, dim)] for part in range(3))
        weights = _softmax_weights(q, k, dim**-0.5).astype(v.dtype)
        merged = jnp.einsum("bqk,bkd->bqd", weights, v, preferred_element_type=jnp.float32)
        out_ref[:, :, _lanes(0, head, width, dim)] = merged.astype(out_ref.dtype)


def _backward_kernel(qkv_ref: Any, grad_out_ref: Any, grad_qkv_ref: Any, *, heads: int, dim: int) -> None:
    import jax.numpy as jnp

    width, scale = heads * dim, dim**-0.5
    for head in range(heads):
        q, k, v = (qkv_ref[:, :, _lanes(part, head, width, dim)] for part in range(3))
        grad_out = grad_out_ref[:, :, _lanes(0, head, width, dim)]
        weights = _softmax_weights(q, k, scale)
        grad_v = jnp.einsum("bkq,bqd->bkd", jnp.swapaxes(weights, 1, 2).astype(grad_out.dtype), grad_out,
                            preferred_element_type=jnp.float32)
        grad_weights = jnp.einsum("bqd,bkd->bqk", grad_out, v, preferred_element_type=jnp.float32)
        grad_scores = weights * (grad_weights - jnp.sum(weights * grad_weights, axis=-1, keepdims=True)) * scale
        grad_q = jnp.einsum("bqk,bkd->bqd", grad_scores.astype(k.dtype), k, preferred_element_type=jnp.float32)
        grad_k = jnp.einsum("bkq,bqd->bkd", jnp.swapaxes(grad_scores, 1, 2).astype(q.dtype), q,
                            preferred_element_type=jnp.float32)
        for part, grad in enumerate((grad_q, grad_k, grad_v)):
            grad_qkv_ref[:, :, _lanes(part, head, width, dim)] = grad.astype(grad_qkv_ref.dtype)


def _blocked_call(kernel: Any, qkv: Any, extra: tuple, out_width: int, heads: int, interpret: bool) -> Any:
    """`kernel` over the batch in blocks of samples: each step's blocks hold whole samples."""
    import jax
    from jax.experimental import pallas as pl

    batch, tokens, packed = qkv.shape
    samples = samples_per_block(batch, tokens, packed, qkv.dtype.itemsize)

    def spec(width: int) -> Any:
        return pl.BlockSpec((samples, tokens, width), lambda step: (step, 0, 0))

    return pl.pallas_call(
        functools.partial(kernel, heads=heads, dim=packed // 3 // heads),
        grid=(batch // samples,),
        in_specs=[spec(packed), *(spec(array.shape[2]) for array in extra)],
        out_specs=spec(out_width),
        out_shape=jax.ShapeDtypeStruct((batch, tokens, out_width), qkv.dtype),
        interpret=interpret,
    )(qkv, *extra)


@functools.lru_cache(maxsize=None)
def _kernel_attention(heads: int, interpret: bool) -> Any:
    """The fused forward and backward kernels as one differentiable function of the projection."""
    import jax

    @jax.custom_vjp
    def attention(qkv: Any) -> Any:
        return _blocked_call(_forward_kernel, qkv, (), qkv.shape[2] // 3, heads, interpret)

    def forward(qkv: Any) -> tuple[Any, Any]:
        return attention(qkv), qkv

    def backward(qkv: Any, grad_out: Any) -> tuple[Any]:
        return (_blocked_call(_backward_kernel, qkv, (grad_out.astype(qkv.dtype),), qkv.shape[2], heads, interpret),)

    attention.defvjp(forward, backward)
    return attention


def attention_kernels(qkv: Any, heads: int, interpret: bool = False) -> Any:
    """The Pallas kernels themselves (on a TPU; anywhere with `interpret=True`)."""
    return _kernel_attention(heads, interpret)(qkv)


def qkv_attention(qkv: Any, heads: int) -> Any:
    """The op's lowering: the kernels where the program is lowered for a TPU, jax.numpy elsewhere."""
    import jax

    from trainspeed.jaxrt.placement import per_device_batch

    def either(qkv: Any) -> Any:
        return jax.lax.platform_dependent(qkv, tpu=functools.partial(attention_kernels, heads=heads),
                                          default=functools.partial(attention_reference, heads=heads))
    return per_device_batch(either, (qkv,))  # a kernel runs on one device's samples


def register(env: Any) -> None:
    """Make torchax's environment lower `trainspeed::qkv_attention` with `qkv_attention`."""
    import torch
    from torchax.ops import ops_registry

    import trainspeed.workloads.qkv_attention  # noqa: F401 - defines the op

    op = torch.ops.trainspeed.qkv_attention.default
    if op not in ops_registry.all_aten_ops:
        ops_registry.register_torch_dispatch_op(op, qkv_attention, is_jax_function=True)
        env.load_ops()
