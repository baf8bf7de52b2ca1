"""Scaled-dot-product attention computed as its plain math (matmuls and a softmax), in this thread only.

Counting a step's FLOPs needs attention as matmuls: a fused kernel is one op whose inner matmuls
no counter sees. `torch.nn.attention.sdpa_kernel(SDPBackend.MATH)` would do it, but it sets the
process's backend flags and sets them back on exit: two threads in it at once (four
`trainspeed.bench` calls from four threads, each counting its workload's FLOPs) interleave their
save and restore, and the process is left with the math backend alone, for every later step of
every run in it. A torch function mode is the calling thread's own: it routes each
`F.scaled_dot_product_attention` call of the block to the math implementation, and touches no flag.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode


def _math_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any = None,
                    dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                    enable_gqa: bool = False) -> torch.Tensor:
    output, _weights = torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    return output


class MathAttention(TorchFunctionMode):
    """Within the block, on this thread, `F.scaled_dot_product_attention` runs as its math."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func is F.scaled_dot_product_attention:
            return _math_attention(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))
