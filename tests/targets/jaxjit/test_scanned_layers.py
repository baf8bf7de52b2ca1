"""The jax family's `scan-layers` and `remat` options: a network's repeated layers traced once as a
scan give the losses, buffers and checkpoint of the unrolled step; layers that compute other
functions stay apart, and a loop that cannot be one scan is refused in one line."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trainspeed
from trainspeed.errors import UsageError
from trainspeed.targets import get_target
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
              pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64")]

STEPS, BATCH, WIDTH = 3, 8, 16


class Block(nn.Module):
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.linear, self.norm, self.scale = nn.Linear(WIDTH, WIDTH), nn.BatchNorm1d(WIDTH), scale

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return x + self.scale * torch.tanh(self.norm(self.linear(x))) * gate


class Stack(nn.Module):
    """A loop over a ModuleList, as HF's models write it; `between` runs between two layers."""

    def __init__(self, scales: tuple[float, ...] = (1.0,) * 4, between: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block(scale) for scale in scales)
        self.sequential = nn.Sequential(*(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU()) for _ in range(3)))
        self.head, self.between = nn.Linear(WIDTH, 4), between

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(x.mean(dim=1, keepdim=True))
        for layer in self.layers:
            x = layer(x, gate)
            if self.between:
                x = x * 0.5
        return self.head(self.sequential(x))


def workload(**arguments) -> trainspeed.PiecesWorkload:
    return trainspeed.workload_from(
        model=functools.partial(Stack, **arguments), loss=lambda outputs, batch: F.cross_entropy(outputs, batch[1]),
        # SGD, not Adam: a Linear's bias before BatchNorm has no gradient but rounding, which Adam's
        # normalization would turn into full-size steps that differ with the order of summation
        optimizer=functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9),
        batch=(torch.randn(BATCH, WIDTH), torch.randint(0, 4, (BATCH,))))


def trained(target_name: str, pieces) -> tuple[list[float], dict, object]:
    import jax

    target = get_target(target_name)
    with jax.default_matmul_precision("float32"):
        trainable = target.build(pieces, pieces.default_size, 0)
        batch = target.move_batch(pieces.synthetic_batch(pieces.default_size, BATCH, torch.Generator().manual_seed(0)))
        losses = torch.stack([target.run_step(trainable, batch) for _ in range(STEPS)]).tolist()
    target.sync()
    return losses, trainable.state_dict(), trainable


@pytest.mark.parametrize("options", ["scan-layers", "scan-layers+remat", "scan-layers+remat-full"])
def test_scanned_layers_train_as_the_unrolled_step(options: str) -> None:
    pieces = workload()
    plain_losses, plain_state, _ = trained("jax:jit:fp32", pieces)
    losses, state, trainable = trained(f"jax:jit:fp32:{options}", pieces)
    assert losses == pytest.approx(plain_losses, rel=1e-5)
    assert state["networks"].keys() == plain_state["networks"].keys()
    for name, tensor in plain_state["networks"]["model"].items():  # BatchNorm's statistics came out of the scan too
        assert torch.allclose(state["networks"]["model"][name].float(), tensor.float(), rtol=1e-4, atol=1e-6), name
    scanner = trainable.functional.scanner
    assert scanner.layers_scanned >= 4 + 3 and scanner.runs_scanned >= 2


def test_layers_that_compute_other_functions_are_not_scanned_together() -> None:
    pieces = workload(scales=(1.0, 1.0, 0.5, 0.5))
    plain_losses, _, _ = trained("jax:jit:fp32", pieces)
    losses, _, trainable = trained("jax:jit:fp32:scan-layers", pieces)
    assert losses == pytest.approx(plain_losses, rel=1e-5)
    assert trainable.functional.scanner.layers_scanned < 4 + 3  # the four blocks are not one run


def test_a_loop_that_changes_the_hidden_state_between_layers_is_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="changes the hidden state between two layers"):
        trained("jax:jit:fp32:scan-layers", workload(between=True))


def test_remat_without_scan_layers_is_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="give it with scan-layers"):
        trained("jax:jit:fp32:remat", workload())


def test_two_recompute_policies_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="two recompute policies"):
        trained("jax:jit:fp32:scan-layers+remat+remat-full", workload())
