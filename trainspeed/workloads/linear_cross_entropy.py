"""A language model's loss from its last hidden states and output layer, as one overridable function.

`linear_cross_entropy(hidden, weight, bias, labels)` is `F.cross_entropy(F.linear(hidden, weight,
bias).float(), labels)` over every token, the mean over tokens whose label is not `ignore_index`:
the loss of HF's causal models (logits in float32). Written out, the logits of every token over
the whole vocabulary exist at once: for GPT-2 at 32 windows of 1,024 tokens, 6.6 GB in float32,
and as much again for their gradient. As one function it can be lowered whole: the `jax` family
computes it over chunks of tokens, recomputing each chunk's logits in the backward pass
(`trainspeed.targets.jaxjit.lowerings.cross_entropy`), so no more than one chunk's logits exist.

It is a plain Python function that PyTorch's function overrides can intercept
(`torch.overrides.handle_torch_function`): every other target runs the PyTorch below, which
autograd, torch.compile, torch_xla and the FLOP counter see as the ordinary ops they are.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
                         ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """The mean cross-entropy of `labels` under the logits `hidden @ weight.T + bias` (module docstring)."""
    tensors = (hidden, weight, labels) if bias is None else (hidden, weight, bias, labels)
    if torch.overrides.has_torch_function(tensors):
        return torch.overrides.handle_torch_function(linear_cross_entropy, tensors, hidden, weight, bias, labels,
                                                     ignore_index=ignore_index)
    logits = F.linear(hidden, weight, bias).float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).long(), ignore_index=ignore_index)
