"""A parameter shared by two modules (tied weights: GPT-2's output layer and token embedding, an
autoencoder's encoder and decoder) is one parameter on the jax family as in eager PyTorch: one
leaf of the state, updated once with the sum of its uses' gradients. So the jax steps of a toy
with a tied layer give eager's losses (relative 1e-5, as test_same_losses.py: the losses move by
~1% a step, and two untied copies each get only their part of the gradient).

The family moves the networks to torchax with `torch.__future__`'s parameter swapping on:
otherwise `Module._apply` gives each module its own new Parameter when the tensor type changes
(torchax's tensors cannot take a plain `.data` swap), and the tie would be gone before the
optimizer is set up.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional

from trainspeed.targets import get_target
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.workloads.base import Batch, Trainable

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None,
                                reason=str(JaxTarget.unavailable_reason()))

FEATURES, BATCH, STEPS, RELATIVE = 8, 16, 6, 1e-5
class TiedNetwork(nn.Module):
    """Two square layers sharing one weight (the same Parameter object), as a tied model has it."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(FEATURES, FEATURES)
        self.second = nn.Linear(FEATURES, FEATURES)
        self.second.weight = self.first.weight

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.second(torch.tanh(self.first(inputs)))


class Tied(Trainable):
    def __init__(self, seed: int) -> None:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            network = TiedNetwork()
        super().__init__({"net": network})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=0.1)}

    def train_step(self, batch: Batch) -> torch.Tensor:
        loss = functional.mse_loss(self.wrapped["net"](batch["x"]), batch["y"])
        loss.backward()
        self.optimizers["net"].step()
        self.optimizers["net"].zero_grad()
        return loss.detach()


class TiedWorkload:
    """Learns y = x reversed (a target a tied pair can approach, so the loss keeps moving)."""

    name = "tied"
    sizes = ("tiny",)

    def build(self, size: str, seed: int = 0) -> Tied:
        return Tied(seed)

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        inputs = torch.randn(batch_size, FEATURES, generator=generator)
        return {"x": inputs, "y": inputs.flip(1)}

    def flops_per_sample(self, size: str) -> float:
        return 12.0 * FEATURES * FEATURES


def losses(target_name: str) -> list[float]:
    target = get_target(target_name)
    workload = TiedWorkload()
    trainable = target.build(workload, "tiny", 0)
    batch = target.move_batch(workload.synthetic_batch("tiny", BATCH, torch.Generator().manual_seed(0)))
    values = torch.stack([target.run_step(trainable, batch) for _ in range(STEPS)]).tolist()
    target.sync()
    return values


@pytest.mark.parametrize("target_name", ["cpu:eager:fp32", "jax:jit:fp32", "jax:jit:bf16:bf16-state"])
def test_the_tied_weight_is_one_parameter_once_built_on_the_target(target_name: str) -> None:
    """Eager PyTorch holds the tied weight once (3 parameters, not 4), and so does the network the
    jax family moved to its tensors, also where it then cast the state to bfloat16."""
    network = get_target(target_name).build(TiedWorkload(), "tiny", 0).networks["net"]
    assert len(list(network.parameters())) == 3 and network.first.weight is network.second.weight


def test_a_tied_weight_trains_as_one_parameter_on_jax() -> None:
    eager, traced = losses("cpu:eager:fp32"), losses("jax:jit:fp32")
    assert eager[-1] < eager[0] * 0.95, eager  # the batch is learnable: equal losses mean equal updates
    assert traced[0] == pytest.approx(eager[0], rel=RELATIVE)  # the same forward before any update
    assert traced == pytest.approx(eager, rel=RELATIVE), (traced, eager)


def test_a_tied_weight_stays_tied_in_the_jax_trainables_checkpoint() -> None:
    """After steps, the checkpoint's two names of the tied weight hold one value (torch's own
    state_dict of a tied module lists both names, with one tensor)."""
    target = get_target("jax:jit:fp32")
    workload = TiedWorkload()
    trainable = target.build(workload, "tiny", 0)
    batch = target.move_batch(workload.synthetic_batch("tiny", BATCH, torch.Generator().manual_seed(0)))
    for _ in range(3):
        target.run_step(trainable, batch)
    target.sync()
    weights = trainable.state_dict()["networks"]["net"]
    assert torch.equal(weights["first.weight"], weights["second.weight"])
