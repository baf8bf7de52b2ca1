"""The jax family's `bf16-state` option: parameters and optimizer states held in bfloat16 (half the
memory of float32 master weights), training as the float32-state step does to bf16's precision,
tied weights still one tensor."""

from __future__ import annotations

import pytest
import torch

from trainspeed.errors import UsageError
from trainspeed.targets import get_target
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.workloads import get_workload, resolve_size

pytestmark = [pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
              pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64")]

SIZE = "tiny,n_layer=1,seq=16,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"


def trained(target_name: str) -> tuple[list[float], object]:
    workload = get_workload("hf:gpt2")
    size = resolve_size(workload, SIZE)
    target = get_target(target_name)
    trainable = target.build(workload, size, 0)
    batch = target.move_batch(workload.synthetic_batch(size, 8, torch.Generator().manual_seed(0)))
    losses = torch.stack([target.run_step(trainable, batch) for _ in range(4)]).tolist()
    target.sync()
    return losses, trainable


def test_parameters_and_optimizer_states_are_bf16_and_train_as_float32_state_does() -> None:
    reference, _ = trained("jax:jit:bf16")
    losses, trainable = trained("jax:jit:bf16:bf16-state")
    assert losses == pytest.approx(reference, rel=2e-3)  # bf16 weights' own rounding, over 4 AdamW steps
    assert losses[-1] < losses[0] - 0.1
    state = trainable.state
    parameters = [name for name in state if name.startswith("param/")]
    moments = [name for name in state if name.startswith("optim/") and name.endswith(("exp_avg", "exp_avg_sq"))]
    assert parameters and moments
    assert {str(state[name].dtype) for name in parameters + moments} == {"bfloat16"}


def test_a_tied_weight_stays_one_leaf() -> None:
    _, trainable = trained("jax:jit:bf16:bf16-state")
    names = [name for name in trainable.state if name.startswith("param/") and ("wte" in name or "lm_head" in name)]
    assert names == ["param/lm/transformer.wte.weight"], names


def test_bf16_state_with_float32_compute_is_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="give it with the bf16 precision"):
        trained("jax:jit:fp32:bf16-state")
