"""HF causal models compute their loss through one function (`linear_cross_entropy`) only where it
is their own loss: the same value as the model's forward, on every target; a model that changes its
logits (Gemma 2's soft cap) keeps its own forward."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from trainspeed.workloads import get_workload, resolve_size

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")


def built(name: str, size: str = "tiny"):
    workload = get_workload(name)
    size = resolve_size(workload, size)
    return workload, size, workload.build(size, seed=0)


@pytest.mark.parametrize("name", ["hf:gpt2", "hf:llama"])
def test_a_plain_causal_model_takes_the_one_function_loss_with_its_own_value(name: str) -> None:
    workload, size, trainable = built(name)
    assert trainable.one_loss_function
    model = trainable.networks["lm"]
    tokens = workload.synthetic_batch(size, 2, torch.Generator().manual_seed(0))["tokens"].long()
    model.eval()
    with torch.no_grad():
        own = type(model).forward(model, input_ids=tokens, labels=tokens, use_cache=False).loss
        assert float(model(input_ids=tokens, labels=tokens, use_cache=False).loss) == pytest.approx(float(own), rel=1e-5)


def test_a_model_that_caps_its_logits_keeps_its_own_loss() -> None:
    _, _, trainable = built("hf:gemma2")
    assert not trainable.one_loss_function
    assert "forward" not in vars(trainable.networks["lm"])


def test_a_masked_model_keeps_its_own_loss() -> None:
    _, _, trainable = built("hf:bert")
    assert not trainable.one_loss_function
