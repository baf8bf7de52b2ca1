"""A causal language model's loss from its base model's hidden states and its output layer, as
one function (`trainspeed.workloads.linear_cross_entropy`), so that a backend can compute it
without the logits of every token over the whole vocabulary at once.

HF's causal models compute `lm_head(hidden)` for every token and then the loss: at GPT-2's 50,257
tokens and 32 windows of 1,024 tokens, 6.6 GB of float32 logits and as much for their gradient,
which put batch 16 out of a TPU v5e's memory. Here the model's forward (an instance's own, so
DDP, torch.compile and a deep copy call it as the model's) runs its base model and hands the last
hidden states, the output layer's weight and bias and the labels to that one function.

Whether a model's loss is exactly that is not assumed: a model that scales, caps or slices its
logits (Gemma 2's soft cap, Cohere's logit scale) computes another loss. So before it is used,
the model's own loss and this one are computed on a few tokens, and a model whose two differ keeps
its own forward. On the meta device (FLOP counting) there are no values to compare; the two run
the same matmuls.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch import nn

from trainspeed.workloads.linear_cross_entropy import linear_cross_entropy

CHECK_TOKENS = 6
TOLERANCE = 1e-4
LOGIT_GAIN = 100.0
"""The output layer's weight is scaled by this while the two losses are compared: at a fresh
model's small logits every loss is near ln(vocabulary), whatever scale or cap the model applies;
at logits of tens the two part wherever the model changes its logits."""


def _parts(model: nn.Module) -> tuple[nn.Module, nn.Linear] | None:
    """The base model and the output layer, where the model is a base model under a Linear head."""
    base = getattr(model, "base_model", None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if base is None or base is model or not isinstance(head, nn.Linear):
        return None
    return base, head


def _forward_with_one_loss(self: nn.Module, input_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                           **keywords: Any) -> Any:
    """The model's forward where labels are given: the base model, then `linear_cross_entropy` of
    each token's next token (HF's shift: the last token predicts nothing)."""
    from transformers.modeling_outputs import CausalLMOutput

    if labels is None:
        return type(self).forward(self, input_ids=input_ids, **keywords)
    base, head = _parts(self)  # type: ignore[misc]
    hidden = base(input_ids=input_ids, **keywords).last_hidden_state
    return CausalLMOutput(loss=linear_cross_entropy(hidden[:, :-1], head.weight, head.bias, labels[:, 1:]))


def _same_loss(model: nn.Module, vocabulary: int, keywords: dict[str, Any]) -> bool:
    tokens = torch.arange(CHECK_TOKENS, device=next(model.parameters()).device)[None] % vocabulary
    head = model.get_output_embeddings()
    weight = head.weight.detach().clone()
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            head.weight.mul_(LOGIT_GAIN)
            own = type(model).forward(model, input_ids=tokens, labels=tokens, **keywords).loss
            one = _forward_with_one_loss(model, input_ids=tokens, labels=tokens, **keywords).loss
    except Exception:  # noqa: BLE001 - a model this forward cannot run keeps its own
        return False
    finally:
        with torch.no_grad():
            head.weight.copy_(weight)
        model.train(was_training)
    return bool(torch.isfinite(own)) and abs(float(one) - float(own)) <= TOLERANCE * max(1.0, abs(float(own)))


def install(model: nn.Module, vocabulary: int, keywords: dict[str, Any]) -> bool:
    """Give `model` the one-function loss where it is its own loss (module docstring); whether it did."""
    if _parts(model) is None:
        return False
    on_meta = next(model.parameters()).device.type == "meta"
    if not on_meta and not _same_loss(model, vocabulary, keywords):
        return False
    model.forward = types.MethodType(_forward_with_one_loss, model)
    return True
