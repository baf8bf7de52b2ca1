"""The jax family's `bf16-compute` option: the step computes with bfloat16 copies of float32
parameters (PyTorch FSDP's `param_dtype=torch.bfloat16`), so the residual stream and the bias adds
are bfloat16, while the parameters, their gradients and the optimizer's states stay float32."""

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


def trained(target_name: str) -> tuple[list[float], object, set[torch.dtype]]:
    """4 steps' losses, the trainable after them, and the dtypes the first block's output was traced in."""
    workload = get_workload("hf:gpt2")
    size = resolve_size(workload, SIZE)
    target = get_target(target_name)
    trainable = target.build(workload, size, 0)
    stream: set[torch.dtype] = set()
    first_block = trainable.functional.trainable.networks["lm"].transformer.h[0]
    first_block.register_forward_hook(lambda module, inputs, output: stream.add(output[0].dtype))
    batch = target.move_batch(workload.synthetic_batch(size, 8, torch.Generator().manual_seed(0)))
    losses = torch.stack([target.run_step(trainable, batch) for _ in range(4)]).tolist()
    target.sync()
    return losses, trainable, stream


def test_the_stream_is_bf16_the_state_float32_and_it_trains_as_autocast_does() -> None:
    reference, _, autocast_stream = trained("jax:jit:bf16")
    losses, trainable, stream = trained("jax:jit:bf16:bf16-compute")
    assert autocast_stream == {torch.float32} and stream == {torch.bfloat16}
    assert losses == pytest.approx(reference, rel=5e-3)  # bf16 activations' own rounding, over 4 AdamW steps
    assert losses[-1] < losses[0] - 0.1
    state = trainable.state
    kept = [name for name in state if name.startswith("param/") or name.endswith(("exp_avg", "exp_avg_sq"))]
    assert kept and {str(state[name].dtype) for name in kept} == {"float32"}


@pytest.mark.parametrize("name, message", [
    ("jax:jit:fp32:bf16-compute", "give it with the bf16 precision"),
    ("jax:jit:bf16:bf16-compute+bf16-state", "give one of the two"),
])
def test_a_combination_it_cannot_mean_is_refused_in_one_line(name: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        trained(name)


def test_a_cnn_whose_convolutions_take_bf16_inputs_trains_with_and_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its second convolution's input is the first's bf16 output: beside float32 weights (autocast)
    or rebound bfloat16 copies (bf16-compute), PyTorch's own conv2d refused it before the family
    cast its arguments and wrapped them anew (`lowerings.convolution`)."""
    from child_commands import EXAMPLES

    monkeypatch.syspath_prepend(str(EXAMPLES))
    workload = get_workload("small_cnn_workload:SmallCNNWorkload")
    runs = {}
    for name in ("jax:jit:bf16", "jax:jit:bf16:bf16-compute"):
        target = get_target(name)
        trainable = target.build(workload, "tiny", 0)
        batch = target.move_batch(workload.synthetic_batch("tiny", 8, torch.Generator().manual_seed(0)))
        runs[name] = torch.stack([target.run_step(trainable, batch) for _ in range(3)]).tolist()
        target.sync()
    autocast, computed = runs.values()
    assert computed == pytest.approx(autocast, rel=2e-2) and computed[-1] < computed[0]
