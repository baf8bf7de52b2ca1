"""Multi-head attention straight from a packed q/k/v projection, as one PyTorch op.

`qkv_attention(qkv, heads)` takes the `(batch, tokens, 3 x width)` output of one q/k/v Linear and
returns the heads' outputs merged back to `(batch, tokens, width)`: bidirectional, scaled by
1/sqrt(head dim), no mask, no dropout. Written as the usual view, transpose and
`scaled_dot_product_attention`, it is the same function; it is one op (`trainspeed::qkv_attention`,
`torch.library.custom_op`) so that a backend can lower the whole of it at once. The `jax` family
lowers it to a fused kernel on a TPU (`trainspeed.targets.jaxjit.qkv_attention`), where the head
split and merge and the per-head score tiles are otherwise most of attention's HBM traffic; every
other target runs the PyTorch below, so a workload that uses it runs everywhere.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def attention_reference(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    """The op's function in plain PyTorch: what every target other than the jax family runs."""
    batch, tokens, width = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
    q, k, v = (t.reshape(batch, tokens, heads, width // heads).transpose(1, 2) for t in qkv.split(width, dim=2))
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, tokens, width)


@torch.library.custom_op("trainspeed::qkv_attention", mutates_args=())
def qkv_attention(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    """Attention of a `(batch, tokens, 3 x width)` packed projection (module docstring)."""
    if qkv.dim() != 3 or qkv.shape[2] % (3 * heads):
        raise ValueError(f"qkv_attention: qkv of shape {tuple(qkv.shape)} is not (batch, tokens, 3 x heads x dim) "
                         f"for {heads} heads")
    return attention_reference(qkv, heads).contiguous()


@qkv_attention.register_fake
def _(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    return qkv.new_empty(qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3)


def _keep_input(ctx: torch.autograd.function.FunctionCtx, inputs: tuple, output: torch.Tensor) -> None:
    qkv, heads = inputs
    ctx.save_for_backward(qkv)
    ctx.heads = heads


def _gradient(ctx: torch.autograd.function.FunctionCtx, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
    """The reference's gradient, recomputed from the kept input (what a fused kernel keeps too)."""
    (qkv,) = ctx.saved_tensors
    with torch.enable_grad():
        leaf = qkv.detach().requires_grad_()
        (grad_qkv,) = torch.autograd.grad(attention_reference(leaf, ctx.heads), leaf, grad_output)
    return grad_qkv, None


qkv_attention.register_autograd(_gradient, setup_context=_keep_input)
