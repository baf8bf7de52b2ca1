"""Library models by name (three of `hf:`) train on `jax:jit:fp32`: their own
PyTorch step (the library's forward and loss, the workload's optimizer) traces into one JAX
program, and 5 steps on one fixed synthetic batch lower the loss, through the Target API as the
bench drives it. Each is skipped, with its reason, where its library is not installed.

Sizes: each library's `tiny` preset, made smaller as tests/workloads/named does (32 px images; one
GPT-2 layer over windows of 16 tokens) so a trace costs seconds. GPT-2's dropout is off: its
masks are drawn by torch in eager and by JAX on the jax target, so with dropout the two targets
differ by the masks (1.7e-3 in the first loss); without it their losses can be compared. No
BatchNorm network is here: the torchax 0.0.13 that a fresh install of this project gets cannot
differentiate BatchNorm in training mode (docs/targets.md).
"""

from __future__ import annotations

import functools
import importlib.util
import math

import pytest
import torch

from trainspeed.targets import get_target
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.workloads import get_workload, resolve_size

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
    # tracing and compiling a library's network takes 5-10 s of CPU per model
    pytest.mark.slow,
]

STEPS, BATCH = 5, 8
MODELS = {
    "hf:gpt2": ("transformers", "tiny,n_layer=1,seq=16,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"),
    "hf:bert": ("transformers", "tiny"),
    "hf:llama": ("transformers", "tiny"),
}
"""name -> (the library it needs, the size it trains at)."""


def needs_library(name: str) -> None:
    library = MODELS[name][0]
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{name} needs {library}, which is not installed")


@functools.cache
def losses(target_name: str, name: str) -> tuple[float, ...]:
    """STEPS steps of a fresh trainable (seed 0) on one fixed synthetic batch (seed 0), read once
    after the last step (the jax family's losses are pending until read). Cached: a model is traced
    once for the tests that read its losses."""
    import jax

    workload = get_workload(name)
    size = resolve_size(workload, MODELS[name][1])
    target = get_target(target_name)
    with jax.default_matmul_precision("float32"):
        trainable = target.build(workload, size, 0)
        batch = target.move_batch(workload.synthetic_batch(size, BATCH, torch.Generator().manual_seed(0)))
        values = torch.stack([target.run_step(trainable, batch) for _ in range(STEPS)]).tolist()
    target.sync()
    return tuple(values)


@pytest.mark.parametrize("name", MODELS)
def test_a_named_model_s_loss_falls_over_a_few_jax_steps(name: str) -> None:
    needs_library(name)
    traced = losses("jax:jit:fp32", name)
    assert all(math.isfinite(loss) for loss in traced), traced
    # far beyond rounding (BERT's masked-token loss falls least: ~0.09 over these steps)
    assert traced[-1] < traced[0] - 0.05, traced
    assert traced[-1] < min(traced[:-1]), traced


def test_gpt2_s_first_loss_is_eager_pytorch_s() -> None:
    """Without dropout, the first step's loss is one forward from the same weights: eager's to
    float rounding (observed 7e-8 relative)."""
    needs_library("hf:gpt2")
    eager, traced = losses("cpu:eager:fp32", "hf:gpt2"), losses("jax:jit:fp32", "hf:gpt2")
    assert traced[0] == pytest.approx(eager[0], rel=1e-5)


def test_gpt2_trains_as_eager_pytorch() -> None:
    """Without dropout, GPT-2's jax losses are eager's (relative 1e-4, as the other workloads'
    in test_same_losses.py and test_train_cli.py). Its head shares the token embedding's weight:
    were the two untied on the way to JAX, each would get part of the gradient, and from the
    second step on the losses part (0.4% at the second step, and growing)."""
    needs_library("hf:gpt2")
    eager, traced = losses("cpu:eager:fp32", "hf:gpt2"), losses("jax:jit:fp32", "hf:gpt2")
    assert list(traced) == pytest.approx(list(eager), rel=1e-4), (traced, eager)
